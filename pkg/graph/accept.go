package graph

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"

	"github.com/santhosh-tekuri/jsonschema/v6"
	"github.com/santhosh-tekuri/jsonschema/v6/kind"

	wexpr "github.com/weft-dev/weft/internal/expr"
)

// What a human node accepts. A human node's output is the data of the
// signal that ends its wait, so its outputSchema says what that data must
// be, and its config's checks (CEL conditions over output, the signal's
// data, state and invocation) say what else must hold:
//
//	- id: approve
//	  type: human
//	  outputSchema: {type: object, required: [approved], properties: {approved: {type: boolean}}}
//	  config:
//	    checks:
//	      - {expr: "!output.approved || has(output.reviewer)", message: "an approval names its reviewer"}
//
// A signal whose data does not fit is refused: by the client that sends
// it, when it can check, and by the fold (package projection) when it
// reaches the log, where it is kept, counted as refused and changes
// nothing; the node keeps waiting. Schemas load no other document.

// ErrSignalNotAccepted marks a signal's data that the human node it is
// for does not accept (CheckSignal).
var ErrSignalNotAccepted = errors.New("signal data not accepted")

// SignalCheck is one CEL check of a human node's config.checks: Expr must
// hold over the signal's data (as output), state and invocation; Message
// says what it means when it does not.
type SignalCheck struct {
	Expr    string `json:"expr"`
	Message string `json:"message,omitempty"`
}

// acceptor is a human node's compiled acceptance.
type acceptor struct {
	schema   *jsonschema.Schema
	required []string // the schema's top-level required fields
	checks   []*wexpr.Program
	messages []string
	err      error // the schema or a check does not compile
}

type acceptEntry struct {
	once sync.Once
	a    *acceptor
}

// acceptors caches compiled acceptances by the bytes they come from, so
// that folding many signals compiles each schema once. Compiling depends
// on the bytes only (no document is loaded), so the cache changes no
// result.
var acceptors sync.Map // [32]byte → *acceptEntry

// humanChecks reads a human node's config.checks.
func humanChecks(n *Node) ([]SignalCheck, error) {
	var cfg struct {
		Checks []SignalCheck `json:"checks"`
	}
	if len(n.Config) == 0 || isNull(n.Config) {
		return nil, nil
	}
	if err := json.Unmarshal(n.Config, &cfg); err != nil {
		return nil, err
	}
	return cfg.Checks, nil
}

// Accepts reports whether the node declares what signals it accepts: an
// outputSchema or config.checks.
func (n *Node) Accepts() bool {
	if n.Type != TypeHuman {
		return false
	}
	cs, _ := humanChecks(n)
	return len(bytes.TrimSpace(n.OutputSchema)) > 0 || len(cs) > 0
}

func acceptorOf(n *Node) *acceptor {
	key := sha256.New()
	key.Write(n.OutputSchema)
	key.Write([]byte{0})
	key.Write(n.Config)
	var k [32]byte
	copy(k[:], key.Sum(nil))
	v, _ := acceptors.LoadOrStore(k, &acceptEntry{})
	ent := v.(*acceptEntry)
	ent.once.Do(func() { ent.a = compileAcceptor(n) })
	return ent.a
}

func compileAcceptor(n *Node) *acceptor {
	a := &acceptor{}
	if raw := bytes.TrimSpace(n.OutputSchema); len(raw) > 0 && !isNull(raw) {
		s, err := compileSchema(raw)
		if err != nil {
			a.err = fmt.Errorf("outputSchema does not compile: %w", err)
			return a
		}
		a.schema = s
		var top struct {
			Required []string `json:"required"`
		}
		_ = json.Unmarshal(raw, &top)
		a.required = top.Required
	}
	checks, err := humanChecks(n)
	if err != nil {
		a.err = fmt.Errorf("config.checks: %w", err)
		return a
	}
	for i, c := range checks {
		p, err := wexpr.Compile(c.Expr, wexpr.Bool, 0)
		if err != nil {
			a.err = fmt.Errorf("config.checks[%d].expr: %w", i, err)
			return a
		}
		a.checks = append(a.checks, p)
		a.messages = append(a.messages, c.Message)
	}
	return a
}

// schemaRefRefused is what a schema's reference to another document fails
// with: a graph's schemas load nothing.
var schemaRefRefused = errors.New("a graph's schemas may not load other documents")

type noLoader struct{}

func (noLoader) Load(string) (any, error) { return nil, schemaRefRefused }

func compileSchema(raw json.RawMessage) (*jsonschema.Schema, error) {
	doc, err := jsonschema.UnmarshalJSON(bytes.NewReader(raw))
	if err != nil {
		return nil, err
	}
	c := jsonschema.NewCompiler()
	c.UseLoader(noLoader{})
	c.DefaultDraft(jsonschema.Draft2020)
	const loc = "weft:///node.schema.json"
	if err := c.AddResource(loc, doc); err != nil {
		return nil, err
	}
	return c.Compile(loc)
}

// CheckSignal checks a signal's data against what human node n accepts:
// its outputSchema, then its config.checks, evaluated with the data as
// output and the run's state and invocation. It returns nil when the data
// fits (or n declares nothing), else an error wrapping
// ErrSignalNotAccepted that names the field or the check. Absent data is
// JSON null. It is deterministic: the fold calls it.
func CheckSignal(n *Node, data json.RawMessage, state, invocation map[string]any) error {
	if !n.Accepts() {
		return nil
	}
	a := acceptorOf(n)
	if a.err != nil {
		return fmt.Errorf("%w: node %q: %v", ErrSignalNotAccepted, n.ID, a.err)
	}
	raw := bytes.TrimSpace(data)
	if len(raw) == 0 {
		raw = []byte("null")
	}
	if err := a.checkSchema(n.ID, raw); err != nil {
		return err
	}
	return a.checkChecks(n.ID, raw, state, invocation)
}

