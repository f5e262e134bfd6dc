package admission

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"sync"
	"time"

	"github.com/nats-io/nats.go"

	"github.com/weft-dev/weft/internal/eventlog"
	"github.com/weft-dev/weft/pkg/events"
)

// Headers of requests and answers.
const (
	// HdrSubject is the subject the event of a request goes on.
	HdrSubject = "Weft-Subject"
	// HdrError is the kind of a refusal (its body says why).
	HdrError = "Weft-Error"
	// HdrSeq is the sequence of the event admitted.
	HdrSeq = "Weft-Seq"
	// HdrRetryAfter is, in a refusal for a limit, how long (nanoseconds)
	// the coordinator will refuse that kind of request anyway.
	HdrRetryAfter = "Weft-Retry-After"
)

// requestTimeout is how long a request waits for its answer when ctx
// sets no deadline.
const requestTimeout = 10 * time.Second

// RequestSubject is the subject of a request for e: a start (or a fork)
// on AdmitStart, a signal or a cancel request on AdmitSignal; any other
// event is no client's to write.
func RequestSubject(e *events.Event) (string, error) {
	switch e.Type {
	case events.RunStarted:
		return eventlog.AdmitStart, nil
	case events.SignalReceived, events.RunCancelRequested:
		return eventlog.AdmitSignal, nil
	}
	return "", fmt.Errorf("%w: a %s is no client's to write", ErrInvalid, e.Type)
}

// Request asks the namespace's coordinators, over nc, to admit e and
// append it, and returns its sequence in the log. While no coordinator
// answers, it asks again, backing off up to a second, until ctx ends (10
// seconds when ctx has no deadline). A refusal wraps ErrLimit, ErrQuota,
// ErrInvalid or ErrUnavailable, or events' ErrRunExists, ErrRunNotFound
// or ErrConflict, with the coordinator's reason.
func Request(ctx context.Context, nc *nats.Conn, e *events.Event) (uint64, error) {
	seq, _, err := request(ctx, nc, e)
	return seq, err
}

// Gate is a client's side of admission: Request, and after a refusal for
// a limit, the same refusal without asking, until the coordinator said it
// would refuse anyway (its refusal window, at most a second). A client
// that asks as fast as it can then costs the coordinators and the server
// one request per slot of the limit, not one per try. The zero value is
// ready to use; it is safe for concurrent use.
type Gate struct {
	mu     sync.Mutex
	until  map[string]time.Time // request subject → refused until
	reason map[string]error
}

// Request is Request, refused at once while a refusal for e's kind holds.
func (g *Gate) Request(ctx context.Context, nc *nats.Conn, e *events.Event) (uint64, error) {
	subject, err := RequestSubject(e)
	if err != nil {
		return 0, err
	}
	g.mu.Lock()
	if time.Now().Before(g.until[subject]) {
		err := g.reason[subject]
		g.mu.Unlock()
		return 0, err
	}
	g.mu.Unlock()
	seq, wait, err := request(ctx, nc, e)
	if wait > 0 && errors.Is(err, ErrLimit) {
		g.mu.Lock()
		if g.until == nil {
			g.until, g.reason = map[string]time.Time{}, map[string]error{}
		}
		g.until[subject] = time.Now().Add(min(wait, eventlog.TicketWindow))
		g.reason[subject] = err
		g.mu.Unlock()
	}
	return seq, err
}

// request is Request, with the refusal window a refusal for a limit gives.
func request(ctx context.Context, nc *nats.Conn, e *events.Event) (uint64, time.Duration, error) {
	subject, err := RequestSubject(e)
	if err != nil {
		return 0, 0, err
	}
	m, err := eventlog.Encode(e)
	if err != nil {
		return 0, 0, err
	}
	req := nats.NewMsg(subject)
	req.Header = m.Header
	req.Header.Set(HdrSubject, m.Subject)
	req.Data = m.Data
	if _, ok := ctx.Deadline(); !ok {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, requestTimeout)
		defer cancel()
	}
	// No coordinator answering yet (starting, restarting) is waited for,
	// backing off, as long as ctx lets.
	wait := 50 * time.Millisecond
	resp, err := nc.RequestMsgWithContext(ctx, req)
	for errors.Is(err, nats.ErrNoResponders) {
		t := time.NewTimer(wait)
		select {
		case <-ctx.Done():
			t.Stop()
			return 0, 0, fmt.Errorf("%w: no coordinator answers %s in this namespace (is one running?)", ErrUnavailable, subject)
		case <-t.C:
		}
		wait = min(2*wait, time.Second)
		resp, err = nc.RequestMsgWithContext(ctx, req)
	}
	if err != nil {
		return 0, 0, fmt.Errorf("%w: asking for admission on %s: %w", ErrUnavailable, subject, err)
	}
	after, _ := strconv.ParseInt(resp.Header.Get(HdrRetryAfter), 10, 64)
	seq, err := answer(resp)
	return seq, time.Duration(after), err
}

// answer reads a coordinator's answer.
func answer(resp *nats.Msg) (uint64, error) {
	why := string(resp.Data)
	switch resp.Header.Get(HdrError) {
	case "":
		seq, err := strconv.ParseUint(resp.Header.Get(HdrSeq), 10, 64)
		if err != nil {
			return 0, fmt.Errorf("%w: an answer without a sequence: %q", ErrUnavailable, why)
		}
		return seq, nil
	case kindLimit:
		return 0, fmt.Errorf("%w: %s", ErrLimit, why)
	case kindQuota:
		return 0, fmt.Errorf("%w: %s", ErrQuota, why)
	case kindInvalid:
		return 0, fmt.Errorf("%w: %s", ErrInvalid, why)
	case kindExists:
		return 0, fmt.Errorf("%w: %s", events.ErrRunExists, why)
	case kindNotFound:
		return 0, fmt.Errorf("%w: %s", events.ErrRunNotFound, why)
	case kindConflict:
		return 0, fmt.Errorf("%w: %s", events.ErrConflict, why)
	case kindUnavailable:
		return 0, fmt.Errorf("%w: %s", ErrUnavailable, why)
	default:
		return 0, fmt.Errorf("admission: %s", why)
	}
}

// QuotaError says whether err is a JetStream store's refusal for want of
// room (a stream's max_bytes or max_msgs with new messages discarded, the
// account's storage), and wraps it in ErrQuota with what to do; any other
// error comes back as it is.
func QuotaError(err error, stream string) error {
	if err == nil || !full(err) {
		return err
	}
	return fmt.Errorf("%w: the events stream %s is full (%v): nothing was written; ended runs removed by retention ('weft admin retention') make room, or the admin raises the namespace's quota", ErrQuota, stream, err)
}
