package eventlog_test

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/cloudevents/sdk-go/v2/binding"
	cehttp "github.com/cloudevents/sdk-go/v2/protocol/http"
	"github.com/nats-io/nats.go"

	"github.com/weft-dev/weft/internal/eventlog"
)

func intp(i int) *int { return &i }

// samples holds one event of every type the engine writes.
func samples() map[eventlog.Type]eventlog.Payload {
	ref := eventlog.NodeRef{Node: "fetch", Iteration: 2}
	item := eventlog.NodeRef{Node: "each", Iteration: 1, Item: intp(3)}
	fail := eventlog.Failure{Type: "HTTPError", Message: "503 from upstream", Retryable: true, Cause: &eventlog.Failure{Type: "Net", Message: "reset"}}
	at := time.Date(2026, 5, 1, 12, 0, 0, 0, time.UTC)
	return map[eventlog.Type]eventlog.Payload{
		eventlog.RunStarted: &eventlog.RunStartedData{GraphName: "g", GraphDigest: eventlog.GraphDigest([]byte(`{"name":"g"}`)), Graph: json.RawMessage(`{"name":"g"}`),
			Input: json.RawMessage(`{"a":1}`), Invocation: json.RawMessage(`{"user_tier":"premium"}`),
			StartedBy: "cli", Nonce: "0123456789abcdefghijklmnop"},
		eventlog.RunCompleted:       &eventlog.RunCompletedData{Output: json.RawMessage(`{"ok":true}`)},
		eventlog.RunFailed:          &eventlog.RunFailedData{Error: fail, Node: "fetch"},
		eventlog.RunCancelRequested: &eventlog.RunCancelRequestedData{By: "alice", Reason: "wrong input"},
		eventlog.RunCancelled:       &eventlog.RunCancelledData{By: "alice", Reason: "wrong input"},
		eventlog.NodeReady: &eventlog.NodeReadyData{NodeRef: ref, Attempt: 2, Type: "http", Queue: "io", Config: json.RawMessage(`{"url":"http://x"}`),
			Input: json.RawMessage(`{"a":1}`), Local: json.RawMessage(`{"k":"v"}`), IdempotencyKey: "abc", TimeoutMs: 3000, Consumed: []int{1}, Owed: []int{2}},
		eventlog.NodeInvoking: &eventlog.NodeInvokingData{NodeRef: ref, Attempt: 2, Delivery: 3, Worker: "w1",
			Filters: []eventlog.FilterNote{{Filter: "redact", Action: "modified"}}},
		eventlog.NodeInvoked: &eventlog.NodeInvokedData{NodeRef: item, Attempt: 1, Output: json.RawMessage(`[1,2]`),
			Updates: map[string]json.RawMessage{"n": json.RawMessage(`2`)}, Actions: []eventlog.Action{{Name: "approve", Data: json.RawMessage(`{"x":1}`)}}, DurationMs: 12},
		eventlog.NodeFailed:       &eventlog.NodeFailedData{NodeRef: ref, Attempt: 2, Error: fail, DurationMs: 40, Worker: "w1"},
		eventlog.NodeSkipped:      &eventlog.NodeSkippedData{NodeRef: ref, Reason: "its when condition is false", Consumed: []int{0}},
		eventlog.NodeWaiting:      &eventlog.NodeWaitingData{NodeRef: ref, For: "signal", Deadline: &at},
		eventlog.NodeRouted:       &eventlog.NodeRoutedData{NodeRef: ref, Signals: []eventlog.Signal{{Edge: 1, To: "b", Taken: true, Data: json.RawMessage(`{"k":1}`)}, {Edge: 2, To: "a", Back: true}}},
		eventlog.NodeCanceled:     &eventlog.NodeCancelledData{NodeRef: ref, Attempt: 1, By: "filter:quota", Reason: "over quota"},
		eventlog.Heartbeat:        &eventlog.HeartbeatData{NodeRef: ref, Attempt: 1, Details: json.RawMessage(`{"pct":40}`)},
		eventlog.NodeStep:         &eventlog.NodeStepData{NodeRef: ref, Attempt: 1, Step: 2, Kind: "model", Data: json.RawMessage(`{"messages":[]}`)},
		eventlog.RetryScheduled:   &eventlog.RetryScheduledData{NodeRef: ref, Attempt: 3, At: at, TimerID: "retry-fetch-2-3", LastFailure: fail},
		eventlog.TimerFired:       &eventlog.TimerFiredData{TimerID: "retry-fetch-2-3", Purpose: "retry", Ref: ref, Attempt: 3},
		eventlog.SignalReceived:   &eventlog.SignalReceivedData{Node: "approve", Data: json.RawMessage(`{"ok":true}`), By: "bob"},
		eventlog.ChildRunStarted:  &eventlog.ChildRunStartedData{NodeRef: ref, ChildRunID: "run1-fetch-2", Graph: "child"},
		eventlog.ChildRunFinished: &eventlog.ChildRunFinishedData{NodeRef: ref, ChildRunID: "run1-fetch-2", Status: "completed", Output: json.RawMessage(`{}`)},
	}
}

