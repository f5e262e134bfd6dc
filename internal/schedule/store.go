package schedule

import (
	"github.com/weft-dev/weft/internal/setup"

	"context"
	"crypto/hmac"
	"crypto/rand"
	"crypto/sha256"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"sync/atomic"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/weft-dev/weft/internal/eventlog"
	"github.com/weft-dev/weft/internal/readmodel"
)

// The buckets. Definitions, state, requests and their results are in
// Bucket, which the roles that manage and read schedules may read; the
// keys runs ids are derived from are in KeysBucket, which only the
// coordinators (and the admin) may read or write, so no one else can
// compute a run id before the engine starts the run.
const (
	Bucket     = "weft-schedules"
	KeysBucket = "weft-start-keys"
)

// Keys in Bucket.
const (
	defPrefix = "def." // def.<name>: Definition, written by its owner
	stPrefix  = "st."  // st.<name>: State, written by coordinators only
	actPrefix = "act." // act.<name>.<id>: Request, written by its owner
	resPrefix = "res." // res.<name>.<id>: Result, written by coordinators
)

// Errors.
var (
	ErrNotFound = errors.New("schedule not found")
	ErrExists   = errors.New("schedule exists")
	// ErrNoBucket: the schedules bucket is missing (the admin creates it:
	// 'weft roles -setup', or any coordinator without the roles).
	ErrNoBucket = errors.New("schedules bucket missing")
)

// KVConfigs are the buckets as the owner of resources creates them.
func KVConfigs(replicas int) []jetstream.KeyValueConfig {
	return []jetstream.KeyValueConfig{
		{Bucket: Bucket, Description: "Weft schedules: definitions, fire state, trigger and backfill requests", History: 1, Replicas: replicas},
		{Bucket: KeysBucket, Description: "Weft keys run ids of schedules and triggers are derived from (coordinators only)", History: 1, Replicas: replicas},
	}
}

// Fire outcomes.
const (
	Started         = "started"
	SkippedCatchup  = "skipped-catchup"
	SkippedOverlap  = "skipped-overlap"
	SkippedPaused   = "skipped-paused"
	Buffered        = "buffered"
	StartFailed     = "failed"
	TriggeredByHand = "triggered"
	Backfilled      = "backfilled"
)

// Fire is one fire time handled: what it did.
type Fire struct {
	Nominal time.Time `json:"nominal"`
	Outcome string    `json:"outcome"`
	RunID   string    `json:"runId,omitempty"`
	// At is when it was handled.
	At     time.Time `json:"at"`
	Reason string    `json:"reason,omitempty"`
}

// MaxFires is how many fires State keeps.
const MaxFires = 50

// State is what the coordinators know of a schedule, under "st.<name>",
// changed by compare-and-set only.
type State struct {
	// Last is the latest nominal fire time handled: the next fires come
	// after it.
	Last time.Time `json:"last"`
	// Fires are the latest fires handled, oldest first.
	Fires []Fire `json:"fires,omitempty"`
	// Skipped counts the fires skipped, by outcome.
	Skipped map[string]int `json:"skipped,omitempty"`
	// Running are the runs started that were not known to have ended.
	Running []string `json:"running,omitempty"`
	// Buffer is the nominal time of the fire kept by buffer-one.
	Buffer *time.Time `json:"buffer,omitempty"`
}

func (s *State) record(f Fire) {
	s.Fires = append(s.Fires, f)
	if len(s.Fires) > MaxFires {
		s.Fires = s.Fires[len(s.Fires)-MaxFires:]
	}
	if strings.HasPrefix(f.Outcome, "skipped") {
		if s.Skipped == nil {
			s.Skipped = map[string]int{}
		}
		s.Skipped[f.Outcome]++
	}
}

// Request asks the coordinators to start runs now: one (trigger), or one
// per fire time of a past period (backfill).
type Request struct {
	Kind string    `json:"kind"` // "trigger" or "backfill"
	From time.Time `json:"from,omitzero"`
	To   time.Time `json:"to,omitzero"`
	At   time.Time `json:"at"`
}

// Result is what a request did.
type Result struct {
	Runs  []string `json:"runs,omitempty"`
	Error string   `json:"error,omitempty"`
}

