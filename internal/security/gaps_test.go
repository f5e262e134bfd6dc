package security

import (
	"context"
	"encoding/json"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/weft-dev/weft/internal/eventlog"
	"github.com/weft-dev/weft/pkg/events"
)

// The TestGap… tests show rights a role still has beyond its own, because
// of how the engine uses JetStream today. Each is an open gap in
// deploy/SECURITY.md; when the engine stops needing the right, the grant
// goes and the test turns into a refusal.

// TestCoordinatorCannotPurgeRuns: dropping a run's pending timers
// (Store.CancelSchedules) is a purge of the timers stream, the only purge
// the coordinator holds; the events stream, every run's history, is out
// of its reach.
func TestCoordinatorCannotPurgeRuns(t *testing.T) {
	s := startServer(t)
	admin := s.connect(t, userAdmin)
	s.setup(t)
	ctx := context.Background()
	victim := events.NewRunID()
	if _, err := admin.js.Publish(ctx, sub(victim, "c.started"), []byte("{}")); err != nil {
		t.Fatal(err)
	}
	coord := s.connect(t, userCoord)
	st := mustStream(t, coord)
	if err := st.Purge(ctx, jetstream.WithPurgeSubject(eventlog.RunFilter(victim))); err == nil {
		t.Fatal("the coordinator purged a run's history")
	}
	if seq := lastSeqOn(t, admin, sub(victim, "c.started")); seq == 0 {
		t.Fatal("the run's start is gone")
	}
}

// TestKVCreateCannotCapture shows why no role but the admin (and the
// coordinator, for its own stream) may create streams: a stream's
// configuration is in the request body, so whoever may create the
// announcements bucket's stream could give it any subjects and a
// republish rule. Workers therefore get no create right on the
// announcements bucket, and the attack is refused.
func TestKVCreateCannotCapture(t *testing.T) {
	s := startServer(t)
	w := s.connect(t, userWorker)
	run := events.NewRunID()
	body, _ := json.Marshal(map[string]any{
		"name": "KV_weft-workers", "subjects": []string{"$KV.weft-workers.>"},
		"republish": map[string]any{"src": "$KV.weft-workers.>", "dest": sub(run, "d.completed")},
	})
	w.refusedRequest(t, "$JS.API.STREAM.CREATE.KV_weft-workers", body)
}

// TestMsgIDSquattingCaught: JetStream de-duplicates by message id across
// the whole stream, whatever the subject, and permissions do not cover
// message ids. So a client may publish, on its own subjects, under the id
// a coordinator decision will use next, and JetStream drops the decision
// as a duplicate. NATS cannot refuse this; the engine does not take the
// duplicate ack on trust: events.Store confirms it against the stored
// message and reports ErrDuplicateMismatch, or writes the event under a
// fresh id; either way the decision is not silently lost.
func TestMsgIDSquattingCaught(t *testing.T) {
	s := startServer(t)
	s.setup(t)
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	run := events.NewRunID()
	id := eventlog.DecisionID(run, events.RunCompleted)
	cl := s.connect(t, userClient)
	squat := nats.NewMsg(sub(run, "c.signal"))
	squat.Header.Set(nats.MsgIdHdr, id)
	squat.Data = []byte(`{}`)
	if _, err := cl.js.PublishMsg(ctx, squat); err != nil {
		t.Fatalf("the client's publish: %v", err)
	}
	coord := openStore(t, s.connect(t, userCoord))
	e, err := events.New(run, id, time.Now(), &events.RunCompletedData{})
	if err != nil {
		t.Fatal(err)
	}
	seq, err := eventlog.Append(ctx, coord, run, events.AnySeq, e)
	switch {
	case errors.Is(err, events.ErrDuplicateMismatch):
		// Caught, and reported to the caller.
	case err == nil:
		// Caught, and written under a fresh id: the decision is in the log.
		admin := s.connect(t, userAdmin)
		if e.ID == id || lastSeqOn(t, admin, sub(run, "d.completed")) != seq {
			t.Fatalf("append under a squatted id: id %q, seq %d, the decision subject's last at %d", e.ID, seq, lastSeqOn(t, admin, sub(run, "d.completed")))
		}
	default:
		t.Fatalf("append under a squatted id: %v", err)
	}
}