// checkSchema checks a signal's data (raw, JSON) for node id against the
// outputSchema, if there is one.
func (a *acceptor) checkSchema(id string, raw []byte) error {
	if a.schema == nil {
		return nil
	}
	if isNull(raw) && len(a.required) > 0 {
		return fmt.Errorf("%w: node %q: the signal has no data, and its outputSchema requires %s (send e.g. -data '{%q: ...}')",
			ErrSignalNotAccepted, id, quoteList(a.required), a.required[0])
	}
	inst, err := jsonschema.UnmarshalJSON(bytes.NewReader(raw))
	if err != nil {
		return fmt.Errorf("%w: node %q: the signal's data is not JSON: %v", ErrSignalNotAccepted, id, err)
	}
	if err := a.schema.Validate(inst); err != nil {
		return fmt.Errorf("%w: node %q: the signal's data does not fit its outputSchema: %s", ErrSignalNotAccepted, id, schemaProblems(err))
	}
	return nil
}

// checkChecks evaluates config.checks, in order, on a signal's data (raw,
// JSON) for node id as output, with the run's state and invocation; the
// first that fails or does not hold is the error.
func (a *acceptor) checkChecks(id string, raw []byte, state, invocation map[string]any) error {
	if len(a.checks) == 0 {
		return nil
	}
	var out any
	if err := json.Unmarshal(raw, &out); err != nil {
		return fmt.Errorf("%w: node %q: the signal's data is not JSON: %v", ErrSignalNotAccepted, id, err)
	}
	vars := wexpr.Vars{State: state, Output: out, Invocation: invocation}
	for i, p := range a.checks {
		ok, err := p.EvalBool(context.Background(), vars)
		switch {
		case err != nil:
			return fmt.Errorf("%w: node %q: config.checks[%d] (%s) cannot be evaluated on this data: %v", ErrSignalNotAccepted, id, i, p.Source(), err)
		case !ok && a.messages[i] != "":
			return fmt.Errorf("%w: node %q: %s (config.checks[%d]: %s)", ErrSignalNotAccepted, id, a.messages[i], i, p.Source())
		case !ok:
			return fmt.Errorf("%w: node %q: config.checks[%d] does not hold: %s", ErrSignalNotAccepted, id, i, p.Source())
		}
	}
	return nil
}

// schemaProblems lists a validation error's leaves, each with the field
// it is about: "/amount: want number, but got string; missing field
// \"approved\"".
func schemaProblems(err error) string {
	var ve *jsonschema.ValidationError
	if !errors.As(err, &ve) {
		return err.Error()
	}
	var parts []string
	var walk func(e *jsonschema.ValidationError)
	walk = func(e *jsonschema.ValidationError) {
		if len(e.Causes) > 0 {
			for _, c := range e.Causes {
				walk(c)
			}
			return
		}
		at := jsonPointer(e.InstanceLocation)
		if r, ok := e.ErrorKind.(*kind.Required); ok {
			for _, m := range r.Missing {
				parts = append(parts, fmt.Sprintf("missing field %q%s", m, inObject(at)))
			}
			return
		}
		msg := (&jsonschema.ValidationError{SchemaURL: e.SchemaURL, InstanceLocation: e.InstanceLocation, ErrorKind: e.ErrorKind}).Error()
		if i := strings.Index(msg, ": "); i >= 0 && strings.HasPrefix(msg, "at ") {
			msg = msg[i+2:]
		}
		if at == "" {
			at = "/"
		}
		parts = append(parts, at+": "+msg)
	}
	walk(ve)
	slices.Sort(parts)
	return strings.Join(slices.Compact(parts), "; ")
}

func inObject(at string) string {
	if at == "" {
		return ""
	}
	return " in " + at
}

func jsonPointer(tokens []string) string {
	var sb strings.Builder
	for _, t := range tokens {
		sb.WriteByte('/')
		t = strings.ReplaceAll(t, "~", "~0")
		sb.WriteString(strings.ReplaceAll(t, "/", "~1"))
	}
	return sb.String()
}

func quoteList(xs []string) string {
	q := make([]string, len(xs))
	for i, x := range xs {
		q[i] = fmt.Sprintf("%q", x)
	}
	return strings.Join(q, ", ")
}

// checkHumanAccept checks, at load, that a human node's outputSchema and
// config.checks compile.
func checkHumanAccept(n *Node, bad badFunc) {
	if raw := bytes.TrimSpace(n.OutputSchema); len(raw) > 0 && !isNull(raw) {
		if _, err := compileSchema(raw); err != nil {
			bad("outputSchema", "does not compile: %v", err)
		}
	}
	checks, err := humanChecks(n)
	if err != nil {
		return // decodeFields reported it
	}
	for i, c := range checks {
		field := fmt.Sprintf("config.checks[%d].expr", i)
		if strings.TrimSpace(c.Expr) == "" {
			bad(field, "missing expr (a CEL condition over output, the signal's data, state and invocation)")
			continue
		}
		if _, err := wexpr.Compile(c.Expr, wexpr.Bool, 0); err != nil {
			bad(field, "%v", err)
		}
	}
}
