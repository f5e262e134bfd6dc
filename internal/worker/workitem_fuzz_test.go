package worker

import (
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go"

	"github.com/weft-dev/weft/internal/eventlog"
	"github.com/weft-dev/weft/pkg/events"
)

// FuzzDecodeWorkItem feeds the worker's decoder of task-queue messages
// (which anyone who can publish on a queue's subject writes) any subject,
// type and body: it never panics, and what it refuses is
// ErrMalformedEvent (or an error of events.Decode) naming the subject.
func FuzzDecodeWorkItem(f *testing.F) {
	run := "run1"
	ready, err := events.New(run, "run1:ready:a", time.Time{}, &events.NodeReadyData{NodeRef: events.NodeRef{Node: "a", Iteration: 1}, Attempt: 1, Type: "echo", Queue: "default"})
	if err != nil {
		f.Fatal(err)
	}
	eventlog.MarkDecision(ready)
	m, err := eventlog.Encode(ready)
	if err != nil {
		f.Fatal(err)
	}
	f.Add(m.Subject, string(events.NodeReady), m.Data)
	f.Add(m.Subject, string(events.NodeReady), []byte(`{"node":"","type":""}`))
	f.Add(m.Subject, string(events.NodeReady), []byte(`null`))
	f.Add(m.Subject, string(events.NodeReady), []byte(`[1,2]`))
	f.Add(m.Subject, string(events.RunCompleted), []byte(`{}`))
	f.Add("weft.r.00.run1.d.ready.default", "x", []byte{0xff})
	f.Fuzz(func(t *testing.T, subject, typ string, data []byte) {
		h := nats.Header{}
		for k, v := range m.Header {
			h[k] = v
		}
		h.Set("ce-type", typ)
		ev, r, err := decodeWorkItem(subject, h, data)
		if err != nil {
			if ev != nil || r != nil {
				t.Fatalf("error with a result: %v", err)
			}
			if !errors.Is(err, events.ErrMalformedEvent) && !errors.Is(err, events.ErrMisplaced) && !errors.Is(err, events.ErrUnknownType) {
				t.Fatalf("error of no known kind: %v", err)
			}
			if subject != "" && !strings.Contains(err.Error(), subject) {
				t.Fatalf("error does not name the subject %q: %v", subject, err)
			}
			return
		}
		if ev.Type != events.NodeReady || r.Node == "" || r.Type == "" {
			t.Fatalf("accepted %s %+v", ev.Type, r)
		}
	})
}

// TestNewerWorkItem: a node-ready of a higher type version is left to
// other workers; the current version, other types and junk are not.
func TestNewerWorkItem(t *testing.T) {
	run := "run1"
	ready, err := events.New(run, "run1:ready:a", time.Time{}, &events.NodeReadyData{NodeRef: events.NodeRef{Node: "a", Iteration: 1}, Attempt: 1, Type: "echo", Queue: "default"})
	if err != nil {
		t.Fatal(err)
	}
	eventlog.MarkDecision(ready)
	m, err := eventlog.Encode(ready)
	if err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		typ   string
		newer bool
	}{
		{"dev.weft.node.ready.v2", true},
		{"dev.weft.node.ready.v10", true},
		{"dev.weft.node.ready.v1", false}, // decodes: not an error at all
		{"dev.weft.node.ready.v0", false},
		{"dev.weft.node.ready.vx", false},
		{"dev.weft.node.invoked.v2", false},
		{"com.example.other.v3", false},
	}
	for _, tc := range tests {
		h := nats.Header{}
		for k, v := range m.Header {
			h[k] = v
		}
		h.Set("ce-type", tc.typ)
		_, _, err := decodeWorkItem(m.Subject, h, m.Data)
		if _, newer := newerWorkItem(h, err); newer != tc.newer {
			t.Errorf("%s (decode error %v): newer %v, want %v", tc.typ, err, newer, tc.newer)
		}
	}
}
