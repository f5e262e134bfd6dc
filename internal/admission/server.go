package admission

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/weft-dev/weft/internal/eventlog"
	"github.com/weft-dev/weft/internal/logattr"
	"github.com/weft-dev/weft/pkg/events"
)

// FullAt is how full the events stream may be (of its max_bytes or
// max_msgs) before starts are refused: the rest is for runs in flight.
const FullAt = 0.9

// handlers is how many requests of each kind one server answers at once
// (subscriptions in the queue group).
const handlers = 4

// Option configures Serve.
type Option func(*Server)

// WithLogger sets the logger (default slog.Default()).
func WithLogger(l *slog.Logger) Option { return func(s *Server) { s.log = l } }

// WithClock sets the clock of the refusal windows (default time.Now).
func WithClock(now func() time.Time) Option { return func(s *Server) { s.now = now } }

// kind is what a request asks for.
type kind int

const (
	kindStart kind = iota
	kindSignal
)

func (k kind) String() string {
	if k == kindStart {
		return "run starts"
	}
	return "signals and cancel requests"
}

// Server answers a namespace's admission requests (see the package
// documentation).
type Server struct {
	store  events.Store
	js     jetstream.JetStream
	log    *slog.Logger
	now    func() time.Time
	ns     string
	stream string

	// refusedUntil is, per kind, until when (UnixNano) requests are
	// refused without asking the server for a ticket: it refused one.
	refusedUntil [2]atomic.Int64
	// Counters, for tests and logs.
	admitted, refused [2]atomic.Int64

	mu         sync.Mutex
	limits     [2]int    // the tickets streams' max_msgs
	read       time.Time // when the limits and the stream were last read
	refreshing bool
	info       *jetstream.StreamInfo
}

// New returns the admission server of store's namespace. Enabled says
// whether the namespace has admission (its stream's metadata).
func New(ctx context.Context, store events.Store, opts ...Option) (*Server, error) {
	s := &Server{store: store, js: eventlog.JetStream(store), stream: store.StreamName()}
	for _, o := range opts {
		o(s)
	}
	if s.log == nil {
		s.log = slog.Default()
	}
	if s.now == nil {
		s.now = time.Now
	}
	if err := s.refresh(ctx, true); err != nil {
		return nil, err
	}
	return s, nil
}

// Enabled reports whether the namespace's events stream turns admission
// on.
func (s *Server) Enabled() bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.info != nil && eventlog.AdmissionOn(s.info.Config)
}

// Stats are the requests admitted and refused for a limit, starts and
// signals.
func (s *Server) Stats() (admittedStarts, refusedStarts, admittedSignals, refusedSignals int64) {
	return s.admitted[kindStart].Load(), s.refused[kindStart].Load(), s.admitted[kindSignal].Load(), s.refused[kindSignal].Load()
}

// Run answers requests until ctx ends. A namespace without admission has
// none to answer: Run returns at once.
func (s *Server) Run(ctx context.Context) error {
	if !s.Enabled() {
		return nil
	}
	nc := s.js.Conn()
	var subs []*nats.Subscription
	defer func() {
		for _, sub := range subs {
			_ = sub.Drain()
		}
	}()
	for k, subject := range map[kind]string{kindStart: eventlog.AdmitStart, kindSignal: eventlog.AdmitSignal} {
		for range handlers {
			sub, err := nc.QueueSubscribe(subject, eventlog.AdmitQueue, func(m *nats.Msg) { s.handle(ctx, k, m) })
			if err != nil {
				return fmt.Errorf("answering %s: %w", subject, err)
			}
			subs = append(subs, sub)
		}
	}
	if err := nc.Flush(); err != nil {
		return fmt.Errorf("answering admission requests: %w", err)
	}
	s.log.Info("admitting the namespace's client writes", logattr.Stream, s.stream,
		logattr.StartsPerSecond, s.limit(kindStart), logattr.SignalsPerSecond, s.limit(kindSignal))
	<-ctx.Done()
	return nil
}

// handle answers one request.
func (s *Server) handle(ctx context.Context, k kind, m *nats.Msg) {
	ctx, cancel := context.WithTimeout(ctx, requestTimeout)
	defer cancel()
	seq, err := s.admit(ctx, k, m)
	resp := nats.NewMsg(m.Reply)
	if err == nil {
		s.admitted[k].Add(1)
		resp.Header.Set(HdrSeq, strconv.FormatUint(seq, 10))
	} else {
		resp.Header.Set(HdrError, errorKind(err))
		resp.Data = []byte(reason(err))
		if errors.Is(err, ErrLimit) {
			// When to ask again: the refusal window's end.
			wait := max(time.Duration(s.refusedUntil[k].Load()-s.now().UnixNano()), 0)
			resp.Header.Set(HdrRetryAfter, strconv.FormatInt(int64(wait), 10))
		}
	}
	if m.Reply != "" {
		_ = m.RespondMsg(resp)
	}
}

