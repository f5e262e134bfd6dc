package worker

import (
	"testing"
	"time"

	"github.com/nats-io/nats-server/v2/server"
	"github.com/nats-io/nats.go"
)

// TestEndWatchNeedsItsSubscription: a worker whose user may not subscribe
// to the ended notices (roles generated before them) does not watch, so
// its ended-run checks read the log as before; one that may, watches.
func TestEndWatchNeedsItsSubscription(t *testing.T) {
	s, err := server.NewServer(&server.Options{Host: "127.0.0.1", Port: -1, NoLog: true, NoSigs: true, Users: []*server.User{
		{Username: "old", Password: "p", Permissions: &server.Permissions{Subscribe: &server.SubjectPermission{Allow: []string{"_INBOX.>"}}}},
		{Username: "new", Password: "p"},
	}})
	if err != nil {
		t.Fatal(err)
	}
	go s.Start()
	t.Cleanup(s.Shutdown)
	if !s.ReadyForConnections(10 * time.Second) {
		t.Fatal("server not ready")
	}
	for user, want := range map[string]bool{"old": false, "new": true} {
		nc, err := nats.Connect(s.ClientURL(), nats.UserInfo(user, "p"), nats.ErrorHandler(func(*nats.Conn, *nats.Subscription, error) {}))
		if err != nil {
			t.Fatal(err)
		}
		w := watchEnds(nc)
		if got := w != nil; got != want {
			t.Errorf("user %s: watching %v, want %v", user, got, want)
		}
		if _, vouched := w.knows("r", time.Now().Add(time.Minute)); vouched != want {
			t.Errorf("user %s: vouches for an item stored later: %v, want %v", user, vouched, want)
		}
		w.stop()
		nc.Close()
	}
}
