// Package trigger starts runs from messages: an event trigger maps each
// message on a subject of a JetStream stream the user owns to one run of
// a graph, through optional CEL expressions (a filter, the input, the id).
//
// Definitions are in the schedules bucket (internal/schedule), under
// "tdef.<name>", written by the trigger role; the coordinators consume
// each trigger's messages with a durable consumer on the user's stream
// ("weft-trigger-<name>"), so nothing is lost while they are down, and
// record what they did under "tst.<name>" (counts, the latest bad
// messages).
//
// Exactly one run per message: the run id is derived, with the trigger's
// key (which only coordinators may read), from the message's Nats-Msg-Id
// header, or the value of the -id expression, or else the stream and
// sequence. A message delivered again, or published again under the same
// id, gives the same run id, and a run is started once per id. A message
// the filter or the mapping cannot handle (not JSON where the expressions
// need it, an expression that fails or gives the wrong type) is counted,
// recorded and acknowledged: it never stalls the trigger.
//
// The expressions see `input`, the message body as JSON (a string when
// the body is not JSON), and `local`, its envelope: local.subject,
// local.headers (first value of each), local.id (Nats-Msg-Id, or "").
// -filter gives a bool; -input a JSON object, the run's input (default:
// the body, which must be an object then); -id a non-empty string.
package trigger

import (
	"github.com/weft-dev/weft/internal/setup"

	"context"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/weft-dev/weft/internal/eventlog"
	"github.com/weft-dev/weft/internal/expr"
	"github.com/weft-dev/weft/internal/schedule"
	"github.com/weft-dev/weft/pkg/graph"
)

// Errors.
var (
	ErrNotFound = errors.New("trigger not found")
	ErrExists   = errors.New("trigger exists")
)

const (
	defPrefix = "tdef."
	stPrefix  = "tst."
)

// Definition is an event trigger.
type Definition struct {
	Name        string          `json:"name"`
	Subject     string          `json:"subject"`
	Stream      string          `json:"stream"`
	GraphName   string          `json:"graphName"`
	GraphDigest string          `json:"graphDigest"`
	Graph       json.RawMessage `json:"graph"`
	Filter      string          `json:"filter,omitempty"`
	Input       string          `json:"input,omitempty"`
	ID          string          `json:"id,omitempty"`
	// Webhook, when set, is the webhook of 'weft serve' that publishes
	// on Subject: the trigger's runs are labelled as that webhook's
	// (events.TriggerWebhook), on the word of the trigger's definition
	// (the trigger role's), never of a message's headers.
	Webhook   string    `json:"webhook,omitempty"`
	Paused    bool      `json:"paused,omitempty"`
	PauseNote string    `json:"pauseNote,omitempty"`
	CreatedAt time.Time `json:"createdAt"`
}

// SetGraph sets the graph the trigger's runs run.
func (d *Definition) SetGraph(g *graph.Graph) {
	d.GraphName, d.GraphDigest, d.Graph = g.Definition().Name, g.Digest(), json.RawMessage(g.Canonical())
}

// ConsumerName is the durable consumer of trigger name on its stream.
func ConsumerName(name string) string { return "weft-trigger-" + name }

// programs are a definition's compiled expressions.
type programs struct {
	filter, input, id *expr.Program
}

func (d *Definition) compile() (programs, error) {
	var p programs
	var errs []error
	var err error
	if d.Filter != "" {
		if p.filter, err = expr.Compile(d.Filter, expr.Bool, 0); err != nil {
			errs = append(errs, fmt.Errorf("-filter: %w", err))
		}
	}
	if d.Input != "" {
		if p.input, err = expr.Compile(d.Input, expr.Any, 0); err != nil {
			errs = append(errs, fmt.Errorf("-input: %w", err))
		}
	}
	if d.ID != "" {
		if p.id, err = expr.Compile(d.ID, expr.Any, 0); err != nil {
			errs = append(errs, fmt.Errorf("-id: %w", err))
		}
	}
	return p, errors.Join(errs...)
}

