package worker

import (
	"context"
	"fmt"

	"github.com/weft-dev/weft/pkg/events"
)

// Invocation filters run around every node a worker executes, in the order
// they were registered (WithInvokingFilter, WithInvokedFilter). What each
// did is written into the log as an events.FilterNote: invoking filters'
// notes on the NodeInvoking event, invoked filters' notes on the NodeInvoked
// event. Filters run again on every delivery of a work item.

// Filter note actions.
const (
	FilterPassed    = "passed"
	FilterModified  = "modified"
	FilterCancelled = "cancelled"
	FilterReplaced  = "replaced"
	// FilterSkipped is the action of the note a Skipper's false writes.
	FilterSkipped = "skipped"
)

// FilterDecision is what an invoking filter decided.
type FilterDecision struct {
	// Modified says the filter changed the input (in place); the note
	// says "modified".
	Modified bool
	// Cancel cancels the execution: the node does not run, and the log
	// gets a NodeCancelled by "filter:<name>" with Reason. The coordinator
	// treats a cancelled node like a skipped one: none of its outgoing
	// edges is taken.
	Cancel bool
	Reason string
	// Note is recorded with the filter's action.
	Note string
}

// Pass lets the execution go on unchanged.
func Pass() FilterDecision { return FilterDecision{} }

// Modify says the filter changed the input.
func Modify(note string) FilterDecision { return FilterDecision{Modified: true, Note: note} }

// Cancel cancels the execution.
func Cancel(reason string) FilterDecision { return FilterDecision{Cancel: true, Reason: reason} }

// InvokingFilter runs before a node executes. It may inspect and change the
// input (and say so with Modify), or cancel the execution. An error fails
// the attempt as a node's error would.
type InvokingFilter interface {
	Invoking(ctx context.Context, in *Input) (FilterDecision, error)
}

// InvokingFilterFunc adapts a function to an InvokingFilter.
type InvokingFilterFunc func(ctx context.Context, in *Input) (FilterDecision, error)

// Invoking calls f.
func (f InvokingFilterFunc) Invoking(ctx context.Context, in *Input) (FilterDecision, error) {
	return f(ctx, in)
}

// InvokedFilter runs after a node succeeded (its own result or its
// fallback's). It may inspect the result and replace it: returning a result
// other than res (a different pointer) is recorded as "replaced"; returning
// res or nil as "passed". An error fails the attempt.
type InvokedFilter interface {
	Invoked(ctx context.Context, in *Input, res *Result) (*Result, error)
}

// InvokedFilterFunc adapts a function to an InvokedFilter.
type InvokedFilterFunc func(ctx context.Context, in *Input, res *Result) (*Result, error)

// Invoked calls f.
func (f InvokedFilterFunc) Invoked(ctx context.Context, in *Input, res *Result) (*Result, error) {
	return f(ctx, in, res)
}

type namedInvoking struct {
	name string
	f    InvokingFilter
}

type namedInvoked struct {
	name string
	f    InvokedFilter
}

// WithInvokingFilter adds an invoking filter, run after those added before.
func WithInvokingFilter(name string, f InvokingFilter) Option {
	return func(o *options) { o.invoking = append(o.invoking, namedInvoking{name, f}) }
}

// WithInvokedFilter adds an invoked filter, run after those added before.
func WithInvokedFilter(name string, f InvokedFilter) Option {
	return func(o *options) { o.invoked = append(o.invoked, namedInvoked{name, f}) }
}

// FilterCancelledBy is the NodeCancelledData.By of an execution a filter
// cancelled.
func FilterCancelledBy(name string) string { return "filter:" + name }

// runInvoking runs the invoking filters over in. It returns the notes, and
// the cancellation if a filter cancelled (later filters do not run).
func (w *Worker) runInvoking(ctx context.Context, in *Input) ([]events.FilterNote, *runCancelled, error) {
	var notes []events.FilterNote
	for _, nf := range w.opts.invoking {
		d, err := nf.f.Invoking(ctx, in)
		if err != nil {
			return notes, nil, wrapFilterError(nf.name, err)
		}
		switch {
		case d.Cancel:
			note := d.Note
			if note == "" {
				note = d.Reason
			}
			notes = append(notes, events.FilterNote{Filter: nf.name, Action: FilterCancelled, Note: note})
			return notes, &runCancelled{by: FilterCancelledBy(nf.name), reason: d.Reason}, nil
		case d.Modified:
			notes = append(notes, events.FilterNote{Filter: nf.name, Action: FilterModified, Note: d.Note})
		default:
			notes = append(notes, events.FilterNote{Filter: nf.name, Action: FilterPassed, Note: d.Note})
		}
	}
	return notes, nil, nil
}

// runInvoked runs the invoked filters over a result.
func (w *Worker) runInvoked(ctx context.Context, in *Input, res *Result) (*Result, []events.FilterNote, error) {
	var notes []events.FilterNote
	for _, nf := range w.opts.invoked {
		out, err := nf.f.Invoked(ctx, in, res)
		if err != nil {
			return nil, notes, wrapFilterError(nf.name, err)
		}
		if out != nil && out != res {
			notes = append(notes, events.FilterNote{Filter: nf.name, Action: FilterReplaced})
			res = out
			continue
		}
		notes = append(notes, events.FilterNote{Filter: nf.name, Action: FilterPassed})
	}
	return res, notes, nil
}

// wrapFilterError keeps a filter's *Error as it is, naming the filter, and
// makes any other error a retryable "FilterError".
func wrapFilterError(name string, err error) error {
	if we, ok := err.(*Error); ok {
		c := *we
		c.Message = fmt.Sprintf("filter %q: %s", name, we.Message)
		return &c
	}
	return &Error{Type: "FilterError", Message: fmt.Sprintf("filter %q", name), Retryable: true, Cause: err}
}
