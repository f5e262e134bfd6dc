package worker

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"strings"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/weft-dev/weft/internal/logattr"
	"github.com/weft-dev/weft/internal/setup"
	"github.com/weft-dev/weft/internal/workqueue"
)

// Worker announcements. A running worker keeps an entry in the JetStream KV
// bucket workqueue.WorkersBucket under its name, saying which queues it pulls from and
// which node types it serves. It refreshes the entry every announce interval;
// the bucket's TTL (workqueue.AnnounceTTL) removes the entry of a worker that died, and
// a worker that stops cleanly deletes its own. The entries are a read model
// for operators and the CLI: nothing in the engine depends on them. Work of a
// node type no live worker serves is not failed: it stays in its queue (as
// node status "ready") until a worker for it comes.

// Protocol is the version of the wire protocol this worker speaks
// (docs/worker-protocol.md), written in its announcement.
const Protocol = "weft-worker/1"

// Announcement is a live worker's entry in workqueue.WorkersBucket.
type Announcement struct {
	Name string `json:"name"`
	// Protocol is the wire protocol the worker speaks ("weft-worker/1");
	// empty for workers older than the field.
	Protocol  string    `json:"protocol,omitempty"`
	Queues    []string  `json:"queues"`
	Types     []string  `json:"types"`
	Started   time.Time `json:"started"`
	Heartbeat time.Time `json:"heartbeat"`
}

// Serves reports whether the worker serves node type typ on queue.
func (a *Announcement) Serves(queue, typ string) bool {
	return slices.Contains(a.Queues, queue) && slices.Contains(a.Types, typ)
}

// WithAnnounceInterval sets how often the worker refreshes its announcement
// (default 10s); a negative interval turns announcements off. An interval
// longer than workqueue.AnnounceTTL lets the entry lapse between refreshes.
func WithAnnounceInterval(d time.Duration) Option {
	return func(o *options) { o.announce = d }
}

// workersKV returns the announcements bucket, creating it if missing with
// as many replicas as the events stream has: it is shared like the log.
// An existing bucket is used as it is (differences logged once).
func workersKV(ctx context.Context, js jetstream.JetStream, stream string, log *slog.Logger) (jetstream.KeyValue, error) {
	replicas, err := setup.StreamReplicas(ctx, js, stream)
	if err != nil {
		return nil, err
	}
	return setup.EnsureKV(ctx, js, workqueue.WorkersKVConfig(replicas), log)
}

// announceKey is a worker name made safe as a KV key.
func announceKey(name string) string {
	return strings.Map(func(r rune) rune {
		switch {
		case r >= 'a' && r <= 'z', r >= 'A' && r <= 'Z', r >= '0' && r <= '9', r == '-', r == '_', r == '=', r == '.':
			return r
		}
		return '_'
	}, name)
}

// announcer keeps the worker's entry fresh until stop is called.
type announcer struct {
	kv   jetstream.KeyValue
	key  string
	ann  Announcement
	done chan struct{}
	quit chan struct{}
}

// announce starts announcing the worker; it returns nil (and logs) when the
// bucket cannot be had, as announcements are not essential.
func (w *Worker) announce(ctx context.Context) *announcer {
	every := w.opts.announce
	if every < 0 {
		return nil
	}
	if every == 0 {
		every = workqueue.DefaultAnnounceInterval
	}
	setup, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	kv, err := workersKV(setup, w.js, w.store.StreamName(), w.log)
	if err != nil {
		w.log.Warn("announcing the worker", logattr.Error, err)
		return nil
	}
	now := time.Now().UTC()
	a := &announcer{
		kv:   kv,
		key:  announceKey(w.opts.name),
		ann:  Announcement{Name: w.opts.name, Protocol: Protocol, Queues: w.opts.queues, Types: w.Types(), Started: now},
		done: make(chan struct{}),
		quit: make(chan struct{}),
	}
	a.put(setup, w)
	go func() {
		defer close(a.done)
		t := time.NewTicker(every)
		defer t.Stop()
		for {
			select {
			case <-a.quit:
				return
			case <-t.C:
				ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
				a.ann.Types = w.Types()
				a.put(ctx, w)
				cancel()
			}
		}
	}()
	return a
}

func (a *announcer) put(ctx context.Context, w *Worker) {
	a.ann.Heartbeat = time.Now().UTC()
	b, _ := json.Marshal(a.ann)
	if _, err := a.kv.Put(ctx, a.key, b); err != nil {
		w.log.Warn("refreshing the worker's announcement", logattr.Error, err)
	}
}

// stop ends the refreshes and deletes the entry.
func (a *announcer) stop(w *Worker) {
	if a == nil {
		return
	}
	close(a.quit)
	<-a.done
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if err := a.kv.Purge(ctx, a.key); err != nil {
		w.log.Warn("withdrawing the worker's announcement", logattr.Error, err)
	}
}

// LiveWorkers lists the workers whose announcements are current, sorted by
// name. It returns no workers, and no error, when no worker ever announced.
func LiveWorkers(ctx context.Context, js jetstream.JetStream) ([]Announcement, error) {
	if _, ok := ctx.Deadline(); !ok {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, 10*time.Second)
		defer cancel()
	}
	kv, err := js.KeyValue(ctx, workqueue.WorkersBucket)
	if errors.Is(err, jetstream.ErrBucketNotFound) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("opening %s: %w", workqueue.WorkersBucket, err)
	}
	// The keys from the bucket stream's subject index, not a key lister:
	// a lister is a consumer, which readers may not create
	// (deploy/SECURITY.md).
	st, err := js.Stream(ctx, "KV_"+workqueue.WorkersBucket)
	if err != nil {
		return nil, fmt.Errorf("listing %s: %w", workqueue.WorkersBucket, err)
	}
	prefix := "$KV." + workqueue.WorkersBucket + "."
	info, err := st.Info(ctx, jetstream.WithSubjectFilter(prefix+">"))
	if err != nil {
		return nil, fmt.Errorf("listing %s: %w", workqueue.WorkersBucket, err)
	}
	keys := make([]string, 0, len(info.State.Subjects))
	for subj := range info.State.Subjects {
		keys = append(keys, strings.TrimPrefix(subj, prefix))
	}
	slices.Sort(keys)
	var out []Announcement
	for _, k := range keys {
		e, err := kv.Get(ctx, k)
		if errors.Is(err, jetstream.ErrKeyNotFound) {
			continue // withdrawn or expired meanwhile
		}
		if err != nil {
			return nil, fmt.Errorf("reading %s/%s: %w", workqueue.WorkersBucket, k, err)
		}
		var a Announcement
		if json.Unmarshal(e.Value(), &a) != nil {
			continue
		}
		out = append(out, a)
	}
	slices.SortFunc(out, func(a, b Announcement) int { return strings.Compare(a.Name, b.Name) })
	return out, nil
}
