package worker

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sort"
	"strings"
	"time"

	"github.com/weft-dev/weft/internal/logattr"
	"github.com/weft-dev/weft/pkg/events"
)

// DefaultFallbackTimeout bounds a Fallbacker's Fallback when the node has
// no timeout.
const DefaultFallbackTimeout = 30 * time.Second

// skipNote is the filter note a Skipper's false writes on NodeInvoked.
const skipNote = "shouldExecute"

// runNode runs one execution of node over in, through the steps listed in
// contract.go, except the invoking filters (run before NodeInvoking is
// written, so that their notes are in it). Notes of the invoked filters, a
// skip and whether the result is a fallback are left on it.
func (w *Worker) runNode(ctx context.Context, node Node, in *Input, it *item) (*Result, error) {
	res, err := w.attempt(ctx, node, in, it)
	if err != nil {
		if givenUp(ctx) || errors.Is(err, ErrAwait) {
			return nil, err // no failure: no hook, no fallback
		}
		err = timeoutAware(ctx, err, it)
		if h, ok := node.(FailedHook); ok {
			h.Failed(ctx, in, err)
		}
		fb, ok := node.(Fallbacker)
		if !ok || !lastAttempt(in, err) {
			return nil, err
		}
		fctx, cancel := fallbackContext(ctx, it)
		defer cancel()
		res, ferr := fb.Fallback(fctx, in, err)
		if ferr != nil {
			it.log().Warn("node fallback failed; the attempt's failure stands", logattr.Error, ferr)
			return nil, err
		}
		if res == nil {
			res = &Result{}
		}
		it.fallback = true
		ctx = fctx
		return w.filterResult(ctx, in, res, it)
	}
	if it.skipped {
		return res, nil
	}
	return w.filterResult(ctx, in, res, it)
}

// attempt runs the node's own steps: validation, should-execute, hooks and
// execution.
func (w *Worker) attempt(ctx context.Context, node Node, in *Input, it *item) (*Result, error) {
	skip, err := w.beforeExecute(ctx, node, in, it)
	if err != nil {
		return nil, err
	}
	if skip {
		return &Result{}, nil
	}
	res, err := executeNode(ctx, node, in)
	if err != nil {
		return nil, err
	}
	if err := w.afterExecute(ctx, node, in, it.ready, res); err != nil {
		return nil, err
	}
	return res, nil
}

// beforeExecute runs the steps before the node's execution: the input
// schema, Validator, Skipper and BeforeHook. skip is true when the
// Skipper said not to run (noted on it).
func (w *Worker) beforeExecute(ctx context.Context, node Node, in *Input, it *item) (skip bool, err error) {
	if err := w.schemas().check("input", it.ready.InputSchema, in.State); err != nil {
		return false, err
	}
	if v, ok := node.(Validator); ok {
		if err := v.Validate(in); err != nil {
			return false, validationError(err)
		}
	}
	if s, ok := node.(Skipper); ok {
		run, err := s.ShouldExecute(ctx, in)
		if err != nil {
			return false, err
		}
		if !run {
			it.skipped = true
			it.invoked = append(it.invoked, events.FilterNote{Filter: skipNote, Action: FilterSkipped})
			return true, nil
		}
	}
	if h, ok := node.(BeforeHook); ok {
		return false, h.Before(ctx, in)
	}
	return false, nil
}

// executeNode runs the node itself, in phases when it has them; a nil
// result is an empty one.
func executeNode(ctx context.Context, node Node, in *Input) (res *Result, err error) {
	if x, ok := node.(Executor); ok {
		res, err = RunPhases(ctx, x, in)
	} else {
		res, err = node.Execute(ctx, in)
	}
	if err != nil {
		return nil, err
	}
	if res == nil {
		res = &Result{}
	}
	return res, nil
}

// afterExecute runs the steps after the node's execution: the declared
// outputs, the output schema and AfterHook.
func (w *Worker) afterExecute(ctx context.Context, node Node, in *Input, r *events.NodeReadyData, res *Result) error {
	if err := checkOutputs(r.Outputs, res); err != nil {
		return err
	}
	if err := w.schemas().check("output", r.OutputSchema, res.Output); err != nil {
		return err
	}
	if h, ok := node.(AfterHook); ok {
		return h.After(ctx, in, res)
	}
	return nil
}