// Validate reports every problem with the definition, each naming its
// flag; the expressions are compiled.
func (d *Definition) Validate() error {
	var errs []error
	if !schedule.ValidName(d.Name) {
		errs = append(errs, fmt.Errorf("name %q: letters, digits, '-' and '_', at most 64, starting with a letter or digit", d.Name))
	}
	if !validSubject(d.Subject) {
		errs = append(errs, fmt.Errorf("-subject %q: want a NATS subject (tokens separated by dots; * and > as wildcards)", d.Subject))
	}
	if eventlog.SubjectsCover([]string{"weft.>"}, d.Subject) || eventlog.SubjectsCover([]string{d.Subject}, "weft.r.x.y.c.started") || eventlog.SubjectsCover([]string{d.Subject}, "$KV.x") {
		errs = append(errs, fmt.Errorf("-subject %q: Weft's own subjects cannot trigger runs", d.Subject))
	}
	if d.Stream == "" || !eventlog.ValidToken(d.Stream) {
		errs = append(errs, fmt.Errorf("-stream %q: want the name of a stream that captures the subject", d.Stream))
	}
	if len(d.Graph) == 0 || d.GraphName == "" {
		errs = append(errs, errors.New("-graph: required"))
	}
	if d.Webhook != "" && !schedule.ValidName(d.Webhook) {
		errs = append(errs, fmt.Errorf("-webhook %q: letters, digits, '-' and '_', at most 64, starting with a letter or digit", d.Webhook))
	}
	if _, err := d.compile(); err != nil {
		errs = append(errs, err)
	}
	return errors.Join(errs...)
}

func validSubject(s string) bool {
	if s == "" || len(s) > 255 {
		return false
	}
	toks := splitDots(s)
	for i, t := range toks {
		if t == "" || (t == ">" && i != len(toks)-1) {
			return false
		}
		for _, r := range t {
			if r == ' ' || r == '\t' || r == '\n' || r == '\r' {
				return false
			}
		}
	}
	return true
}

func splitDots(s string) []string {
	var out []string
	start := 0
	for i := 0; i < len(s); i++ {
		if s[i] == '.' {
			out = append(out, s[start:i])
			start = i + 1
		}
	}
	return append(out, s[start:])
}

// BadMessage is a message the trigger could not map to a run.
type BadMessage struct {
	Stream  string    `json:"stream"`
	Seq     uint64    `json:"seq"`
	Subject string    `json:"subject"`
	Error   string    `json:"error"`
	At      time.Time `json:"at"`
}

// MaxBad is how many bad messages State keeps.
const MaxBad = 20

// State is what the coordinators recorded of a trigger.
type State struct {
	// Started counts runs started; Duplicates messages whose run was
	// started before (redelivered or republished); Filtered those the
	// filter passed over; Bad those it could not handle.
	Started    int64        `json:"started"`
	Duplicates int64        `json:"duplicates"`
	Filtered   int64        `json:"filtered"`
	Bad        int64        `json:"bad"`
	LastBad    []BadMessage `json:"lastBad,omitempty"`
}

// Store reads and writes triggers.
type Store struct {
	kv jetstream.KeyValue
	js jetstream.JetStream
}

// Open opens the triggers (in the schedules bucket).
func Open(ctx context.Context, js jetstream.JetStream) (*Store, error) {
	kv, err := js.KeyValue(ctx, schedule.Bucket)
	if errors.Is(err, jetstream.ErrBucketNotFound) {
		return nil, fmt.Errorf("%w: KV bucket %s (the admin creates it: 'weft roles -setup', or start a coordinator)", schedule.ErrNoBucket, schedule.Bucket)
	}
	if err != nil {
		return nil, err
	}
	return &Store{kv: kv, js: js}, nil
}

