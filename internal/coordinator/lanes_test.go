package coordinator_test

import (
	"context"
	"slices"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/weft-dev/weft/internal/coordinator"
	"github.com/weft-dev/weft/internal/eventlog"
	"github.com/weft-dev/weft/internal/readmodel"
	"github.com/weft-dev/weft/internal/testkit"
	"github.com/weft-dev/weft/pkg/events"
	"github.com/weft-dev/weft/pkg/projection"
)

// A partition's runs' starts come through a consumer of their own, and
// every other event through the progress consumer: with no coordinator
// running, a burst of starts is pending on the starts consumer only, and
// a cancel request of a run already going on the progress consumer, not
// behind the burst.
func TestStartsApartFromProgress(t *testing.T) {
	_, st := testkit.Store(t)
	stop := runOnce(t, st)
	going := start(t, st, mustGraph(t, chain), 1)[0]
	waitReady(t, st, going)
	if err := stop(); err != nil {
		t.Fatal(err)
	}
	js, stream := eventlog.JetStream(st), st.StreamName()
	before := heldOrPending(t, js, stream, coordinator.ConsumerName("coordinator", 0))
	start(t, st, mustGraph(t, chain), 50)
	requestCancel(t, st, going)

	// The server counts a consumer's pending events as they come: read
	// until they settle, for up to two seconds.
	starts := settled(t, js, stream, coordinator.StartsConsumerName("coordinator", 0), 50)
	progress := settled(t, js, stream, coordinator.ConsumerName("coordinator", 0), before+1)
	if starts != 50 || progress != before+1 {
		t.Errorf("the starts consumer has %d events pending, want the 50 starts; the progress consumer %d more, want the cancel request only", starts, progress-before)
	}
}

// A run's start handled after a later event of the run (the starts
// consumer behind, here paused) finds its run decided: the later event
// read the run, start included, from the log. With a cache of one run,
// the start finds its run evicted, decides from the start alone, which the
// log refuses, and reads the run again: each run is cancelled, as its
// cancel request asked, and no node of it was ever made ready.
func TestStartAfterALaterEvent(t *testing.T) {
	_, st := testkit.Store(t)
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel)
	js, stream := eventlog.JetStream(st), st.StreamName()
	// The coordinator's own starts consumer, made beforehand and paused.
	cfg := jetstream.ConsumerConfig{
		Durable: coordinator.StartsConsumerName("coordinator", 0), AckPolicy: jetstream.AckExplicitPolicy,
		AckWait: 10 * time.Second, MaxDeliver: -1, FilterSubject: eventlog.StartFilters(0, 1)[0],
	}
	until := time.Now().Add(3 * time.Second)
	cfg.PauseUntil = &until
	if _, err := js.CreateConsumer(ctx, stream, cfg); err != nil {
		t.Fatal(err)
	}
	g := mustGraph(t, chain)
	var runs []string
	for range 5 {
		run := events.NewRunID()
		startRun(t, st, g, run, `{"i":0}`)
		requestCancel(t, st, run)
		runs = append(runs, run)
	}
	c := runCoordinator(t, ctx, st, coordinator.WithCacheSize(1), coordinator.WithLogger(quiet()))
	runWorker(t, ctx, st, "w1")
	states := waitEnded(t, st, runs, 30*time.Second)
	if got := heldOrPending(t, js, stream, cfg.Durable); time.Now().After(until) || got != len(runs) {
		t.Fatalf("when the runs ended, %d starts were waiting: the test did not put the starts behind later events", got)
	}
	// Every start is handled once its consumer resumes.
	deadline := time.Now().Add(20 * time.Second)
	for heldOrPending(t, js, stream, cfg.Durable) > 0 {
		if time.Now().After(deadline) {
			t.Fatal("the paused starts were never handled")
		}
		time.Sleep(50 * time.Millisecond) // polled: no event says a consumer caught up
	}
	for _, run := range runs {
		if s := states[run]; s.Status != projection.RunCancelled {
			t.Fatalf("run %s: %s, want cancelled", run, s.Status)
		}
		evs, err := st.Read(ctx, run, 0, 0)
		if err != nil {
			t.Fatal(err)
		}
		for _, e := range evs {
			if e.Type == events.NodeReady {
				t.Fatalf("run %s: node %s was made ready after its run's cancel request", run, e.NodeID)
			}
		}
	}
	if s := c.Stats(); s.Conflicts == 0 {
		t.Errorf("no decision conflicted: the starts did not decide from the start alone, so the eviction path went untested")
	}
	// The read model lists each run once, cancelled: the start handled
	// last did not index its run as new beside its cancelled entry.
	m, err := readmodel.Open(ctx, js)
	if err != nil {
		t.Fatal(err)
	}
	page, err := m.List(ctx, readmodel.Query{})
	if err != nil {
		t.Fatal(err)
	}
	listed := map[string]int{}
	for _, sum := range page.Runs {
		listed[sum.RunID]++
		if sum.Status != projection.RunCancelled {
			t.Errorf("run %s is listed %s, want cancelled", sum.RunID, sum.Status)
		}
	}
	for _, run := range runs {
		if listed[run] != 1 {
			t.Errorf("run %s is listed %d times, want once", run, listed[run])
		}
	}
}

