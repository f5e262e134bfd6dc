package ui

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/weft-dev/weft/internal/readmodel"
	"github.com/weft-dev/weft/pkg/client"
	"github.com/weft-dev/weft/pkg/events"
	"github.com/weft-dev/weft/pkg/projection"
)

// stream writes server-sent events. Its writes are serialised, so a
// pinger may share it; the response starts with its first write.
type stream struct {
	mu      sync.Mutex
	w       http.ResponseWriter
	rc      *http.ResponseController
	started bool
}

func newStream(w http.ResponseWriter) *stream {
	return &stream{w: w, rc: http.NewResponseController(w)}
}

// start sends the response's headers; the caller holds mu.
func (s *stream) start() error {
	if s.started {
		return nil
	}
	s.started = true
	h := s.w.Header()
	h.Set("Content-Type", "text/event-stream; charset=utf-8")
	h.Set("Cache-Control", "no-store")
	// Reverse proxies (nginx) buffer responses unless told not to.
	h.Set("X-Accel-Buffering", "no")
	s.w.WriteHeader(http.StatusOK)
	return s.rc.Flush()
}

// send writes one event with a JSON payload on a single data line
// (encoding/json writes no raw newline), and its id when it has one.
func (s *stream) send(event, id string, data []byte) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if err := s.start(); err != nil {
		return err
	}
	if id != "" {
		if _, err := fmt.Fprintf(s.w, "id: %s\n", id); err != nil {
			return err
		}
	}
	if _, err := fmt.Fprintf(s.w, "event: %s\ndata: %s\n\n", event, data); err != nil {
		return err
	}
	return s.rc.Flush()
}

// ping writes a comment, once the stream has started.
func (s *stream) ping() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if !s.started {
		return nil
	}
	if _, err := fmt.Fprint(s.w, ": ping\n\n"); err != nil {
		return err
	}
	return s.rc.Flush()
}

// isStarted says whether the response has begun (no error status can be
// sent any more).
func (s *stream) isStarted() bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.started
}

// pinger pings st every interval until ctx ends, and cancels stop when a
// ping cannot be written (the client went away). The returned function
// stops it and waits for it.
func pinger(ctx context.Context, st *stream, interval time.Duration, stop context.CancelFunc) func() {
	ctx, cancel := context.WithCancel(ctx)
	var wg sync.WaitGroup
	wg.Go(func() {
		t := time.NewTicker(interval)
		defer t.Stop()
		for {
			select {
			case <-ctx.Done():
				return
			case <-t.C:
				if err := st.ping(); err != nil {
					stop()
					return
				}
			}
		}
	})
	return func() { cancel(); wg.Wait() }
}

// liveRuns answers GET /api/live/runs: an event "run" with the run's
// summary whenever its entry in the read model changes. Every stream
// shares the server's one watch of the read model (runsFeed).
func (s *server) liveRuns(w http.ResponseWriter, r *http.Request) {
	ctx := r.Context()
	sub, err := s.feed.subscribe(ctx)
	if errors.Is(err, jetstream.ErrBucketNotFound) {
		s.fail(w, r, &apiError{Status: http.StatusServiceUnavailable, Message: fmt.Sprintf("no read model of runs (KV bucket %s): no coordinator has run against this server yet", readmodel.Bucket)})
		return
	}
	if err != nil {
		s.fail(w, r, err)
		return
	}
	defer s.feed.unsubscribe(sub)
	st := newStream(w)
	st.mu.Lock()
	err = st.start()
	st.mu.Unlock()
	if err != nil {
		return
	}
	t := time.NewTicker(s.cfg.Ping)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
			if st.ping() != nil {
				return
			}
		case b := <-sub.ch:
			if st.send("run", "", b) != nil {
				return
			}
		case <-sub.gone:
			b, _ := json.Marshal(apiError{Message: sub.why})
			_ = st.send("error", "", b)
			return
		}
	}
}

// liveRun answers GET /api/live/runs/{id}?from=N: an event "event" for
// each of the run's events after position N (or after the position in
// Last-Event-ID), as they are stored, with the position as its id, and
// "end" once the run has ended and its last event was sent.
func (s *server) liveRun(w http.ResponseWriter, r *http.Request) {
	id, err := runID(r)
	if err != nil {
		s.fail(w, r, err)
		return
	}
	from, err := liveFrom(r)
	if err != nil {
		s.fail(w, r, err)
		return
	}
	ctx, cancel := context.WithCancel(r.Context())
	defer cancel()
	st := newStream(w)
	stopPing := pinger(ctx, st, s.cfg.Ping, cancel)
	defer stopPing()
	writeErr, err := s.followLive(ctx, st, id, from)
	switch {
	case writeErr || ctx.Err() != nil:
		return
	case errors.Is(err, events.ErrRunNotFound) && !st.isStarted():
		// Not in the live log: an archived run has ended, and its
		// events are all there is.
		l, aerr := s.logs.get(ctx, id)
		if aerr != nil {
			s.fail(w, r, aerr)
			return
		}
		for i := from; i < len(l.events); i++ {
			b, err := json.Marshal(s.viewEvent(i+1, l.events[i], l.folded[i]))
			if err != nil || st.send("event", strconv.Itoa(i+1), b) != nil {
				return
			}
		}
	case err != nil && !st.isStarted():
		s.fail(w, r, err)
		return
	case err != nil:
		// The stream has begun: say why it ends.
		b, _ := json.Marshal(apiError{Message: strings.TrimSpace(err.Error())})
		_ = st.send("error", "", b)
		return
	}
	_ = st.send("end", "", []byte("{}"))
}

// liveFrom is the position liveRun's stream goes on after: ?from=N, or
// the position in Last-Event-ID when later (a browser's EventSource that
// reconnects says the last event it had).
func liveFrom(r *http.Request) (int, error) {
	from, err := intParam(r.URL.Query(), "from", 0, 0, 1<<31-1)
	if err != nil {
		return 0, err
	}
	if last := r.Header.Get("Last-Event-ID"); last != "" {
		n, err := strconv.Atoi(last)
		if err != nil || n < 0 {
			return 0, badParam("Last-Event-ID", "want the position of an event, got %q", last)
		}
		from = max(from, n)
	}
	return from, nil
}

// followLive sends st the events of run id in the live log after position
// from, as they are stored, until the run ends or ctx does; writeErr says
// the stream could not be written to, err why the following ended.
func (s *server) followLive(ctx context.Context, st *stream, id string, from int) (writeErr bool, err error) {
	var prev projection.State
	err = s.cl.Follow(ctx, id, func(re client.RunEvent, _ *projection.State) bool {
		folded := prev.Apply(re.Event)
		if re.Position < from {
			return true
		}
		if re.Position == from {
			// The browser has this one: the run exists, so the
			// stream begins now rather than with the next event,
			// which may be long in coming for a waiting run.
			st.mu.Lock()
			err := st.start()
			st.mu.Unlock()
			if err != nil {
				writeErr = true
				return false
			}
			return true
		}
		b, err := json.Marshal(s.viewEvent(re.Position, re.Event, folded))
		if err == nil {
			err = st.send("event", strconv.Itoa(re.Position), b)
		}
		if err != nil {
			writeErr = true
			return false
		}
		return true
	})
	return writeErr, err
}