// TestGapScheduleForgesDecision: message schedules (which Weft's timers
// need, AllowMsgSchedules) let any writer of the stream name a target
// subject in a header, and the server, not the writer, publishes there
// when the schedule fires; permissions are checked on the schedule's
// subject only. So a client, on its own signal subject, schedules a
// run-completed onto the run's decision subject, and JetStream stores it
// there. NATS cannot refuse it. The fired copy carries the header
// Nats-Scheduler with the schedule's subject (which a writer cannot set
// itself), so the engine can refuse a message on a run subject whose
// scheduler is not one of the coordinator's weft.t subjects (Decode's
// checkServerHeaders): this test asserts that it does.
func TestGapScheduleForgesDecision(t *testing.T) {
	s := startServer(t)
	s.setup(t)
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	run := events.NewRunID()
	e, err := events.New(run, eventlog.DecisionID(run, events.RunCompleted), time.Now(), &events.RunCompletedData{Output: json.RawMessage(`"forged"`)})
	if err != nil {
		t.Fatal(err)
	}
	m, err := eventlog.Encode(e)
	if err != nil {
		t.Fatal(err)
	}
	target := m.Subject // weft.r.<slot>.<run>.d.completed
	m.Subject = sub(run, "c.signal")
	m.Header.Set("Nats-Schedule", "@at "+time.Now().Add(time.Second).UTC().Format(time.RFC3339Nano))
	m.Header.Set("Nats-Schedule-Target", target)
	cl := s.connect(t, userClient)
	if _, err := cl.js.PublishMsg(ctx, m); err != nil {
		// The events stream has no message schedules (timers live in
		// their own stream): refused by the server.
		if !strings.Contains(err.Error(), "schedules is disabled") {
			t.Fatalf("refused for another reason: %v", err)
		}
		return
	}
	admin := s.connect(t, userAdmin)
	deadline := time.Now().Add(10 * time.Second)
	for lastSeqOn(t, admin, target) == 0 {
		if time.Now().After(deadline) {
			t.Fatal("the schedule was taken and never fired onto the decision subject")
		}
		// Polls: the subject's last sequence is a read, which notifies nobody.
		time.Sleep(100 * time.Millisecond)
	}
	st := openStore(t, admin)
	evs, err := st.Read(ctx, run, 0, 0)
	if err != nil {
		t.Fatal(err)
	}
	refused := false
	for _, ev := range evs {
		if ev.Type == events.RunCompleted && ev.Refused == nil {
			t.Fatalf("the engine accepts the forged %s at %d on %s (fired by a client's schedule)", ev.Type, ev.Seq, target)
		}
		refused = refused || errors.Is(ev.Refused, events.ErrMisplaced)
	}
	if !refused {
		t.Fatalf("the forged end was not read as refused: %d events", len(evs))
	}
}

// TestRollupRefused: a stream with message schedules has roll-ups forced
// on, and permissions see subjects, never headers: with timers in the
// events stream, any role could purge it with "Nats-Rollup: all" on its
// own subject. Timers live in a stream of their own, so the events stream
// has roll-ups off and the server refuses the header.
func TestRollupRefused(t *testing.T) {
	s := startServer(t)
	s.setup(t)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	admin := s.connect(t, userAdmin)
	victim := events.NewRunID()
	if _, err := admin.js.Publish(ctx, sub(victim, "c.started"), []byte("{}")); err != nil {
		t.Fatal(err)
	}
	cl := s.connect(t, userClient)
	m := nats.NewMsg(sub(events.NewRunID(), "c.signal"))
	m.Header.Set("Nats-Rollup", "all")
	if _, err := cl.js.PublishMsg(ctx, m); err == nil {
		t.Error("the server took a client's rollup")
	}
	if lastSeqOn(t, admin, sub(victim, "c.started")) == 0 {
		t.Fatal("a client's rollup purged the events stream")
	}
}

// TestGapWriterChosenTTL: the events stream allows per-message TTLs
// (AllowMsgTTL, for timers), and a writer may set Nats-TTL on its own
// events: a client's signal, or a worker's outcome, is then deleted by
// the server later, and a replay of the log no longer sees it. NATS
// cannot refuse the header per subject; the engine passes over events
// that carry one, so nothing is ever decided from such an event.
func TestGapWriterChosenTTL(t *testing.T) {
	s := startServer(t)
	s.setup(t)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	cl := s.connect(t, userClient)
	run := events.NewRunID()
	subject := sub(run, "c.signal")
	sig, err := events.New(run, "sig-ttl", time.Now(), &events.SignalReceivedData{Node: "ask", Data: json.RawMessage(`{"ok":true}`)})
	if err != nil {
		t.Fatal(err)
	}
	m, err := eventlog.Encode(sig)
	if err != nil {
		t.Fatal(err)
	}
	m.Header.Set("Nats-TTL", "1s")
	if _, err := cl.js.PublishMsg(ctx, m); err != nil {
		t.Logf("the TTL was refused by the server: %v", err)
		return
	}
	admin := s.connect(t, userAdmin)
	// While it is there, the engine passes it over: the coordinator never
	// acts on an event that will vanish.
	if evs, err := openStore(t, admin).Read(ctx, run, 0, 0); err != nil || len(evs) != 1 || !errors.Is(evs[0].Refused, events.ErrMisplaced) {
		t.Fatalf("a signal with a writer-chosen TTL: read %d events (err %v), want it refused", len(evs), err)
	}
	deadline := time.Now().Add(8 * time.Second)
	for lastSeqOn(t, admin, subject) != 0 {
		if time.Now().After(deadline) {
			t.Fatal("the message outlived its TTL")
		}
		// Polls: a message's expiry by TTL sends no event.
		time.Sleep(200 * time.Millisecond)
	}
	t.Logf("a client's event on %s vanished after its writer-chosen TTL; the engine had passed it over", subject)
}
