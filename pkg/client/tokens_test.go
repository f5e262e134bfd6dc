package client_test

import (
	"context"
	"testing"
	"time"

	"github.com/nats-io/nats.go"

	"github.com/weft-dev/weft/internal/eventlog"
	"github.com/weft-dev/weft/internal/testkit"
	"github.com/weft-dev/weft/pkg/client"
	"github.com/weft-dev/weft/pkg/events"
)

// TestFollowTokens: the text a run's nodes stream on their token subjects
// reaches FollowTokens, with the node and the step; another run's does
// not.
func TestFollowTokens(t *testing.T) {
	_, store := testkit.Store(t)
	c := client.New(store, client.WithLogger(quiet(t)))
	run, other := events.NewRunID(), events.NewRunID()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	got := make(chan client.Token, 10)
	ready := make(chan struct{})
	go func() {
		close(ready)
		_ = c.FollowTokens(ctx, run, func(tk client.Token) bool { got <- tk; return tk.Text != "world" })
	}()
	<-ready
	nc := eventlog.JetStream(store).Conn()
	publish := func(r, text string) {
		m := nats.NewMsg(eventlog.TokenSubject(r, "default", "research/1"))
		m.Header.Set(eventlog.HeaderTokenStep, "3")
		m.Header.Set(eventlog.HeaderTokenNode, "research/1")
		m.Data = []byte(text)
		if err := nc.PublishMsg(m); err != nil {
			t.Fatal(err)
		}
	}
	// The subscription is made in the goroutine: publish until heard.
	var first client.Token
	for first.Text == "" {
		publish(other, "not mine")
		publish(run, "hello ")
		select {
		case first = <-got:
		case <-time.After(50 * time.Millisecond): // not subscribed yet: publish again
		}
	}
	publish(run, "world")
	for tk := range got {
		if tk.Node != "research/1" || tk.Step != 3 || (tk.Text != "hello " && tk.Text != "world") {
			t.Fatalf("token %+v", tk)
		}
		if tk.Text == "world" {
			break
		}
	}
}
