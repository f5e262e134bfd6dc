package coordinator_test

import (
	"context"
	"fmt"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/nats-io/nats.go"

	"github.com/weft-dev/weft/internal/coordinator"
	"github.com/weft-dev/weft/internal/eventlog"
	"github.com/weft-dev/weft/internal/testkit"
	"github.com/weft-dev/weft/pkg/events"
	"github.com/weft-dev/weft/pkg/graph"
)

// localChain is a chain of n local transform nodes, each adding one to
// state.x.
func localChain(b testing.TB, n int) string {
	b.Helper()
	var s strings.Builder
	s.WriteString("name: localchain\nnodes:\n")
	for i := range n {
		fmt.Fprintf(&s, "  - {id: n%d, type: transform, config: {set: {x: 'state.x + 1'}}}\n", i)
	}
	s.WriteString("edges:\n  - {from: START, to: n0}\n")
	for i := 1; i < n; i++ {
		fmt.Fprintf(&s, "  - {from: n%d, to: n%d}\n", i-1, i)
	}
	fmt.Fprintf(&s, "  - {from: n%d, to: END}\n", n-1)
	return s.String()
}

// cpuTime is the CPU time this process used so far, user and system.
func cpuTime(b testing.TB) time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		b.Fatal(err)
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// startChain appends the start of run, a run of g with x = 0.
func startChain(b testing.TB, st events.Store, g *graph.Graph, run string) {
	b.Helper()
	e, err := events.New(run, run, time.Time{}, &events.RunStartedData{
		GraphName: g.Definition().Name, GraphDigest: g.Digest(), Graph: g.Canonical(), Input: []byte(`{"x":0}`),
	})
	if err != nil {
		b.Fatal(err)
	}
	if _, err := st.Append(context.Background(), run, 0, e); err != nil {
		b.Fatal(err)
	}
}

// BenchmarkLocalChain runs one run of a chain of local transforms per
// op, on one coordinator and an embedded JetStream server in this process
// (so its CPU profile is the local step's: transform, fold, decide,
// append): ns/step is the op over the chain's steps, and allocs/op count
// the server's too.
func BenchmarkLocalChain(b *testing.B) {
	const nodes = 100
	srv, st := testkit.Store(b)
	nc, _ := testkit.Connect(b, srv)
	ctx, cancel := context.WithCancel(context.Background())
	b.Cleanup(cancel)
	runCoordinator(b, ctx, st, coordinator.WithLogger(quiet()))
	g := mustGraph(b, localChain(b, nodes))
	b.ReportAllocs()
	cpu0 := cpuTime(b)
	for b.Loop() {
		run := events.NewRunID()
		done := make(chan struct{}, 1)
		sub, err := nc.Subscribe(eventlog.RunFilter(run), func(m *nats.Msg) {
			if m.Header.Get("ce-type") == string(events.RunCompleted) {
				done <- struct{}{}
			}
		})
		if err != nil {
			b.Fatal(err)
		}
		startChain(b, st, g, run)
		select {
		case <-done:
		case <-time.After(time.Minute):
			b.Fatalf("run %s did not complete in a minute", run)
		}
		_ = sub.Unsubscribe()
	}
	b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N*nodes), "ns/step")
	b.ReportMetric(float64((cpuTime(b)-cpu0).Nanoseconds())/float64(b.N*nodes), "cpu-ns/step")
}

// BenchmarkLocalBurst starts a burst of runs of a short chain of local
// transforms at once, on one coordinator with its default shards: the
// path of a burst through the coordinator (intake, shards, decide,
// append) with no worker. ns/node is the op over the nodes run; with the
// server in this process, it is the CPU per node of both on this
// machine's cores.
func BenchmarkLocalBurst(b *testing.B) {
	const runs, nodes = 200, 5
	srv, st := testkit.Store(b)
	nc, _ := testkit.Connect(b, srv)
	ctx, cancel := context.WithCancel(context.Background())
	b.Cleanup(cancel)
	runCoordinator(b, ctx, st, coordinator.WithLogger(quiet()))
	g := mustGraph(b, localChain(b, nodes))
	done := make(chan struct{}, runs)
	sub, err := nc.Subscribe("weft.r.*.*.d.completed", func(*nats.Msg) { done <- struct{}{} })
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { _ = sub.Unsubscribe() })
	b.ReportAllocs()
	cpu0 := cpuTime(b)
	for b.Loop() {
		for range runs {
			startChain(b, st, g, events.NewRunID())
		}
		timeout := time.After(2 * time.Minute)
		for range runs {
			select {
			case <-done:
			case <-timeout:
				b.Fatal("the burst did not complete in two minutes")
			}
		}
	}
	b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N*runs*nodes), "ns/node")
	b.ReportMetric(float64((cpuTime(b)-cpu0).Nanoseconds())/float64(b.N*runs*nodes), "cpu-ns/node")
}