// A deployment made before the split (one consumer per partition, on all
// its events) is split by the coordinator: the starts consumer begins at
// the first event the old consumer had not acknowledged, with its ack
// wait and max_ack_pending, and the old one keeps its place with the
// progress filters. Starts the old consumer acknowledged (here by hand,
// so their runs are never decided) are not handled again; every later
// run completes once.
func TestSplitPartitionConsumer(t *testing.T) {
	_, st := testkit.Store(t)
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel)
	js, stream := eventlog.JetStream(st), st.StreamName()
	old := partitionConsumer(coordinator.ConsumerName("coordinator", 0), 7*time.Second)
	old.MaxAckPending = 300
	cons, err := js.CreateConsumer(ctx, stream, old)
	if err != nil {
		t.Fatal(err)
	}
	g := mustGraph(t, chain)
	handled := start(t, st, g, 5)
	batch, err := cons.Fetch(5, jetstream.FetchMaxWait(5*time.Second))
	if err != nil {
		t.Fatal(err)
	}
	n := 0
	for m := range batch.Messages() {
		if err := m.DoubleAck(ctx); err != nil {
			t.Fatal(err)
		}
		n++
	}
	if n != 5 {
		t.Fatalf("fetched %d of the first 5 starts", n)
	}
	runs := start(t, st, g, 15)
	runCoordinator(t, ctx, st, coordinator.WithLogger(quiet()))
	runWorker(t, ctx, st, "w1")
	waitEnded(t, st, runs, 30*time.Second)
	checkExactlyOnce(t, st, runs, 5)

	progress, err := js.Consumer(ctx, stream, coordinator.ConsumerName("coordinator", 0))
	if err != nil {
		t.Fatal(err)
	}
	if got := progress.CachedInfo().Config.FilterSubjects; !slices.Equal(got, eventlog.ProgressFilters(0, 1)) {
		t.Errorf("the old consumer's filters are %v, want the progress filters", got)
	}
	starts, err := js.Consumer(ctx, stream, coordinator.StartsConsumerName("coordinator", 0))
	if err != nil {
		t.Fatal(err)
	}
	sc := starts.CachedInfo().Config
	if sc.OptStartSeq != 6 || sc.AckWait != 7*time.Second || sc.MaxAckPending != 300 {
		t.Errorf("the starts consumer starts at %d with ack wait %s and max_ack_pending %d; want 6, 7s and 300 (the old one's)", sc.OptStartSeq, sc.AckWait, sc.MaxAckPending)
	}
	for _, run := range handled {
		evs, err := st.Read(ctx, run, 0, 0)
		if err != nil {
			t.Fatal(err)
		}
		if len(evs) != 1 {
			t.Errorf("run %s, acknowledged before the split, has %d events: its start was handled again", run, len(evs))
		}
	}
}