func sampleEvents(t *testing.T) []*eventlog.Event {
	t.Helper()
	var out []*eventlog.Event
	all := samples()
	for _, typ := range eventlog.Types() {
		p, ok := all[typ]
		if !ok {
			t.Fatalf("no sample of %s: every type of the catalogue needs one", typ)
		}
		e, err := eventlog.New("run1", "id-"+string(typ), time.Date(2026, 5, 1, 12, 0, 0, 123, time.UTC), p)
		if err != nil {
			t.Fatal(err)
		}
		e.Queue = "default" // the queue of the work item a worker's outcome answers
		e.TraceParent = "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01"
		e.TraceState = "weft=1"
		out = append(out, e)
	}
	return out
}

// TestStockCloudEventsClientReadsEveryEvent decodes every kind of event
// with the CloudEvents SDK alone: NATS binary mode uses the same "ce-"
// headers as HTTP binary mode, so the SDK's HTTP binding reads the message
// as a stock client would.
func TestStockCloudEventsClientReadsEveryEvent(t *testing.T) {
	for _, e := range sampleEvents(t) {
		t.Run(string(e.Type), func(t *testing.T) {
			msg, err := eventlog.Encode(e)
			if err != nil {
				t.Fatal(err)
			}
			hdr := http.Header{}
			for k, vs := range msg.Header {
				for _, v := range vs {
					hdr.Add(k, v)
				}
			}
			ce, err := binding.ToEvent(context.Background(), cehttp.NewMessage(hdr, io.NopCloser(bytes.NewReader(msg.Data))))
			if err != nil {
				t.Fatalf("SDK cannot read the message: %v", err)
			}
			if err := ce.Validate(); err != nil {
				t.Fatalf("invalid CloudEvent: %v", err)
			}
			if ce.SpecVersion() != "1.0" || ce.Type() != string(e.Type) || ce.ID() != e.ID || ce.Source() != eventlog.Source {
				t.Fatalf("attributes: %s %s %s %s", ce.SpecVersion(), ce.Type(), ce.ID(), ce.Source())
			}
			if !ce.Time().Equal(e.Time) {
				t.Fatalf("time %v, want %v", ce.Time(), e.Time)
			}
			if ce.DataContentType() != "application/json" || !bytes.Equal(ce.Data(), e.Data) {
				t.Fatalf("data %s %q", ce.DataContentType(), ce.Data())
			}
			ext := ce.Extensions()
			if ext[eventlog.ExtRunID] != "run1" || ext[eventlog.ExtTraceParent] != e.TraceParent || ext[eventlog.ExtTraceState] != "weft=1" {
				t.Fatalf("extensions %v", ext)
			}
			if e.NodeID != "" && ext[eventlog.ExtNodeID] != e.NodeID {
				t.Fatalf("nodeid extension %v, want %q", ext[eventlog.ExtNodeID], e.NodeID)
			}
			if msg.Header.Get(nats.MsgIdHdr) != e.ID {
				t.Fatalf("Nats-Msg-Id %q", msg.Header.Get(nats.MsgIdHdr))
			}
		})
	}
}

func TestEncodeDecodeRoundTrip(t *testing.T) {
	for _, e := range sampleEvents(t) {
		for _, decision := range []bool{false, true} {
			if decision { // else as New made it
				eventlog.MarkDecision(e)
			}
			msg, err := eventlog.Encode(e)
			if errors.Is(err, eventlog.ErrMisplaced) {
				continue // a type that is not a decision (or a start that is not a child's), written as one
			}
			if err != nil {
				t.Fatal(err)
			}
			got, err := eventlog.Decode(msg.Subject, msg.Header, msg.Data)
			if err != nil {
				t.Fatalf("%s: %v", e.Type, err)
			}
			if got.ID != e.ID || got.Type != e.Type || !got.Time.Equal(e.Time) || got.RunID != e.RunID ||
				got.NodeID != e.NodeID || got.Attempt != e.Attempt || got.TraceParent != e.TraceParent ||
				!bytes.Equal(got.Data, e.Data) || got.IsDecision() != (decision || e.Type.Decision()) {
				t.Fatalf("%s: round trip\n got %+v\nwant %+v", e.Type, got, e)
			}
			want, _ := e.Payload()
			p, _ := got.Payload()
			if !reflect.DeepEqual(p, want) {
				t.Fatalf("%s: payload\n got %+v\nwant %+v", e.Type, p, want)
			}
		}
	}
}

