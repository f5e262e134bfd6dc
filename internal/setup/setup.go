// Package setup creates and checks the JetStream resources Weft's processes
// share (the events and timers streams, the queue and coordinator
// consumers, the KV buckets, the archive's object store), and retries
// setup while NATS is not ready. It is the one place that creates them
// (create.go: CreateStream, CreateConsumer, CreateKV, CreateObjectStore);
// each resource's configuration stays with its owner (eventlog, workqueue,
// coordinator, runs), and internal/provision is the admin's set of them
// ('weft roles -setup', the embedded engine under roles, the tests).
// Layer: a foundation; it imports nothing of Weft's but logattr.
//
// The rule for shared settings: a process creates a missing resource with
// its own configuration; an existing one is used as it is, and each setting
// that differs from the process's configuration is logged once (WarnDiffs),
// never rewritten. Only an operator changes a live setting, on purpose,
// with 'weft admin apply'. A difference that Weft cannot run with (a stream
// without message schedules, say) is an error that names the setting and
// the command that fixes it; what counts as unsafe is decided where the
// resource is known (package events for the stream, package worker for
// the queues, package coordinator for its consumer).
//
// Retry is the daemons' way through an outage: a server still starting, a
// cluster electing its leaders, a lost server. It retries with capped
// exponential back-off and logs each distinct error once.
package setup

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/weft-dev/weft/internal/logattr"
)

// Diff is one setting of a live resource that differs from what a process
// was configured with.
type Diff struct {
	Setting string
	Have    any
	Want    any
}

func (d Diff) String() string { return fmt.Sprintf("%s: have %v, want %v", d.Setting, d.Have, d.Want) }

// warned holds the differences logged so far, per scope (a JetStream
// context: one process's view of one server), so that a process that opens
// a resource many times (every retry, every queue check) says it once.
var warned sync.Map

// WarnDiffs logs each difference once per scope, as a warning naming the
// resource, the setting, what it has and what the process wanted.
func WarnDiffs(log *slog.Logger, scope any, resource string, diffs []Diff) {
	if log == nil {
		log = slog.Default()
	}
	for _, d := range diffs {
		key := struct {
			scope any
			res   string
			d     string
		}{scope, resource, d.String()}
		if _, seen := warned.LoadOrStore(key, true); seen {
			continue
		}
		log.Warn("using the live setting, not this process's (change it with 'weft admin apply')",
			logattr.Resource, resource, logattr.Setting, d.Setting, logattr.Have, fmt.Sprint(d.Have), logattr.Want, fmt.Sprint(d.Want))
	}
}

// Compare appends a Diff to diffs when have and want differ.
func Compare[T comparable](diffs []Diff, setting string, have, want T) []Diff {
	if have != want {
		diffs = append(diffs, Diff{Setting: setting, Have: have, Want: want})
	}
	return diffs
}

// Back-off of Retry.
const (
	FirstWait = 100 * time.Millisecond
	MaxWait   = 5 * time.Second
)

// maxSeen bounds the distinct errors a Backoff remembers; past it, it
// forgets them all and may log each once more.
const maxSeen = 64

// Backoff is capped exponential back-off with a log that says each
// distinct error once. The zero value is ready to use.
type Backoff struct {
	wait time.Duration
	seen map[string]bool
}

// Wait waits for the current delay (FirstWait at first, doubling up to
// MaxWait), or until ctx ends: then it returns false.
func (b *Backoff) Wait(ctx context.Context) bool {
	if b.wait == 0 {
		b.wait = FirstWait
	}
	t := time.NewTimer(b.wait)
	defer t.Stop()
	b.wait = min(2*b.wait, MaxWait)
	select {
	case <-ctx.Done():
		return false
	case <-t.C:
		return true
	}
}

// Reset starts the delays over, after a success.
func (b *Backoff) Reset() { b.wait = 0 }