func (w *Worker) filterResult(ctx context.Context, in *Input, res *Result, it *item) (*Result, error) {
	if len(w.opts.invoked) == 0 {
		return res, nil
	}
	out, notes, err := w.runInvoked(ctx, in, res)
	it.invoked = append(it.invoked, notes...)
	if err != nil {
		return nil, err
	}
	return out, nil
}

// givenUp reports whether the node's context ended for a reason that is not
// the node's failure: the worker's drain, a lost heartbeat, the run's
// cancellation. The execution then has no outcome of its own.
func givenUp(ctx context.Context) bool {
	cause := context.Cause(ctx)
	var rc *runCancelled
	return errors.Is(cause, errDrainTimeout) || errors.Is(cause, errHeartbeatLost) || errors.As(cause, &rc)
}

// timeoutAware makes the error of a node whose timeout passed the timeout
// failure the worker records for it.
func timeoutAware(ctx context.Context, err error, it *item) error {
	if !errors.Is(context.Cause(ctx), context.DeadlineExceeded) {
		return err
	}
	var we *Error
	if errors.As(err, &we) && we.Type == events.FailureTimeout {
		return err
	}
	return &Error{
		Type:      events.FailureTimeout,
		Message:   fmt.Sprintf("node timed out after %s", time.Duration(it.ready.TimeoutMs)*time.Millisecond),
		Retryable: true,
		Cause:     err,
	}
}

// lastAttempt reports whether a failure ends the node's attempts: it is not
// retryable, or the attempt is the last the retry policy allows.
func lastAttempt(in *Input, err error) bool {
	f := failureOf(err)
	return !f.Retryable || (in.MaxAttempts > 0 && in.Attempt >= in.MaxAttempts)
}

func fallbackContext(ctx context.Context, it *item) (context.Context, context.CancelFunc) {
	d := DefaultFallbackTimeout
	if t := time.Duration(it.ready.TimeoutMs) * time.Millisecond; t > 0 {
		d = t
	}
	return context.WithTimeout(context.WithoutCancel(ctx), d)
}

// validationError makes a Validator's error a non-retryable ValidationError,
// keeping the details of a *Error.
func validationError(err error) error {
	e := &Error{Type: events.FailureValidation, Message: "invalid input: " + err.Error()}
	var we *Error
	if errors.As(err, &we) {
		e.Message = "invalid input: " + we.Message
		e.Details = we.Details
		e.Cause = we.Cause
	}
	return e
}

// checkOutputs refuses updates to state keys the node does not declare as
// outputs.
func checkOutputs(outputs []string, res *Result) error {
	if len(outputs) == 0 || len(res.Updates) == 0 {
		return nil
	}
	var bad []string
	for k := range res.Updates {
		if !slices.Contains(outputs, k) {
			bad = append(bad, k)
		}
	}
	if len(bad) == 0 {
		return nil
	}
	sort.Strings(bad)
	return &Error{
		Type:    events.FailureValidation,
		Message: fmt.Sprintf("updates state keys the node does not declare as outputs: %s (outputs: %s)", strings.Join(bad, ", "), strings.Join(outputs, ", ")),
		Details: map[string]any{"undeclared": bad, "outputs": outputs},
	}
}

// prepareInput decodes the work item's input and runs the invoking filters
// over it, before NodeInvoking is written (it carries their notes). A
// decoding or filter error is kept on it and becomes the attempt's failure.
// With no invoking filters nothing is done: the input is decoded when the
// node is called (call), after NodeInvoking's append, so that the next
// node's invoking (the end of a hop) waits for nothing it does not need.
func (w *Worker) prepareInput(ctx context.Context, it *item) (notes []events.FilterNote, cancelled *runCancelled) {
	if it.inErr != nil || len(w.opts.invoking) == 0 { // not resolved, or nothing to filter
		return nil, nil
	}
	in, err := input(it)
	if err != nil {
		it.inErr = err
		return nil, nil
	}
	it.in = in
	defer func() {
		if r := recover(); r != nil {
			it.inErr = &Error{Type: events.FailurePanic, Message: fmt.Sprintf("invoking filter: %v", r)}
			cancelled = nil
		}
	}()
	notes, cancelled, err = w.runInvoking(ctx, in)
	if err != nil {
		it.inErr = err
	}
	return notes, cancelled
}

func isTimeout(err error) bool {
	var we *Error
	return errors.As(err, &we) && we.Type == events.FailureTimeout
}
