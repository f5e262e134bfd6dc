package ui

import (
	"context"
	"encoding/json"
	"log/slog"
	"sync"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/weft-dev/weft/internal/logattr"
	"github.com/weft-dev/weft/internal/readmodel"
)

// feedBuffer is how many changes a live run list may fall behind before
// the feed drops it: a page that reads nothing must not hold up the
// others, nor grow the server's memory.
const feedBuffer = 256

// runsFeed is the one KV watch of the read model of runs behind every
// live run list (GET /api/live/runs). The first stream starts it and the
// last one stops it; each change is decoded once and handed to every
// stream in memory, so N pages cost the server one consumer of the
// bucket, not N.
type runsFeed struct {
	js  jetstream.JetStream
	log *slog.Logger

	mu   sync.Mutex
	subs map[*feedSub]struct{}
	cur  *feedWatch // nil when no watch runs
}

// feedWatch is one run of the watch.
type feedWatch struct {
	cancel context.CancelFunc
	done   chan struct{}
}

// feedSub is one live stream's share of the feed: changes (summaries as
// JSON) on ch, and gone closed, with why, when the feed drops it.
type feedSub struct {
	ch   chan []byte
	gone chan struct{}
	why  string
}

func newRunsFeed(js jetstream.JetStream, log *slog.Logger) *runsFeed {
	return &runsFeed{js: js, log: log, subs: map[*feedSub]struct{}{}}
}

// subscribe adds a stream, starting the watch if none runs. Its errors
// are the bucket's lookup's (jetstream.ErrBucketNotFound: no read model
// yet) and the watch's.
func (f *runsFeed) subscribe(ctx context.Context) (*feedSub, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.cur == nil {
		if err := f.startLocked(ctx); err != nil {
			return nil, err
		}
	}
	s := &feedSub{ch: make(chan []byte, feedBuffer), gone: make(chan struct{})}
	f.subs[s] = struct{}{}
	return s, nil
}

// startLocked starts the watch. It is started under the lock, so that
// streams opened together share it; it runs on a context of its own, not
// the request's that started it.
func (f *runsFeed) startLocked(ctx context.Context) error {
	lctx, cancel := context.WithTimeout(ctx, readTimeout)
	defer cancel()
	kv, err := f.js.KeyValue(lctx, readmodel.Bucket)
	if err != nil {
		return err
	}
	wctx, stop := context.WithCancel(context.Background())
	watch, err := kv.WatchAll(wctx, jetstream.UpdatesOnly())
	if err != nil {
		stop()
		return err
	}
	w := &feedWatch{cancel: stop, done: make(chan struct{})}
	f.cur = w
	go f.run(wctx, w, watch)
	return nil
}

// run hands the watch's changes out until its context ends or the watch
// does.
func (f *runsFeed) run(ctx context.Context, w *feedWatch, watch jetstream.KeyWatcher) {
	defer close(w.done)
	defer func() { _ = watch.Stop() }()
	for {
		select {
		case <-ctx.Done():
			return
		case e, ok := <-watch.Updates():
			if !ok {
				f.end(w, "the watch of the read model of runs ended")
				return
			}
			if e == nil || e.Operation() != jetstream.KeyValuePut {
				continue
			}
			var sum readmodel.Summary
			if err := json.Unmarshal(e.Value(), &sum); err != nil {
				f.log.Warn("ui: an unreadable entry in the read model", logattr.Key, e.Key(), logattr.Error, err)
				continue
			}
			b, _ := json.Marshal(sum)
			f.fanOut(w, b)
		}
	}
}

// fanOut hands b to every stream, dropping the ones whose buffer is
// full.
func (f *runsFeed) fanOut(w *feedWatch, b []byte) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.cur != w {
		return
	}
	for s := range f.subs {
		select {
		case s.ch <- b:
		default:
			f.dropLocked(s, "this stream fell behind the changes to the runs (reload the list)")
		}
	}
}

func (f *runsFeed) dropLocked(s *feedSub, why string) {
	delete(f.subs, s)
	s.why = why
	close(s.gone)
}

// end drops every stream when the watch ended by itself; the next
// stream starts another.
func (f *runsFeed) end(w *feedWatch, why string) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.cur != w {
		return
	}
	f.cur = nil
	w.cancel()
	for s := range f.subs {
		f.dropLocked(s, why)
	}
}

// unsubscribe removes a stream (dropped or not) and stops the watch,
// waiting for it, when it was the last.
func (f *runsFeed) unsubscribe(s *feedSub) {
	f.mu.Lock()
	delete(f.subs, s)
	var w *feedWatch
	if len(f.subs) == 0 && f.cur != nil {
		w, f.cur = f.cur, nil
	}
	f.mu.Unlock()
	if w != nil {
		w.cancel()
		select {
		case <-w.done:
		case <-time.After(readTimeout):
			f.log.Warn("ui: the watch of the read model of runs did not stop")
		}
	}
}
