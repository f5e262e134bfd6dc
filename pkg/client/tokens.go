package client

import (
	"context"
	"fmt"
	"strconv"
	"time"

	"github.com/nats-io/nats.go"

	"github.com/weft-dev/weft/internal/eventlog"
	"github.com/weft-dev/weft/pkg/events"
)

// Token is a piece of text a running node streamed (an agent's model
// tokens): the node's ref key ("research/1"), the step it belongs to, and
// the text.
type Token struct {
	Node string
	Step int
	Text string
}

// FollowTokens calls fn with each piece of text the nodes of a run stream,
// as it is published, until ctx ends (it returns nil then) or fn returns
// false. Tokens are core NATS messages outside the log (the node's step
// event holds the final text): what was published before FollowTokens
// subscribed is not seen, and a slow fn may miss some. fn is called from
// one goroutine at a time.
func (c *Client) FollowTokens(ctx context.Context, runID string, fn func(Token) bool) error {
	return c.FollowTokensReady(ctx, runID, nil, fn)
}

// FollowTokensReady is FollowTokens that calls ready (when not nil) once
// the subscription is in place at the server: every token published
// after ready returned is seen (the web UI tells its browser so).
func (c *Client) FollowTokensReady(ctx context.Context, runID string, ready func(), fn func(Token) bool) error {
	if !eventlog.ValidToken(runID) {
		return fmt.Errorf("following the tokens of run %s: run id %q: %w", runID, runID, events.ErrInvalidID)
	}
	if err := c.inNamespace(ctx); err != nil {
		return err
	}
	nc := eventlog.JetStream(c.store).Conn()
	ch := make(chan *nats.Msg, 256)
	sub, err := nc.ChanSubscribe(eventlog.TokenFilter(runID), ch)
	if err != nil {
		return fmt.Errorf("following the tokens of run %s: %w", runID, err)
	}
	defer func() { _ = sub.Unsubscribe() }()
	if ready != nil {
		if err := nc.FlushTimeout(10 * time.Second); err != nil && ctx.Err() == nil {
			return fmt.Errorf("following the tokens of run %s: %w", runID, err)
		}
		ready()
	}
	for {
		select {
		case <-ctx.Done():
			return nil
		case m := <-ch:
			step, _ := strconv.Atoi(m.Header.Get(eventlog.HeaderTokenStep))
			if !fn(Token{Node: m.Header.Get(eventlog.HeaderTokenNode), Step: step, Text: string(m.Data)}) {
				return nil
			}
		}
	}
}