// admit checks a request and, admitted, appends its event.
func (s *Server) admit(ctx context.Context, k kind, m *nats.Msg) (uint64, error) {
	if s.now().UnixNano() < s.refusedUntil[k].Load() {
		s.refused[k].Add(1)
		return 0, s.limitError(k)
	}
	subject := m.Header.Get(HdrSubject)
	e, err := events.Decode(subject, m.Header, m.Data)
	if err != nil {
		return 0, fmt.Errorf("%w: %v", ErrInvalid, err)
	}
	want, _ := RequestSubject(e)
	if p, ok := eventlog.Parse(subject); !ok || p.Class != eventlog.ClassClient || want != m.Subject {
		return 0, fmt.Errorf("%w: a %s asked for on %s", ErrInvalid, e.Type, m.Subject)
	}
	if k == kindStart {
		if err := engineStartClaim(e); err != nil {
			return 0, err
		}
		if err := s.roomForStart(ctx); err != nil {
			return 0, err
		}
	}
	if err := s.ticket(ctx, k, e.ID); err != nil {
		return 0, err
	}
	if k == kindSignal {
		// Of a run of this namespace: a signal for a run that is not
		// here is nobody's.
		if _, err := s.store.LastSeq(ctx, e.RunID); err != nil {
			return 0, err
		}
	}
	expect := events.AnySeq
	if k == kindStart {
		expect = 0 // the run must not exist
	}
	seq, err := s.store.Append(ctx, e.RunID, expect, e)
	if err != nil {
		return 0, QuotaError(err, s.stream)
	}
	if k == kindStart {
		s.countStart(len(m.Data))
	}
	return seq, nil
}

// countStart counts an admitted start of size bytes in the stream's
// information, until that is read again.
func (s *Server) countStart(size int) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.info != nil {
		grown := *s.info
		grown.State.Msgs++
		grown.State.Bytes += uint64(size)
		s.info = &grown
	}
}

// ticket takes a ticket of kind k for the event id.
func (s *Server) ticket(ctx context.Context, k kind, id string) error {
	subject := eventlog.TicketStarts
	if k == kindSignal {
		subject = eventlog.TicketSignals
	}
	msg := nats.NewMsg(subject)
	msg.Header.Set(nats.MsgIdHdr, id)
	_, err := s.js.PublishMsg(ctx, msg)
	if err == nil {
		return nil
	}
	if full(err) {
		// No ticket before one frees up: at the limit's pace, one per
		// 1/limit of a second. (The limits are read again now and then:
		// the admin may change them.)
		_ = s.refresh(ctx, false)
		s.refused[k].Add(1)
		limit := max(s.limit(k), 1)
		s.refusedUntil[k].Store(s.now().Add(eventlog.TicketWindow / time.Duration(limit)).UnixNano())
		return s.limitError(k)
	}
	return fmt.Errorf("%w: taking a ticket on %s: %v", ErrUnavailable, subject, err)
}

func (s *Server) limitError(k kind) error {
	return fmt.Errorf("%w: %s over %d per second in namespace %s: nothing was written, try again later", ErrLimit, k, s.limit(k), s.namespace())
}

func (s *Server) namespace() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.ns != "" {
		return s.ns
	}
	return "of stream " + s.stream
}

// limit is a kind's limit, as its tickets stream said when last read.
func (s *Server) limit(k kind) int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.limits[k]
}

// roomForStart refuses a start while the events stream is FullAt full.
// The stream's fullness is read at most every refreshEvery while it is
// under half full, and for every start above (each start admitted since
// the last read counts in the meantime), so that the threshold holds
// however small the stream.
func (s *Server) roomForStart(ctx context.Context) error {
	if err := s.refresh(ctx, false); err != nil {
		return err
	}
	s.mu.Lock()
	near := usage(s.info) >= 0.5
	s.mu.Unlock()
	if near {
		if err := s.refresh(ctx, true); err != nil {
			return err
		}
	}
	s.mu.Lock()
	info := s.info
	s.mu.Unlock()
	cfg, st := info.Config, info.State
	if cfg.MaxBytes > 0 && float64(st.Bytes) >= FullAt*float64(cfg.MaxBytes) {
		return fmt.Errorf("%w: the events stream %s of namespace %s holds %d of its %d bytes: starts are refused above %.0f%%, so that the runs in flight can end; retention ('weft admin retention') makes room, or the admin raises the quota",
			ErrQuota, s.stream, s.namespace(), st.Bytes, cfg.MaxBytes, FullAt*100)
	}
	if cfg.MaxMsgs > 0 && float64(st.Msgs) >= FullAt*float64(cfg.MaxMsgs) {
		return fmt.Errorf("%w: the events stream %s of namespace %s holds %d of its %d messages: starts are refused above %.0f%%, so that the runs in flight can end; retention ('weft admin retention') makes room, or the admin raises the quota",
			ErrQuota, s.stream, s.namespace(), st.Msgs, cfg.MaxMsgs, FullAt*100)
	}
	return nil
}