// MaxBackfill is the most fires one backfill starts.
const MaxBackfill = 1000

// Store reads and writes schedules in the buckets.
type Store struct {
	kv jetstream.KeyValue
	js jetstream.JetStream
}

// Reads of the buckets are JetStream requests (a stream info that opens
// the bucket, a direct get, a batched direct get that lists keys), each
// answered by the bucket's stream leader or a replica. One sent while a
// NATS node restarts or a leader is being elected can be dropped with no
// answer at all, and a request waits for its answer as long as its
// context allows: a client that passed a deadline of minutes waited those
// minutes for one lost answer (what stalled
// TestScheduleFiresOnceThroughKills: DescribeSchedule hung through the
// rest of the drill while the coordinators kept firing). Reads are
// idempotent, so each try is bounded by readTry and a try lost so, or
// refused for want of a leader (no responders), is made again until ctx
// ends: TestReadsOutliveLostAnswers. A caller that set no deadline gets
// readPatience: a request refused by permissions is not answered either,
// and must fail some time.
const (
	readTry      = 5 * time.Second
	readPatience = 30 * time.Second
)

// shortTry and shortPatience, when set, replace readTry and
// readPatience (TestReadsOutliveLostAnswers).
var shortTry, shortPatience atomic.Int64

// orShort is d, or its replacement when one is set.
func orShort(d time.Duration, short *atomic.Int64) time.Duration {
	if s := short.Load(); s > 0 {
		return time.Duration(s)
	}
	return d
}

// read calls fn until it succeeds, fails otherwise than by a lost answer,
// or ctx ends, each try bounded by readTry.
func read[T any](ctx context.Context, fn func(context.Context) (T, error)) (T, error) {
	if _, ok := ctx.Deadline(); !ok {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, orShort(readPatience, &shortPatience))
		defer cancel()
	}
	pause := 50 * time.Millisecond
	for {
		try, cancel := context.WithTimeout(ctx, orShort(readTry, &shortTry))
		v, err := fn(try)
		cancel()
		if err == nil || ctx.Err() != nil || !lostAnswer(err) {
			return v, err
		}
		t := time.NewTimer(pause)
		select {
		case <-ctx.Done():
			t.Stop()
			return v, err
		case <-t.C:
		}
		pause = min(2*pause, time.Second)
	}
}

// lostAnswer says err is a request that got no answer in time, or that
// no server could answer yet: worth asking again.
func lostAnswer(err error) bool {
	return errors.Is(err, context.DeadlineExceeded) || errors.Is(err, nats.ErrTimeout) ||
		errors.Is(err, nats.ErrNoResponders) || errors.Is(err, jetstream.ErrNoStreamResponse)
}

// Open opens the schedules bucket.
func Open(ctx context.Context, js jetstream.JetStream) (*Store, error) {
	kv, err := read(ctx, func(ctx context.Context) (jetstream.KeyValue, error) { return js.KeyValue(ctx, Bucket) })
	if errors.Is(err, jetstream.ErrBucketNotFound) {
		return nil, fmt.Errorf("%w: KV bucket %s (the admin creates it: 'weft roles -setup', or start a coordinator)", ErrNoBucket, Bucket)
	}
	if err != nil {
		return nil, fmt.Errorf("opening KV bucket %s: %w", Bucket, err)
	}
	return &Store{kv: kv, js: js}, nil
}

// Definitions sealed: a schedule's or trigger's definition holds the
// input of the runs it starts (its template can hold customers' data), so
// with a key ring in use (eventlog.UseKeys) it is kept sealed like the
// events (eventlog.SealValue, bound to its key: a definition cannot be
// passed off as another's). Reading a sealed definition without its key
// is an error naming the key id (eventlog.ErrKeyMissing); a plain one,
// written before keys were configured, reads as it is.
const sealPurpose = "definition"

// SealDefinition seals the definition b kept under key (plain without a
// key ring).
func SealDefinition(key string, b []byte) ([]byte, error) {
	return eventlog.SealValue(sealPurpose, key, b)
}

// OpenDefinition opens what SealDefinition wrote under key (a plain
// value as it is).
func OpenDefinition(key string, b []byte) ([]byte, error) {
	return eventlog.OpenValue(sealPurpose, key, b)
}

