package ui

import (
	"log/slog"
	"strings"
	"testing"
)

// TestFeedDropsStreamsBehind: a stream whose buffer is full is dropped,
// with why, and the others go on; when the watch ends, every stream is
// dropped and the next one starts another.
func TestFeedDropsStreamsBehind(t *testing.T) {
	f := newRunsFeed(nil, slog.New(slog.DiscardHandler))
	w := &feedWatch{cancel: func() {}, done: make(chan struct{})}
	f.cur = w
	sub := func() *feedSub {
		s := &feedSub{ch: make(chan []byte, feedBuffer), gone: make(chan struct{})}
		f.subs[s] = struct{}{}
		return s
	}
	slow, fast := sub(), sub()
	for range feedBuffer + 1 {
		f.fanOut(w, []byte(`{}`))
		<-fast.ch
	}
	select {
	case <-slow.gone:
		if !strings.Contains(slow.why, "fell behind") {
			t.Errorf("dropped because %q", slow.why)
		}
	default:
		t.Fatal("a stream that read nothing was kept")
	}
	select {
	case <-fast.gone:
		t.Fatal("a stream that kept up was dropped")
	default:
	}
	f.fanOut(&feedWatch{}, []byte(`{}`)) // a watch that is no longer the feed's
	if len(fast.ch) != 0 {
		t.Error("a stopped watch's change was handed out")
	}
	f.end(w, "the watch ended")
	if _, open := <-fast.gone; open || fast.why != "the watch ended" || f.cur != nil {
		t.Errorf("after the watch ended: why %q, watch %v", fast.why, f.cur)
	}
	f.unsubscribe(slow)
	f.unsubscribe(fast)
}
