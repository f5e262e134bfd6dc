package security

import (
	"testing"
	"time"

	"github.com/weft-dev/weft/internal/eventlog"
	"github.com/weft-dev/weft/internal/natsconn"
	"github.com/weft-dev/weft/internal/testkit"
	"github.com/weft-dev/weft/pkg/events"
)

// TestUIFollowsTokens: under the generated roles, the ui role (the web
// UI's server, which streams an agent's tokens to the browser) and the
// client hear the tokens a worker streams on its queue's token subject;
// neither may publish one, and a worker may not publish on another
// queue's.
func TestUIFollowsTokens(t *testing.T) {
	s := startServer(t)
	run := events.NewRunID()
	subject := eventlog.TokenSubject(run, queueA, "research/1")
	worker := natsconn.UserName(natsconn.RoleWorker, queueA)
	wcfg := s.creds[worker]
	wc, err := wcfg.Connect(s.url)
	if err != nil {
		t.Fatal(err)
	}
	defer wc.Close()
	for _, role := range []natsconn.Role{natsconn.RoleUI, natsconn.RoleClient} {
		user := natsconn.UserName(role, "")
		cfg := s.creds[user]
		nc, err := cfg.Connect(s.url)
		if err != nil {
			t.Fatal(err)
		}
		sub, err := nc.SubscribeSync(eventlog.TokenFilter(run))
		if err != nil {
			t.Fatal(err)
		}
		if err := nc.Flush(); err != nil {
			t.Fatal(err)
		}
		if err := wc.Publish(subject, []byte("hello")); err != nil {
			t.Fatal(err)
		}
		m, err := sub.NextMsg(10 * time.Second)
		if err != nil || string(m.Data) != "hello" {
			t.Errorf("%s following the tokens: %v, %v", user, m, err)
		}
		nc.Close()
		testkit.RefusedPublish(t, s.url, s.creds[user], subject)
	}
	testkit.RefusedPublish(t, s.url, s.creds[worker], eventlog.TokenSubject(run, queueB, "research/1"))
}