func getJSON[T any](ctx context.Context, kv jetstream.KeyValue, key string) (*T, uint64, error) {
	e, err := read(ctx, func(ctx context.Context) (jetstream.KeyValueEntry, error) { return kv.Get(ctx, key) })
	if err != nil {
		return nil, 0, err
	}
	b, err := OpenDefinition(key, e.Value())
	if err != nil {
		return nil, 0, fmt.Errorf("key %s of %s: %w", key, kv.Bucket(), err)
	}
	v := new(T)
	if err := json.Unmarshal(b, v); err != nil {
		return nil, 0, fmt.Errorf("key %s of %s: %w", key, kv.Bucket(), err)
	}
	return v, e.Revision(), nil
}

// Get returns a schedule's definition and its revision.
func (s *Store) Get(ctx context.Context, name string) (*Definition, uint64, error) {
	if !ValidName(name) {
		return nil, 0, fmt.Errorf("%w: %q", ErrNotFound, name)
	}
	d, rev, err := getJSON[Definition](ctx, s.kv, defPrefix+name)
	if errors.Is(err, jetstream.ErrKeyNotFound) {
		return nil, 0, fmt.Errorf("%w: %s", ErrNotFound, name)
	}
	return d, rev, err
}

// State returns a schedule's state (empty when no fire was handled).
func (s *Store) State(ctx context.Context, name string) (*State, uint64, error) {
	st, rev, err := getJSON[State](ctx, s.kv, stPrefix+name)
	if errors.Is(err, jetstream.ErrKeyNotFound) {
		return &State{}, 0, nil
	}
	return st, rev, err
}

// Create writes a new definition; ErrExists when the name is taken.
func (s *Store) Create(ctx context.Context, d *Definition) error {
	if err := d.Validate(); err != nil {
		return err
	}
	b, err := SealDefinition(defPrefix+d.Name, mustJSON(d))
	if err != nil {
		return err
	}
	if _, err := s.kv.Create(ctx, defPrefix+d.Name, b); err != nil {
		if setup.KVConflict(err) {
			return fmt.Errorf("%w: %s", ErrExists, d.Name)
		}
		return fmt.Errorf("creating schedule %s: %w", d.Name, err)
	}
	return nil
}

// Update changes a definition with fn, by compare-and-set.
func (s *Store) Update(ctx context.Context, name string, fn func(*Definition) error) (*Definition, error) {
	for {
		d, rev, err := s.Get(ctx, name)
		if err != nil {
			return nil, err
		}
		if err := fn(d); err != nil {
			return nil, err
		}
		if err := d.Validate(); err != nil {
			return nil, err
		}
		b, err := SealDefinition(defPrefix+name, mustJSON(d))
		if err != nil {
			return nil, err
		}
		_, err = s.kv.Update(ctx, defPrefix+name, b, rev)
		if err == nil {
			return d, nil
		}
		if !setup.KVConflict(err) { // a revision mismatch
			return nil, fmt.Errorf("updating schedule %s: %w", name, err)
		}
	}
}

// Delete removes a definition; the coordinators then drop its pending
// fire. Its runs stay.
func (s *Store) Delete(ctx context.Context, name string) error {
	if _, _, err := s.Get(ctx, name); err != nil {
		return err
	}
	// A delete marker written twice is one delete: asked again like a
	// read when its answer is lost.
	_, err := read(ctx, func(ctx context.Context) (struct{}, error) { return struct{}{}, s.kv.Delete(ctx, defPrefix+name) })
	return err
}

// List returns every definition, by name.
func (s *Store) List(ctx context.Context) ([]*Definition, error) {
	keys, err := ListKeys(ctx, s.js, defPrefix)
	if err != nil {
		return nil, err
	}
	var out []*Definition
	for _, k := range keys {
		d, _, err := getJSON[Definition](ctx, s.kv, k)
		if errors.Is(err, jetstream.ErrKeyNotFound) {
			continue
		}
		if err != nil {
			return nil, err
		}
		out = append(out, d)
	}
	return out, nil
}

