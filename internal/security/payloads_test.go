package security

import (
	"bytes"
	"context"
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/weft-dev/weft/internal/eventlog"
	"github.com/weft-dev/weft/internal/natsconn"
)

// TestPayloadsByRole: under the shipped roles, each role gets of the
// payloads bucket what it needs. A worker keeps its outcome's 1 MB body
// beside the log, and the client keeps a 1 MB signal; the UI, the client
// and the coordinator read both back whole (direct gets, no consumer);
// the UI and the trigger role may not write an object (their publishes on
// the bucket's subjects are refused), and the bucket holds only the two
// objects written by roles that may.
func TestPayloadsByRole(t *testing.T) {
	s := startServer(t)
	admin := s.connect(t, userAdmin)
	s.setup(t)
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	run := eventlog.NewRunID()
	big := func(marker string) json.RawMessage {
		b, _ := json.Marshal(map[string]string{"marker": marker, "pad": strings.Repeat("p", 1<<20)})
		return b
	}
	event := func(id string, p eventlog.Payload) *eventlog.Event {
		e, err := eventlog.New(run, id, time.Time{}, p)
		if err != nil {
			t.Fatal(err)
		}
		e.Queue = queueA
		return e
	}
	client := openStore(t, s.connect(t, userClient))
	start := event(run, &eventlog.RunStartedData{GraphName: "g", GraphDigest: eventlog.GraphDigest([]byte(`{"name":"g"}`)), Graph: json.RawMessage(`{"name":"g"}`)})
	if _, err := eventlog.Append(ctx, client, run, 0, start); err != nil {
		t.Fatal(err)
	}
	worker := openStore(t, s.connect(t, userWorker))
	out := event(run+":out", &eventlog.NodeInvokedData{NodeRef: eventlog.NodeRef{Node: "a", Iteration: 1}, Attempt: 1, Output: big("WORKER-OUTPUT")})
	if _, err := eventlog.Append(ctx, worker, run, eventlog.AnySeq, out); err != nil {
		t.Fatalf("the worker keeps its output beside the log: %v", err)
	}
	sig := event(run+":sig", &eventlog.SignalReceivedData{Node: "a", Data: big("CLIENT-SIGNAL")})
	if _, err := eventlog.Append(ctx, client, run, eventlog.AnySeq, sig); err != nil {
		t.Fatalf("the client keeps its signal beside the log: %v", err)
	}

	for _, user := range []string{userUI, userClient, userCoord} {
		evs, err := openStore(t, s.connect(t, user)).Read(ctx, run, 0, 0)
		if err != nil {
			t.Fatalf("%s reads the run: %v", user, err)
		}
		found := 0
		for _, e := range evs {
			if e.Refused != nil {
				t.Fatalf("%s: event %d refused: %v", user, e.Seq, e.Refused)
			}
			if bytes.Contains(e.Data, []byte("WORKER-OUTPUT")) || bytes.Contains(e.Data, []byte("CLIENT-SIGNAL")) {
				found++
			}
		}
		if len(evs) != 3 || found != 2 {
			t.Fatalf("%s read %d events, %d of them large and whole; want 3 and 2", user, len(evs), found)
		}
	}

	for _, user := range []string{userUI, natsconn.UserName(natsconn.RoleTrigger, "")} {
		c := s.connect(t, user)
		for _, subject := range []string{"$O." + eventlog.PayloadsBucket + ".C.forged", "$O." + eventlog.PayloadsBucket + ".M.Zm9yZ2Vk"} {
			if err := c.nc.Publish(subject, []byte("forged")); err != nil {
				t.Fatal(err)
			}
			c.violation(t, "Publish", subject)
		}
	}
	obs, err := admin.js.ObjectStore(ctx, eventlog.PayloadsBucket)
	if err != nil {
		t.Fatal(err)
	}
	infos, err := obs.List(ctx)
	if err != nil || len(infos) != 2 {
		t.Fatalf("the bucket holds %d objects (%v), want the worker's and the client's", len(infos), err)
	}
	st, err := admin.js.Stream(ctx, "OBJ_"+eventlog.PayloadsBucket)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := st.GetLastMsgForSubject(ctx, "$O."+eventlog.PayloadsBucket+".C.forged"); err == nil {
		t.Fatal("a forged chunk was stored")
	}
}