// Create checks and writes a new trigger. A missing -stream is looked up:
// the stream that captures the subject.
func (s *Store) Create(ctx context.Context, d *Definition) error {
	if d.Stream == "" && validSubject(d.Subject) {
		name, err := s.js.StreamNameBySubject(ctx, d.Subject)
		if err != nil {
			return fmt.Errorf("-subject %q: no stream captures it (%v): triggers read a stream, so that no message is lost while the coordinators are down; create one, or name it with -stream", d.Subject, err)
		}
		d.Stream = name
	}
	if err := d.Validate(); err != nil {
		return err
	}
	st, err := s.js.Stream(ctx, d.Stream)
	if err != nil {
		return fmt.Errorf("-stream %s: %w", d.Stream, err)
	}
	if !eventlog.SubjectsCover(st.CachedInfo().Config.Subjects, d.Subject) {
		return fmt.Errorf("-subject %q: stream %s does not capture it (its subjects: %q)", d.Subject, d.Stream, st.CachedInfo().Config.Subjects)
	}
	b, _ := json.Marshal(d)
	b, err = schedule.SealDefinition(defPrefix+d.Name, b)
	if err != nil {
		return err
	}
	if _, err := s.kv.Create(ctx, defPrefix+d.Name, b); err != nil {
		if setup.KVConflict(err) {
			return fmt.Errorf("%w: %s", ErrExists, d.Name)
		}
		return err
	}
	return nil
}

// Get returns a trigger.
func (s *Store) Get(ctx context.Context, name string) (*Definition, uint64, error) {
	if !schedule.ValidName(name) {
		return nil, 0, fmt.Errorf("%w: %q", ErrNotFound, name)
	}
	e, err := s.kv.Get(ctx, defPrefix+name)
	if errors.Is(err, jetstream.ErrKeyNotFound) {
		return nil, 0, fmt.Errorf("%w: %s", ErrNotFound, name)
	}
	if err != nil {
		return nil, 0, err
	}
	b, err := schedule.OpenDefinition(defPrefix+name, e.Value())
	if err != nil {
		return nil, 0, fmt.Errorf("trigger %s: %w", name, err)
	}
	var d Definition
	if err := json.Unmarshal(b, &d); err != nil {
		return nil, 0, err
	}
	return &d, e.Revision(), nil
}

// State returns what the coordinators recorded of a trigger.
func (s *Store) State(ctx context.Context, name string) (*State, uint64, error) {
	e, err := s.kv.Get(ctx, stPrefix+name)
	if errors.Is(err, jetstream.ErrKeyNotFound) {
		return &State{}, 0, nil
	}
	if err != nil {
		return nil, 0, err
	}
	var st State
	if err := json.Unmarshal(e.Value(), &st); err != nil {
		return nil, 0, err
	}
	return &st, e.Revision(), nil
}

// SetPaused pauses (its messages wait in the stream) or resumes a trigger.
func (s *Store) SetPaused(ctx context.Context, name string, paused bool, note string) error {
	for {
		d, rev, err := s.Get(ctx, name)
		if err != nil {
			return err
		}
		d.Paused, d.PauseNote = paused, note
		b, _ := json.Marshal(d)
		if b, err = schedule.SealDefinition(defPrefix+name, b); err != nil {
			return err
		}
		if _, err := s.kv.Update(ctx, defPrefix+name, b, rev); err == nil {
			return nil
		} else if !setup.KVConflict(err) {
			return err
		}
	}
}

// Delete removes a trigger; the coordinators delete its consumer.
func (s *Store) Delete(ctx context.Context, name string) error {
	if _, _, err := s.Get(ctx, name); err != nil {
		return err
	}
	return s.kv.Delete(ctx, defPrefix+name)
}

// List returns the triggers.
func (s *Store) List(ctx context.Context) ([]*Definition, error) {
	keys, err := schedule.ListKeys(ctx, s.js, defPrefix)
	if err != nil {
		return nil, err
	}
	var out []*Definition
	for _, k := range keys {
		d, _, err := s.Get(ctx, k[len(defPrefix):])
		if errors.Is(err, ErrNotFound) {
			continue
		}
		if err != nil {
			return nil, err
		}
		out = append(out, d)
	}
	return out, nil
}