// A repartition from a deployment whose coordinators stopped before they
// made their starts consumers reads those partitions' starts again from
// the deployment's start: none is passed over, every run completes once.
func TestRepartitionWithLanesMissing(t *testing.T) {
	_, st := testkit.Store(t)
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel)
	stop := runOnce(t, st, coordinator.WithPartitions(4))
	js, stream := eventlog.JetStream(st), st.StreamName()
	deadline := time.Now().Add(20 * time.Second)
	for p := 0; p < 4; {
		if _, err := js.Consumer(ctx, stream, coordinator.StartsConsumerName("coordinator", p)); err == nil {
			p++
			continue
		}
		if time.Now().After(deadline) {
			t.Fatalf("partition %d's starts consumer was never made", p)
		}
		time.Sleep(20 * time.Millisecond) // polled: consumers are made as partitions are taken
	}
	if err := stop(); err != nil {
		t.Fatal(err)
	}
	for p := range 4 {
		if err := js.DeleteConsumer(ctx, stream, coordinator.StartsConsumerName("coordinator", p)); err != nil {
			t.Fatal(err)
		}
	}
	runs := start(t, st, mustGraph(t, chain), 20)
	runOnce(t, st, coordinator.WithPartitions(2), coordinator.WithRepartition(true))
	runWorker(t, ctx, st, "w1")
	waitEnded(t, st, runs, 60*time.Second)
	checkExactlyOnce(t, st, runs, 5)
}

func requestCancel(t *testing.T, st events.Store, run string) {
	t.Helper()
	e, err := events.New(run, events.NewRunID(), time.Time{}, &events.RunCancelRequestedData{By: "test"})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := st.Append(context.Background(), run, events.AnySeq, e); err != nil {
		t.Fatal(err)
	}
}

// waitReady waits for a node of run to be made ready.
func waitReady(t *testing.T, st events.Store, run string) {
	t.Helper()
	deadline := time.Now().Add(20 * time.Second)
	for {
		evs, err := st.Read(context.Background(), run, 0, 0)
		if err == nil && slices.ContainsFunc(evs, func(e *events.Event) bool { return e.Type == events.NodeReady }) {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("run %s: no node made ready", run)
		}
		time.Sleep(20 * time.Millisecond) // polled: the log is the only witness
	}
}

// heldOrPending counts a consumer's events not acknowledged: pending,
// or delivered (a stopped coordinator's pull request may still take
// some until it expires).
func heldOrPending(t *testing.T, js jetstream.JetStream, stream, name string) int {
	t.Helper()
	ci := consumerInfo(t, js, stream, name)
	return int(ci.NumPending) + ci.NumAckPending
}

// settled reads heldOrPending until it is want, for up to two seconds,
// and returns the last it read.
func settled(t *testing.T, js jetstream.JetStream, stream, name string, want int) int {
	t.Helper()
	deadline := time.Now().Add(2 * time.Second)
	for {
		got := heldOrPending(t, js, stream, name)
		if got == want || time.Now().After(deadline) {
			return got
		}
		time.Sleep(10 * time.Millisecond) // polled: the server's count is the witness
	}
}

func ackPendingOf(t *testing.T, js jetstream.JetStream, stream, name string) int {
	t.Helper()
	return consumerInfo(t, js, stream, name).NumAckPending
}

func consumerInfo(t *testing.T, js jetstream.JetStream, stream, name string) *jetstream.ConsumerInfo {
	t.Helper()
	cons, err := js.Consumer(context.Background(), stream, name)
	if err != nil {
		t.Fatal(err)
	}
	ci, err := cons.Info(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	return ci
}

// A coordinator is not delivered its own decisions back: for runs of the
// five-node chain it handles each run's start and each node's invoking
// and invoked, 11 events a run, not the whole of the run's log (its
// node-readies and the run's end are its own).
func TestOwnDecisionsNotDeliveredBack(t *testing.T) {
	_, st := testkit.Store(t)
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel)
	c := runCoordinator(t, ctx, st, coordinator.WithLogger(quiet()))
	runWorker(t, ctx, st, "w1")
	runs := start(t, st, mustGraph(t, chain), 3)
	waitEnded(t, st, runs, 30*time.Second)
	checkExactlyOnce(t, st, runs, 5)
	logged := 0
	for _, run := range runs {
		evs, err := st.Read(ctx, run, 0, 0)
		if err != nil {
			t.Fatal(err)
		}
		logged += len(evs)
	}
	if got, want := c.Stats().Processed, int64(11*len(runs)); got != want {
		t.Fatalf("the coordinator handled %d events of the runs' %d, want %d: a start and each node's invoking and invoked", got, logged, want)
	}
}
