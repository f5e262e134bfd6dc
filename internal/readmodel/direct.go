package readmodel

import (
	"context"
	"encoding/json"
	"fmt"
	"strconv"

	"github.com/nats-io/nats.go"
)

// Reads of the buckets without consumers. A KV watcher or an Object Store
// get is a consumer the reader creates on the server: it costs the server
// a consumer per reader, and the right to create one is the right to make
// it a push consumer delivering anywhere in the account (its deliver
// subject is in the request body, which permissions do not see). So the
// client role reads the read model and the archive with direct gets only
// (deploy/SECURITY.md, gap 3): a batched direct get walks a bucket's
// stream by subject filter in pages, answered from the stream's own index,
// and holds nothing on the server once answered.

// directPage is the most messages one batched direct get asks for.
const directPage = 1000

// EachDirect is eachDirect, for the other readers of buckets (the
// schedules bucket's lists, internal/schedule).
func EachDirect(ctx context.Context, nc *nats.Conn, stream, filter string, fn func(*nats.Msg) error) error {
	return eachDirect(ctx, nc, stream, filter, fn)
}

// eachDirect calls fn with every message of stream whose subject matches
// filter, in stream order, reading with batched direct gets (a stream
// with allow_direct: KV and Object Store buckets have it). A message the
// server marks as a KV delete or purge is passed over.
func eachDirect(ctx context.Context, nc *nats.Conn, stream, filter string, fn func(*nats.Msg) error) error {
	for from := uint64(1); ; {
		last, more, err := directBatch(ctx, nc, stream, filter, from, func(m *nats.Msg) error {
			switch m.Header.Get("KV-Operation") {
			case "DEL", "PURGE":
				return nil
			}
			return fn(m)
		})
		if err != nil || !more {
			return err
		}
		from = last + 1
	}
}

// directBatch is one batched direct get of up to directPage messages of
// filter from sequence from. It returns the sequence of the last message
// it got and whether more are pending.
func directBatch(ctx context.Context, nc *nats.Conn, stream, filter string, from uint64, fn func(*nats.Msg) error) (last uint64, more bool, err error) {
	req, _ := json.Marshal(map[string]any{"seq": from, "next_by_subj": filter, "batch": directPage})
	inbox := nc.NewRespInbox()
	ch := make(chan *nats.Msg, directPage+2)
	sub, err := nc.ChanSubscribe(inbox, ch)
	if err != nil {
		return 0, false, err
	}
	defer func() { _ = sub.Unsubscribe() }()
	if err := nc.PublishRequest("$JS.API.DIRECT.GET."+stream, inbox, req); err != nil {
		return 0, false, err
	}
	for got := 0; ; got++ {
		var m *nats.Msg
		select {
		case m = <-ch:
		case <-ctx.Done():
			return 0, false, fmt.Errorf("reading %s of stream %s: %w", filter, stream, ctx.Err())
		}
		switch m.Header.Get("Status") {
		case "":
		case "404", "408":
			return last, false, nil
		case "204": // end of the batch
			pending, _ := strconv.ParseUint(m.Header.Get("Nats-Num-Pending"), 10, 64)
			return last, pending > 0 && got > 0, nil
		case "503":
			return 0, false, fmt.Errorf("reading %s of stream %s: %w", filter, stream, nats.ErrNoResponders)
		default:
			return 0, false, fmt.Errorf("reading %s of stream %s: status %s %s", filter, stream, m.Header.Get("Status"), m.Header.Get("Description"))
		}
		last, _ = strconv.ParseUint(m.Header.Get("Nats-Sequence"), 10, 64)
		if err := fn(m); err != nil {
			return 0, false, err
		}
	}
}