// Warn logs msg with err unless this error was logged already; it
// reports whether it logged.
func (b *Backoff) Warn(log *slog.Logger, msg, what string, err error) bool {
	text := err.Error()
	if b.seen[text] {
		return false
	}
	if b.seen == nil || len(b.seen) >= maxSeen {
		b.seen = map[string]bool{}
	}
	b.seen[text] = true
	log.Warn(msg, logattr.For, what, logattr.Error, text, logattr.Retry, "with back-off up to "+MaxWait.String())
	return true
}

// Retry calls fn until it succeeds, fatal says its error is one that
// waiting cannot fix (a configuration error), or ctx ends. Between tries
// it backs off (see Backoff). It logs what it waits for, once per distinct
// error, and once more when it got there after waiting. It returns fn's
// last error when ctx ends, joined with ctx's.
func Retry(ctx context.Context, log *slog.Logger, what string, fatal func(error) bool, fn func(context.Context) error) error {
	if log == nil {
		log = slog.Default()
	}
	var b Backoff
	for tries := 1; ; tries++ {
		err := fn(ctx)
		if err == nil {
			if tries > 1 {
				log.Info("ready after waiting", logattr.For, what, logattr.Tries, tries)
			}
			return nil
		}
		if fatal != nil && fatal(err) {
			return err
		}
		if ctx.Err() != nil {
			return errors.Join(err, context.Cause(ctx))
		}
		b.Warn(log, "waiting for NATS", what, err)
		if !b.Wait(ctx) {
			return errors.Join(err, context.Cause(ctx))
		}
	}
}

// ErrNotConnected says the connection to NATS is down (not up yet, or
// reconnecting): a request would only wait out its timeout.
var ErrNotConnected = errors.New("not connected to NATS")

// Connected returns ErrNotConnected, with the connection's status and
// last error (an authorization error, say, which the caller may take as
// fatal), unless nc is connected.
func Connected(nc *nats.Conn) error {
	if nc.IsConnected() {
		return nil
	}
	if last := nc.LastError(); last != nil {
		return fmt.Errorf("%w (%s): %w", ErrNotConnected, nc.Status(), last)
	}
	return fmt.Errorf("%w (%s)", ErrNotConnected, nc.Status())
}

// EnsureKV returns a KV bucket, creating it with cfg when it is missing.
// An existing bucket is used as it is; its replicas, TTL and history, where
// they differ from cfg, are logged once.
func EnsureKV(ctx context.Context, js jetstream.JetStream, cfg jetstream.KeyValueConfig, log *slog.Logger) (jetstream.KeyValue, error) {
	kv, created, err := CreateKV(ctx, js, cfg)
	if err == nil && created {
		return kv, nil
	}
	if err != nil {
		return nil, fmt.Errorf("setting up KV bucket %s: %w", cfg.Bucket, err)
	}
	st, err := kv.Status(ctx)
	if err != nil {
		return nil, fmt.Errorf("reading KV bucket %s: %w", cfg.Bucket, err)
	}
	WarnDiffs(log, js, "KV bucket "+cfg.Bucket, KVDiffs(st, cfg))
	return kv, nil
}

// KVDiffs lists the settings of a live bucket that differ from cfg (the
// settings Weft sets on its buckets: replicas, TTL, history).
func KVDiffs(st jetstream.KeyValueStatus, cfg jetstream.KeyValueConfig) []Diff {
	var diffs []Diff
	if bs, ok := st.(*jetstream.KeyValueBucketStatus); ok {
		diffs = Compare(diffs, "replicas", bs.StreamInfo().Config.Replicas, max(cfg.Replicas, 1))
	}
	diffs = Compare(diffs, "ttl", st.TTL(), cfg.TTL)
	diffs = Compare(diffs, "history", st.History(), int64(max(cfg.History, 1)))
	return diffs
}

// StreamReplicas is the replica count of a live stream: the count Weft's
// KV buckets are created with, so that they are as durable as the log.
func StreamReplicas(ctx context.Context, js jetstream.JetStream, stream string) (int, error) {
	s, err := js.Stream(ctx, stream)
	if err != nil {
		return 0, fmt.Errorf("reading the replicas of stream %s: %w", stream, err)
	}
	return max(s.CachedInfo().Config.Replicas, 1), nil
}