// usage is how full a stream is: the larger of its bytes and messages
// over their limits (0 without limits).
func usage(info *jetstream.StreamInfo) float64 {
	u := 0.0
	if info.Config.MaxBytes > 0 {
		u = float64(info.State.Bytes) / float64(info.Config.MaxBytes)
	}
	if info.Config.MaxMsgs > 0 {
		u = max(u, float64(info.State.Msgs)/float64(info.Config.MaxMsgs))
	}
	return u
}

// refreshEvery is how often the limits and the stream's fullness are read
// again.
const refreshEvery = 250 * time.Millisecond

// refresh reads the events stream's information and the tickets streams'
// limits, at most every refreshEvery (always with force). The reads are
// made outside the lock: requests answered meanwhile use what was read
// before.
func (s *Server) refresh(ctx context.Context, force bool) error {
	s.mu.Lock()
	if s.info != nil && (s.refreshing || !force && s.now().Sub(s.read) < refreshEvery) {
		s.mu.Unlock()
		return nil
	}
	s.refreshing = true
	s.mu.Unlock()
	defer func() {
		s.mu.Lock()
		s.refreshing = false
		s.mu.Unlock()
	}()
	ctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	st, err := s.js.Stream(ctx, s.stream)
	if err != nil {
		return fmt.Errorf("%w: reading stream %s: %v", ErrUnavailable, s.stream, err)
	}
	info := st.CachedInfo()
	var limits [2]int
	if eventlog.AdmissionOn(info.Config) {
		for k, suffix := range map[kind]string{kindStart: eventlog.AdmitStartsSuffix, kindSignal: eventlog.AdmitSignalsSuffix} {
			ts, err := s.js.Stream(ctx, s.stream+suffix)
			if err != nil {
				return fmt.Errorf("%w: the tickets stream %s: %v (the admin sets it up: 'weft roles -setup')", ErrUnavailable, s.stream+suffix, err)
			}
			limits[k] = int(ts.CachedInfo().Config.MaxMsgs)
		}
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	s.info, s.limits, s.read = info, limits, s.now()
	if ns := info.Config.Metadata[eventlog.MetaNamespace]; ns != "" {
		s.ns = ns
	}
	return nil
}

// full reports whether err is a store's refusal for want of room: a
// stream's max_msgs or max_bytes with new messages discarded (10077), or
// the account's storage (10023, 10047).
func full(err error) bool {
	var apiErr *jetstream.APIError
	if errors.As(err, &apiErr) {
		switch apiErr.ErrorCode {
		case 10023, 10047:
			return true
		case 10077:
			return strings.Contains(apiErr.Description, "maximum")
		}
	}
	msg := err.Error()
	return strings.Contains(msg, "maximum messages exceeded") || strings.Contains(msg, "maximum bytes exceeded") ||
		strings.Contains(msg, "insufficient resources") || strings.Contains(msg, "resource limits exceeded")
}

// errorKind is the kind a refusal's header carries.
func errorKind(err error) string {
	switch {
	case errors.Is(err, ErrLimit):
		return kindLimit
	case errors.Is(err, ErrQuota):
		return kindQuota
	case errors.Is(err, ErrInvalid), errors.Is(err, events.ErrMalformedEvent), errors.Is(err, events.ErrMisplaced), errors.Is(err, events.ErrInvalidID), errors.Is(err, events.ErrPayloadTooLarge):
		return kindInvalid
	case errors.Is(err, events.ErrRunExists):
		return kindExists
	case errors.Is(err, events.ErrRunNotFound):
		return kindNotFound
	case errors.Is(err, events.ErrConflict):
		return kindConflict
	case errors.Is(err, ErrUnavailable):
		return kindUnavailable
	}
	return kindFailed
}

// reason is a refusal's text without the sentinel the client wraps it in
// again.
func reason(err error) string {
	msg := err.Error()
	for _, s := range []error{ErrLimit, ErrQuota, ErrInvalid, ErrUnavailable, events.ErrRunExists, events.ErrRunNotFound, events.ErrConflict} {
		if errors.Is(err, s) {
			return strings.TrimPrefix(msg, s.Error()+": ")
		}
	}
	return msg
}

// engineStartClaim refuses a client's start that names a schedule, an
// event trigger or a webhook (RunStartedData.Trigger): those starts are
// the engine's own (internal/schedule, internal/trigger), and a client's
// claim would list its run as theirs ('weft list -schedule').
func engineStartClaim(e *events.Event) error {
	p, err := e.Payload()
	if err != nil {
		return fmt.Errorf("%w: %v", ErrInvalid, err)
	}
	if d, ok := p.(*events.RunStartedData); ok && d.Trigger != nil {
		return fmt.Errorf("%w: a start naming %s %q is the engine's; a client cannot start a run for it", ErrInvalid, d.Trigger.Kind, d.Trigger.Name)
	}
	return nil
}