func TestJSONRoundTrip(t *testing.T) {
	for _, e := range sampleEvents(t) {
		e.Seq = 1 << 40
		eventlog.MarkDecision(e)
		b, err := json.Marshal(e)
		if err != nil {
			t.Fatal(err)
		}
		var got eventlog.Event
		if err := json.Unmarshal(b, &got); err != nil {
			t.Fatalf("%s: %v\n%s", e.Type, err, b)
		}
		if got.Seq != e.Seq || !got.IsDecision() || got.ID != e.ID || !bytes.Equal(got.Data, e.Data) || got.NodeID != e.NodeID {
			t.Fatalf("%s: JSON round trip\n got %+v\nwant %+v", e.Type, got, e)
		}
	}
}

func TestDecodeRejects(t *testing.T) {
	good, err := eventlog.Encode(sampleEvents(t)[0])
	if err != nil {
		t.Fatal(err)
	}
	with := func(k, v string) nats.Header {
		h := nats.Header{}
		for key, vs := range good.Header {
			h[key] = append([]string(nil), vs...)
		}
		if v == "" {
			delete(h, k)
		} else {
			h.Set(k, v)
		}
		return h
	}
	tests := []struct {
		name    string
		subject string
		hdr     nats.Header
		data    string
		wantErr error
	}{
		{"not a cloud event", good.Subject, nil, "hello", eventlog.ErrMalformedEvent},
		{"unknown type", good.Subject, with("ce-type", "com.example.other"), string(good.Data), eventlog.ErrUnknownType},
		{"broken json", good.Subject, good.Header, `{"node":`, eventlog.ErrMalformedEvent},
		{"wrong field type", good.Subject, good.Header, `{"graphName": 7}`, eventlog.ErrMalformedEvent},
		{"no run id", good.Subject, with("ce-runid", ""), string(good.Data), eventlog.ErrMalformedEvent},
		{"run id not the subject's", eventlog.StartedSubject("other"), good.Header, string(good.Data), eventlog.ErrMalformedEvent},
		{"not a run subject", "weft.ev.run1.started", good.Header, string(good.Data), eventlog.ErrMisplaced},
		{"wrong slot", "weft.r.zz.run1.c.started", good.Header, string(good.Data), eventlog.ErrMisplaced},
		{"type on another kind's subject", strings.Replace(good.Subject, ".c.started", ".c.signal", 1), good.Header, string(good.Data), eventlog.ErrMisplaced},
		{"start written as a decision", strings.Replace(good.Subject, ".c.started", ".d.started", 1), good.Header, string(good.Data), eventlog.ErrMisplaced},
		{"bad spec version", good.Subject, with("ce-specversion", "0.1"), string(good.Data), eventlog.ErrMalformedEvent},
		{"bad time", good.Subject, with("ce-time", "yesterday"), string(good.Data), eventlog.ErrMalformedEvent},
		{"bad attempt", good.Subject, with("ce-attempt", "-3"), string(good.Data), eventlog.ErrMalformedEvent},
		{"no id", good.Subject, with("ce-id", ""), string(good.Data), eventlog.ErrMalformedEvent},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := eventlog.Decode(tt.subject, tt.hdr, []byte(tt.data))
			if !errors.Is(err, tt.wantErr) {
				t.Fatalf("got %v, want %v", err, tt.wantErr)
			}
		})
	}
}

