// Package batch keeps durable batch jobs: an operation (cancel, terminate,
// signal, reset, delete) over a list of runs, whose definition and
// progress live in a KV bucket (Bucket, made by internal/setup; under the
// roles only the admin writes it, and the client and UI roles read it).
//
// A job is written before its first run is touched: its operation, the
// query or run ids it was given, the run list they resolved to, its rate,
// and who started it. Each run's outcome (done, skipped and why, failed
// and why) is written after the operation on that run returns, under
// out.<job>.<run>. A job interrupted (its process killed) is resumed by
// running it again (Run): the runs with an outcome are passed over, and
// the others are done, so the operation of a run whose outcome was not
// written before the crash is done a second time: each operation must
// therefore be idempotent by the job and run ids (the CLI's are: a cancel
// request's id is derived from the run, a signal's and a reset's new run
// id from the job and the run).
//
// A job being run carries its owner and a heartbeat, renewed with
// compare-and-set: a second process refuses to take over a job whose
// heartbeat is fresh (unless forced), and a process whose job was taken
// over stops (ErrTakenOver).
//
// Layer: the engine; it imports setup and readmodel's direct reads, and
// nothing of the client: the operations are the caller's.
package batch

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/weft-dev/weft/internal/eventlog"
	"github.com/weft-dev/weft/internal/readmodel"
	"github.com/weft-dev/weft/internal/setup"
)

// Bucket is the KV bucket of batch jobs.
const Bucket = "weft-batches"

// KVConfig is the bucket's configuration: one value per key (a job's
// definition and state, or one run's outcome).
func KVConfig(replicas int) jetstream.KeyValueConfig {
	return jetstream.KeyValueConfig{
		Bucket:      Bucket,
		Description: "Weft batch jobs: job.<id> their definitions, out.<id>.<run> each run's outcome",
		History:     1,
		Replicas:    max(replicas, 1),
	}
}

// Errors.
var (
	// ErrUnknownJob: no job has the id.
	ErrUnknownJob = errors.New("no such batch job")
	// ErrJobExists: a job with the id exists (Create).
	ErrJobExists = errors.New("a batch job with this id exists")
	// ErrRunning: another process runs the job now (its heartbeat is
	// fresh).
	ErrRunning = errors.New("batch job is being run by another process")
	// ErrTakenOver: another process took the job over while this one ran
	// it.
	ErrTakenOver = errors.New("batch job taken over by another process")
)

// Outcomes of a run.
const (
	Done    = "done"
	Skipped = "skipped"
	Failed  = "failed"
)

// Job is a batch job's definition and state.
type Job struct {
	ID string `json:"id"`
	// Op is the operation: cancel, terminate, signal, reset or delete.
	Op string `json:"operation"`
	// Query is the query the runs were selected by ("" for run ids).
	Query string `json:"query,omitempty"`
	// Runs is the run list, resolved when the job was made; it does not
	// change.
	Runs []string `json:"runs"`
	// Args are the operation's arguments (node, reason, data, archive).
	Args map[string]string `json:"args,omitempty"`
	// Rate is at most how many runs a second (0: no limit).
	Rate    float64   `json:"rate"`
	By      string    `json:"by"`
	Created time.Time `json:"created"`
	// Owner is the process running the job, or last to run it;
	// Heartbeat when it last said it does.
	Owner     string    `json:"owner,omitempty"`
	Heartbeat time.Time `json:"heartbeat,omitzero"`
	// Finished is when every run had an outcome (zero: not yet).
	Finished time.Time `json:"finished,omitzero"`
	// Resumed counts the times the job was taken up again.
	Resumed int `json:"resumed,omitempty"`
}

// Takes reports whether operation op takes the argument arg: a node
// (signal: the node signalled; reset: the node each run is reset to, and
// both need one), data (signal), a reason (cancel, terminate), an
// archive (delete). The CLI and the UI refuse any other, each in its own
// words.
func Takes(op, arg string) bool {
	switch arg {
	case "node":
		return op == "signal" || op == "reset"
	case "data":
		return op == "signal"
	case "reason":
		return op == "cancel" || op == "terminate"
	case "archive":
		return op == "delete"
	}
	return false
}

// Outcome is what the job did to one run.
type Outcome struct {
	Run    string    `json:"run"`
	Result string    `json:"result"`
	Detail string    `json:"detail,omitempty"`
	At     time.Time `json:"at"`
}

// ResetRunID is the id of the run a batch job's reset of run forks: the
// same for the same job and run, so that a reset done twice finds its
// first fork (events.ErrRunExists) instead of making a second.
func ResetRunID(job, run string) string {
	h := sha256.Sum256([]byte(job + "/" + run))
	return "reset-" + hex.EncodeToString(h[:10])
}

