package coordinator

import (
	"sync"
	"time"
)

// goroutines runs functions each on a goroutine of its own, as go does,
// but a goroutine whose function returned waits a while (goroutineIdle)
// for the next function given, rather than end. A run's handling and a
// local node's execution each start on a goroutine's stack: a new
// goroutine's is small and grows, copied each time, while a reused one's
// has grown already (pprof of a burst: runtime.newstack under the
// handlers 1-3% of the CPU).
type goroutines struct {
	wg   *sync.WaitGroup
	idle chan func()
	done <-chan struct{}
}

// goroutineIdle is how long a goroutine with nothing to run waits for a
// function before it ends.
const goroutineIdle = time.Second

// newGoroutines runs functions on goroutines counted in wg; those waiting
// for a function end when done is closed.
func newGoroutines(wg *sync.WaitGroup, done <-chan struct{}) *goroutines {
	return &goroutines{wg: wg, idle: make(chan func()), done: done}
}

// Go runs fn on a goroutine waiting for one, or else on a new one.
func (g *goroutines) Go(fn func()) {
	select {
	case g.idle <- fn:
	default:
		g.wg.Go(func() { g.loop(fn) })
	}
}

// loop runs fn, then each function Go hands it, until none comes for
// goroutineIdle or done is closed.
func (g *goroutines) loop(fn func()) {
	t := time.NewTimer(goroutineIdle)
	defer t.Stop()
	for {
		fn()
		t.Reset(goroutineIdle)
		select {
		case fn = <-g.idle:
		case <-t.C:
			return
		case <-g.done:
			return
		}
	}
}