// TestChildStartsAreTheCoordinators: a child run's start is a decision,
// on the child's decision subject, and the only start that may name a
// parent: one that names a parent on a client's subject is refused with a
// ParentClaimError (which says what it claimed), and Store.Append refuses
// to write one (see TestAppendRefusesParentClaim); a start on the decision
// subject that names none is refused too.
func TestChildStartsAreTheCoordinators(t *testing.T) {
	parent := &eventlog.ParentRef{RunID: "victim1", Ref: eventlog.NodeRef{Node: "child", Iteration: 1}}
	// start is the message of a start naming p (or no parent) on the
	// child's decision subject or the client's: what the engine writes,
	// or an attacker's bytes where the engine writes nothing.
	start := func(p *eventlog.ParentRef, decision bool) *nats.Msg {
		t.Helper()
		encode := func(p *eventlog.ParentRef) (*nats.Msg, error) {
			e, err := eventlog.New("run1", "run1", time.Date(2026, 5, 1, 12, 0, 0, 0, time.UTC), &eventlog.RunStartedData{GraphName: "g", GraphDigest: eventlog.GraphDigest([]byte(`{"name":"g"}`)), Graph: json.RawMessage(`{"name":"g"}`), Parent: p})
			if err != nil {
				t.Fatal(err)
			}
			if decision {
				eventlog.MarkDecision(e)
			}
			return eventlog.Encode(e)
		}
		m, err := encode(p)
		if decision == (p != nil) {
			if err != nil {
				t.Fatal(err)
			}
			return m
		}
		// The engine refuses to write it.
		var pc *eventlog.ParentClaimError
		if !errors.Is(err, eventlog.ErrMisplaced) || (p != nil && !errors.As(err, &pc)) {
			t.Fatalf("encoding a start (decision %v, parent %v): %v, want it refused", decision, p, err)
		}
		other := parent
		if p != nil {
			other = nil
		}
		if m, err = encode(other); err != nil {
			t.Fatal(err)
		}
		m.Data, _ = json.Marshal(&eventlog.RunStartedData{GraphName: "g", GraphDigest: eventlog.GraphDigest([]byte(`{"name":"g"}`)), Graph: json.RawMessage(`{"name":"g"}`), Parent: p})
		return m
	}
	child := start(parent, true)
	if child.Subject != eventlog.ChildStartedSubject("run1") {
		t.Fatalf("a child start goes on %s, want %s", child.Subject, eventlog.ChildStartedSubject("run1"))
	}
	for name, dec := range map[string]func(string, nats.Header, []byte) (*eventlog.Event, error){"fast": func(s string, h nats.Header, d []byte) (*eventlog.Event, error) {
		e, _, err := eventlog.DecodeFast(s, h, d)
		return e, err
	}, "sdk": eventlog.DecodeSDK, "decode": eventlog.Decode} {
		got, err := dec(child.Subject, child.Header, child.Data)
		if err != nil || !got.IsDecision() || got.Type != eventlog.RunStarted {
			t.Fatalf("%s: the coordinator's child start: %v %+v", name, err, got)
		}
		claim := start(parent, false)
		_, err = dec(claim.Subject, claim.Header, claim.Data)
		var pc *eventlog.ParentClaimError
		if !errors.Is(err, eventlog.ErrMisplaced) || !errors.As(err, &pc) || pc.Parent != *parent {
			t.Fatalf("%s: a client's start naming a parent: %v, want a ParentClaimError naming %+v", name, err, parent)
		}
		if !strings.Contains(err.Error(), "victim1") || !strings.Contains(err.Error(), "child/1") {
			t.Errorf("%s: the refusal does not say what was claimed: %v", name, err)
		}
		orphan := start(nil, true)
		if _, err := dec(orphan.Subject, orphan.Header, orphan.Data); !errors.Is(err, eventlog.ErrMisplaced) {
			t.Fatalf("%s: a start on a decision subject naming no parent: %v, want ErrMisplaced", name, err)
		}
	}
	// Stored, the claim keeps its place, refused, with what it claimed.
	claim := start(parent, false)
	e := eventlog.DecodeStored(claim.Subject, claim.Header, claim.Data, 9, time.Now())
	var pc *eventlog.ParentClaimError
	if !errors.As(e.Refused, &pc) || e.Seq != 9 || e.Type != eventlog.RunStarted {
		t.Fatalf("stored claim: %+v", e)
	}
}

// FuzzDecode: no input from the wire panics the decoder, and whatever it
// accepts encodes again.
func FuzzDecode(f *testing.F) {
	for _, e := range sampleEvents(&testing.T{}) {
		m, _ := eventlog.Encode(e)
		f.Add(m.Subject, m.Header.Get("ce-type"), m.Header.Get("ce-time"), m.Header.Get("ce-attempt"), m.Data)
	}
	f.Fuzz(func(t *testing.T, subject, typ, at, attempt string, data []byte) {
		h := nats.Header{"ce-specversion": {"1.0"}, "ce-id": {"x"}, "ce-source": {"s"}, "ce-runid": {"run1"},
			"ce-type": {typ}, "ce-time": {at}, "ce-attempt": {attempt}, "content-type": {"application/json"}}
		e, err := eventlog.Decode(subject, h, data)
		if err != nil {
			return
		}
		if _, err := eventlog.Encode(e); err != nil && !errors.Is(err, eventlog.ErrMalformedEvent) {
			t.Fatalf("decoded event does not encode: %v", err)
		}
	})
}