// Store reads and writes the jobs.
type Store struct {
	kv jetstream.KeyValue
	nc *nats.Conn
}

// Open opens the bucket; with create, a missing bucket is made (with
// replicas), else it is ErrUnknownJob's cousin: no job was ever made.
func Open(ctx context.Context, js jetstream.JetStream, replicas int, create bool) (*Store, error) {
	var kv jetstream.KeyValue
	var err error
	if create {
		kv, err = setup.EnsureKV(ctx, js, KVConfig(replicas), nil)
	} else {
		kv, err = js.KeyValue(ctx, Bucket)
		if errors.Is(err, jetstream.ErrBucketNotFound) {
			return nil, fmt.Errorf("no batch job has been made here (no KV bucket %s): %w", Bucket, ErrUnknownJob)
		}
	}
	if err != nil {
		return nil, fmt.Errorf("opening KV bucket %s: %w", Bucket, err)
	}
	return &Store{kv: kv, nc: js.Conn()}, nil
}

// CheckID says what is wrong with a job id ("" when nothing).
func CheckID(id string) error {
	if !eventlog.ValidToken(id) {
		return fmt.Errorf("batch job id %q: want letters, digits, '-' and '_' (at most 128)", id)
	}
	return nil
}

// Create writes a new job; an existing id is ErrJobExists.
func (s *Store) Create(ctx context.Context, j *Job) (uint64, error) {
	if err := CheckID(j.ID); err != nil {
		return 0, err
	}
	b, err := json.Marshal(j)
	if err != nil {
		return 0, err
	}
	rev, err := s.kv.Create(ctx, "job."+j.ID, b)
	if setup.KVConflict(err) {
		return 0, fmt.Errorf("batch job %s: %w", j.ID, ErrJobExists)
	}
	return rev, err
}

// Job reads a job and its revision.
func (s *Store) Job(ctx context.Context, id string) (*Job, uint64, error) {
	if err := CheckID(id); err != nil {
		return nil, 0, err
	}
	e, err := s.kv.Get(ctx, "job."+id)
	if errors.Is(err, jetstream.ErrKeyNotFound) {
		return nil, 0, fmt.Errorf("batch job %s: %w ('weft batch list' lists them)", id, ErrUnknownJob)
	}
	if err != nil {
		return nil, 0, fmt.Errorf("reading batch job %s: %w", id, err)
	}
	var j Job
	if err := json.Unmarshal(e.Value(), &j); err != nil {
		return nil, 0, fmt.Errorf("batch job %s: %w", id, err)
	}
	return &j, e.Revision(), nil
}

// update writes j over revision rev; another write since is ErrTakenOver.
func (s *Store) update(ctx context.Context, j *Job, rev uint64) (uint64, error) {
	b, err := json.Marshal(j)
	if err != nil {
		return 0, err
	}
	n, err := s.kv.Update(ctx, "job."+j.ID, b, rev)
	if setup.KVConflict(err) {
		return 0, fmt.Errorf("batch job %s: %w", j.ID, ErrTakenOver)
	}
	return n, err
}

// Record writes a run's outcome.
func (s *Store) Record(ctx context.Context, job string, o Outcome) error {
	b, err := json.Marshal(o)
	if err != nil {
		return err
	}
	_, err = s.kv.Put(ctx, "out."+job+"."+o.Run, b)
	return err
}

// Outcomes reads a job's outcomes so far, by run.
func (s *Store) Outcomes(ctx context.Context, job string) (map[string]Outcome, error) {
	out := map[string]Outcome{}
	err := s.each(ctx, "out."+job+".*", func(b []byte) error {
		var o Outcome
		if err := json.Unmarshal(b, &o); err != nil {
			return err
		}
		out[o.Run] = o
		return nil
	})
	return out, err
}

// List reads every job, newest first.
func (s *Store) List(ctx context.Context) ([]*Job, error) {
	var jobs []*Job
	err := s.each(ctx, "job.*", func(b []byte) error {
		var j Job
		if err := json.Unmarshal(b, &j); err != nil {
			return err
		}
		jobs = append(jobs, &j)
		return nil
	})
	slices.SortFunc(jobs, func(a, b *Job) int {
		if c := b.Created.Compare(a.Created); c != 0 {
			return c
		}
		return strings.Compare(a.ID, b.ID)
	})
	return jobs, err
}

// each calls fn with the value of every key matching keys, by direct gets
// (no consumer: the readers' roles have none).
func (s *Store) each(ctx context.Context, keys string, fn func([]byte) error) error {
	err := readmodel.EachDirect(ctx, s.nc, "KV_"+Bucket, "$KV."+Bucket+"."+keys, func(m *nats.Msg) error { return fn(m.Data) })
	if err != nil {
		return fmt.Errorf("reading batch jobs: %w", err)
	}
	return nil
}
