package worker

import (
	"bytes"
	"crypto/sha256"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"sync"

	"github.com/santhosh-tekuri/jsonschema/v6"

	"github.com/weft-dev/weft/pkg/events"
)

// Node input and output schemas are JSON Schemas (draft 2020-12 unless the
// schema's "$schema" names another) written in the graph. The worker checks
// the node's input state against the input schema before the node runs,
// and its output against the output schema after; a value that does not
// match fails the attempt with a non-retryable "ValidationError" whose
// message names the failing field as a JSON pointer ("/user/email") and
// whose details list every failing field.
//
// Schemas load nothing: a "$ref" to a file:// or http(s):// URL (or any
// other document than the schema itself and the standard meta-schemas,
// which are built in) fails the node with a non-retryable
// "ValidationError" that names the URL and nothing of what it holds. A
// program that wants shared schemas gives the worker a loader
// (WithSchemaLoader) that decides what may be loaded.

// SchemaLoader returns the JSON document a schema's "$ref" names by its
// absolute URL, or an error when the worker does not allow it.
type SchemaLoader func(url string) (json.RawMessage, error)

// WithSchemaLoader lets node schemas load the documents their "$ref"s
// name, through l. Without it nothing is loaded.
func WithSchemaLoader(l SchemaLoader) Option {
	return func(o *options) { o.schemas = &schemaCache{loader: l} }
}

// ErrSchemaRefRefused is what a schema's reference to another document
// fails with when the worker loads none.
var ErrSchemaRefRefused = errors.New("schemas may not load other documents on this worker (no schema loader)")

// schemaCache compiles each schema once, keyed by the SHA-256 of its bytes.
type schemaCache struct {
	m      sync.Map // [32]byte → *compiledSchema
	loader SchemaLoader
}

func (w *Worker) schemas() *schemaCache {
	if w.opts.schemas != nil {
		return w.opts.schemas
	}
	return &sharedSchemas
}

// urlLoader adapts a SchemaLoader (or none) to the library's loader; it
// replaces the library's default, which reads file:// URLs from disk.
type urlLoader struct{ l SchemaLoader }

func (u urlLoader) Load(url string) (any, error) {
	if u.l == nil {
		return nil, ErrSchemaRefRefused
	}
	raw, err := u.l(url)
	if err != nil {
		return nil, err
	}
	return jsonschema.UnmarshalJSON(bytes.NewReader(raw))
}

type compiledSchema struct {
	once sync.Once
	s    *jsonschema.Schema
	err  error
}

// sharedSchemas is shared by the workers of the process that load nothing:
// a schema's compilation then depends on its bytes only.
var sharedSchemas schemaCache

func (c *schemaCache) get(raw json.RawMessage) (*jsonschema.Schema, error) {
	key := sha256.Sum256(raw)
	v, _ := c.m.LoadOrStore(key, &compiledSchema{})
	cs := v.(*compiledSchema)
	cs.once.Do(func() { cs.s, cs.err = compileSchema(raw, c.loader) })
	return cs.s, cs.err
}

func compileSchema(raw json.RawMessage, loader SchemaLoader) (*jsonschema.Schema, error) {
	doc, err := jsonschema.UnmarshalJSON(bytes.NewReader(raw))
	if err != nil {
		return nil, err
	}
	c := jsonschema.NewCompiler()
	c.UseLoader(urlLoader{loader})
	c.DefaultDraft(jsonschema.Draft2020)
	const loc = "weft:///node.schema.json"
	if err := c.AddResource(loc, doc); err != nil {
		return nil, err
	}
	return c.Compile(loc)
}

// FieldError is one field of a value that does not match its schema.
type FieldError struct {
	// Field is the JSON pointer of the value within the input state or the
	// output ("" is the whole value).
	Field   string `json:"field"`
	Message string `json:"message"`
}

// check validates v against the schema raw; what names the value
// ("input", "output") in the failure.
func (c *schemaCache) check(what string, raw json.RawMessage, v any) error {
	if len(bytes.TrimSpace(raw)) == 0 {
		return nil
	}
	s, err := c.get(raw)
	if err != nil {
		return NonRetryable(events.FailureValidation, fmt.Sprintf("the node's %s schema does not compile: %v", what, err))
	}
	b, err := json.Marshal(v)
	if err != nil {
		return NonRetryable(events.FailureValidation, fmt.Sprintf("the node's %s does not encode as JSON: %v", what, err))
	}
	inst, err := jsonschema.UnmarshalJSON(bytes.NewReader(b))
	if err != nil {
		return NonRetryable(events.FailureValidation, fmt.Sprintf("the node's %s: %v", what, err))
	}
	err = s.Validate(inst)
	if err == nil {
		return nil
	}
	var ve *jsonschema.ValidationError
	if !errors.As(err, &ve) {
		return NonRetryable(events.FailureValidation, fmt.Sprintf("the node's %s: %v", what, err))
	}
	fields := fieldErrors(ve)
	parts := make([]string, 0, len(fields))
	for _, f := range fields {
		field := f.Field
		if field == "" {
			field = "/"
		}
		parts = append(parts, field+": "+f.Message)
	}
	return &Error{
		Type:    events.FailureValidation,
		Message: fmt.Sprintf("%s does not match its schema: %s", what, strings.Join(parts, "; ")),
		Details: map[string]any{"schema": what, "fields": fields},
	}
}

// fieldErrors flattens a validation error into its leaves: the failures
// that name a field.
func fieldErrors(ve *jsonschema.ValidationError) []FieldError {
	var out []FieldError
	var walk func(e *jsonschema.ValidationError)
	walk = func(e *jsonschema.ValidationError) {
		if len(e.Causes) == 0 {
			out = append(out, FieldError{Field: pointer(e.InstanceLocation), Message: leafMessage(e)})
			return
		}
		for _, c := range e.Causes {
			walk(c)
		}
	}
	walk(ve)
	return out
}

// leafMessage is the library's message for one failure, without the
// location it prefixes ("at '/x': ...").
func leafMessage(e *jsonschema.ValidationError) string {
	msg := (&jsonschema.ValidationError{SchemaURL: e.SchemaURL, InstanceLocation: e.InstanceLocation, ErrorKind: e.ErrorKind}).Error()
	if i := strings.Index(msg, ": "); i >= 0 && strings.HasPrefix(msg, "at ") {
		msg = msg[i+2:]
	}
	return msg
}

func pointer(tokens []string) string {
	var sb strings.Builder
	for _, t := range tokens {
		sb.WriteByte('/')
		t = strings.ReplaceAll(t, "~", "~0")
		sb.WriteString(strings.ReplaceAll(t, "/", "~1"))
	}
	return sb.String()
}