// Ask writes a request and returns its id.
func (s *Store) Ask(ctx context.Context, name string, r Request) (string, error) {
	if _, _, err := s.Get(ctx, name); err != nil {
		return "", err
	}
	id := eventlog.RandomID()
	b, _ := json.Marshal(r)
	if _, err := s.kv.Create(ctx, actPrefix+name+"."+id, b); err != nil {
		return "", fmt.Errorf("asking schedule %s to %s: %w", name, r.Kind, err)
	}
	return id, nil
}

// Answer waits for a request's result until ctx ends.
func (s *Store) Answer(ctx context.Context, name, id string) (*Result, error) {
	w, err := s.kv.Watch(ctx, resPrefix+name+"."+id)
	if err != nil {
		return nil, err
	}
	defer func() { _ = w.Stop() }()
	for {
		select {
		case e := <-w.Updates():
			if e == nil {
				continue
			}
			var r Result
			if err := json.Unmarshal(e.Value(), &r); err != nil {
				return nil, err
			}
			return &r, nil
		case <-ctx.Done():
			return nil, fmt.Errorf("waiting for the coordinators to answer (is a coordinator running?): %w", ctx.Err())
		}
	}
}

// newKey returns a fresh random key.
func newKey() []byte {
	b := make([]byte, 32)
	_, _ = rand.Read(b)
	return b
}

// KeyedID is the part of a run id only a holder of key can compute, from
// parts: what event triggers derive their runs' ids with.
func KeyedID(key []byte, parts ...string) string { return idPart(key, parts...) }

// idPart is the part of a run id that only a holder of key can compute:
// 16 characters, 80 bits of HMAC-SHA256.
func idPart(key []byte, parts ...string) string {
	m := hmac.New(sha256.New, key)
	for _, p := range parts {
		m.Write([]byte(p))
		m.Write([]byte{0})
	}
	return eventlog.B32.EncodeToString(m.Sum(nil)[:10])
}

// FireRunID is the run id of schedule name's fire at nominal: the name,
// the time, and a part derived with the schedule's key, so that every
// coordinator derives the same id and no other writer can.
func FireRunID(key []byte, name string, nominal time.Time) string {
	return name + "-" + nominal.UTC().Format("20060102T150405Z") + "-" + idPart(key, "fire", name, nominal.UTC().Format(time.RFC3339Nano))
}

// ManualRunID is the run id of a 'trigger' request.
func ManualRunID(key []byte, name, request string) string {
	return name + "-m-" + idPart(key, "manual", name, request)
}

// jitterOf is the delay of nominal's fire: derived, not drawn, so that
// every coordinator arms the same time.
func jitterOf(key []byte, nominal time.Time, max time.Duration) time.Duration {
	if max <= 0 {
		return 0
	}
	m := hmac.New(sha256.New, key)
	m.Write([]byte("jitter" + nominal.UTC().Format(time.RFC3339Nano)))
	s := m.Sum(nil)
	var v uint64
	for _, b := range s[:8] {
		v = v<<8 | uint64(b)
	}
	return time.Duration(v % uint64(max))
}

// ListKeys lists the keys of the schedules bucket under prefix, in the
// order they were first written, with direct gets rather than a KV
// lister: a lister is a consumer, and readers (the client, the UI) may
// create none (deploy/SECURITY.md, gap 3). Keys deleted since are listed
// too; a Get of them finds nothing.
func ListKeys(ctx context.Context, js jetstream.JetStream, prefix string) ([]string, error) {
	subject := "$KV." + Bucket + "."
	keys, err := read(ctx, func(ctx context.Context) ([]string, error) {
		seen := map[string]bool{}
		var keys []string
		err := readmodel.EachDirect(ctx, js.Conn(), "KV_"+Bucket, subject+prefix+">", func(m *nats.Msg) error {
			// A direct get answers on the inbox; the message's own
			// subject is in its Nats-Subject header.
			k := strings.TrimPrefix(m.Header.Get("Nats-Subject"), subject)
			if !seen[k] {
				seen[k] = true
				keys = append(keys, k)
			}
			return nil
		})
		return keys, err
	})
	if err != nil {
		return nil, fmt.Errorf("listing %s of KV bucket %s: %w", prefix, Bucket, err)
	}
	return keys, nil
}

// mustJSON is v's JSON, for values that always encode.
func mustJSON(v any) []byte {
	b, _ := json.Marshal(v)
	return b
}
