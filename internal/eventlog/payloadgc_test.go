package eventlog_test

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"os"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/weft-dev/weft/internal/eventlog"
	"github.com/weft-dev/weft/internal/testkit"
)

// TestDeletePayloadsTouchesOnlyItsRun: two runs write the same large
// body (byte for byte: content addressing alone would make them one
// object); each run has an object of its own, named by its run, and
// RunPayloads finds each run's from its log alone. Deleting one run's
// payloads leaves the other run's object, and the other run reads whole.
// A reference forged in run a's log to run b's object is not taken for
// a's (RunPayloads passes it over), and DeletePayloadObjects refuses a
// name that is not the run's, deleting nothing.
func TestDeletePayloadsTouchesOnlyItsRun(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	srv := testkit.Server(t)
	_, js := testkit.Connect(t, srv)
	st, err := eventlog.Open(ctx, js, eventlog.WithOffloadAt(1024))
	if err != nil {
		t.Fatal(err)
	}
	body, _ := json.Marshal(map[string]string{"pad": strings.Repeat("s", 8192)})
	a, b := eventlog.NewRunID(), eventlog.NewRunID()
	for _, run := range []string{a, b} {
		if _, err := eventlog.Append(ctx, st, run, 0, started(t, run)); err != nil {
			t.Fatal(err)
		}
		sig := mustEvent(t, run, "same-signal", &eventlog.SignalReceivedData{Node: "n", Data: body})
		if _, err := eventlog.Append(ctx, st, run, eventlog.AnySeq, sig); err != nil {
			t.Fatal(err)
		}
	}
	namesA, err := eventlog.RunPayloads(ctx, st, a)
	if err != nil {
		t.Fatal(err)
	}
	namesB, err := eventlog.RunPayloads(ctx, st, b)
	if err != nil {
		t.Fatal(err)
	}
	if len(namesA) != 1 || len(namesB) != 1 || namesA[0] == namesB[0] || !strings.HasPrefix(namesA[0], a+".") || !strings.HasPrefix(namesB[0], b+".") {
		t.Fatalf("objects of a %v, of b %v: want one each, named by its run", namesA, namesB)
	}

	// Run a's log refers to b's object too (a forged reference).
	ref, _ := json.Marshal(map[string]any{"bucket": eventlog.PayloadsBucket, "object": namesB[0], "size": 8203,
		"sha256": strings.TrimPrefix(namesB[0], b+"."), "contentType": "application/json"})
	m, err := eventlog.EncodePlain(mustEvent(t, a, "forged", &eventlog.SignalReceivedData{Node: "n"}))
	if err != nil {
		t.Fatal(err)
	}
	m.Header.Set("content-type", eventlog.ContentRef)
	m.Data = ref
	if _, err := js.PublishMsg(ctx, m); err != nil {
		t.Fatal(err)
	}
	if got, err := eventlog.RunPayloads(ctx, st, a); err != nil || !slices.Equal(got, namesA) {
		t.Fatalf("run a's objects with a forged reference: %v, %v; want %v", got, err, namesA)
	}
	if err := eventlog.DeletePayloadObjects(ctx, js, a, namesB); err == nil || !strings.Contains(err.Error(), namesB[0]) {
		t.Fatalf("deleting b's object as a's: %v, want a refusal naming it", err)
	}

	if err := eventlog.DeletePayloads(ctx, st, a); err != nil {
		t.Fatal(err)
	}
	obs, err := js.ObjectStore(ctx, eventlog.PayloadsBucket)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := obs.GetInfo(ctx, namesA[0]); !errors.Is(err, jetstream.ErrObjectNotFound) {
		t.Errorf("run a's object after DeletePayloads: %v, want it gone", err)
	}
	evs, err := st.Read(ctx, b, 0, 0)
	if err != nil {
		t.Fatal(err)
	}
	if len(evs) != 2 || evs[1].Refused != nil || !bytes.Contains(evs[1].Data, []byte(strings.Repeat("s", 8192))) {
		t.Fatalf("run b after a's payloads were deleted: %d events, %v; want its signal whole", len(evs), evs[len(evs)-1].Refused)
	}
	// Deleting again, or a run with none, is not an error.
	if err := eventlog.DeletePayloads(ctx, st, a); err != nil {
		t.Errorf("deleting a's payloads again: %v", err)
	}
	if err := eventlog.DeletePayloads(ctx, st, eventlog.NewRunID()); err != nil {
		t.Errorf("deleting the payloads of a run with none: %v", err)
	}
}

// TestPayloadDeletionCost: deleting a run's payloads costs what the run
// holds, not what the bucket holds. Runs with two objects each are
// deleted one by one, alternately as before (listing the whole bucket for
// the run's name prefix: listDeletePayloads, the former DeletePayloads)
// and as now (DeletePayloads: the names from the run's log), among the
// objects of other runs; both leave the bucket with none of the deleted
// runs' objects and every other run's. The figure (the time per run
// each way) is logged; WEFT_PAYLOADGC_RUNS (4) and WEFT_PAYLOADGC_BUCKET
// (other runs in the bucket, 20) size it:
//
//	WEFT_PAYLOADGC_RUNS=100 WEFT_PAYLOADGC_BUCKET=2000 go test -v -count=1 -run '^TestPayloadDeletionCost$' ./internal/eventlog/
func TestPayloadDeletionCost(t *testing.T) {
	n, others := envPositive(t, "WEFT_PAYLOADGC_RUNS", 4), envPositive(t, "WEFT_PAYLOADGC_BUCKET", 20)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Minute)
	defer cancel()
	srv := testkit.Server(t)
	_, js := testkit.Connect(t, srv)
	st, err := eventlog.Open(ctx, js, eventlog.WithOffloadAt(1024))
	if err != nil {
		t.Fatal(err)
	}
	write := func(signals int) string {
		t.Helper()
		run := eventlog.NewRunID()
		if _, err := eventlog.Append(ctx, st, run, 0, started(t, run)); err != nil {
			t.Fatal(err)
		}
		for i := range signals {
			data, _ := json.Marshal(map[string]string{"pad": run + strings.Repeat("p", 2048+i)})
			if _, err := eventlog.Append(ctx, st, run, eventlog.AnySeq, mustEvent(t, run, run+":"+strconv.Itoa(i), &eventlog.SignalReceivedData{Node: "n", Data: data})); err != nil {
				t.Fatal(err)
			}
		}
		return run
	}
	var keep, before, after []string
	for range others {
		keep = append(keep, write(1))
	}
	for range n {
		before, after = append(before, write(2)), append(after, write(2))
	}
	obs, err := js.ObjectStore(ctx, eventlog.PayloadsBucket)
	if err != nil {
		t.Fatal(err)
	}
	var tookBefore, tookAfter time.Duration
	for i := range n {
		t0 := time.Now()
		if err := listDeletePayloads(ctx, obs, before[i]); err != nil {
			t.Fatal(err)
		}
		t1 := time.Now()
		if err := eventlog.DeletePayloads(ctx, st, after[i]); err != nil {
			t.Fatal(err)
		}
		tookBefore, tookAfter = tookBefore+t1.Sub(t0), tookAfter+time.Since(t1)
	}
	infos, err := obs.List(ctx)
	if err != nil {
		t.Fatal(err)
	}
	left := map[string]int{}
	for _, info := range infos {
		run, _, _ := strings.Cut(info.Name, ".")
		left[run]++
	}
	for _, run := range keep {
		if left[run] != 1 {
			t.Errorf("run %s, not deleted: %d objects, want its 1", run, left[run])
		}
	}
	if len(infos) != len(keep) {
		t.Errorf("%d objects left, want the %d of the runs not deleted", len(infos), len(keep))
	}
	per := func(d time.Duration) time.Duration { return (d / time.Duration(n)).Round(time.Microsecond) }
	t.Logf("%d runs deleted, %d each way, 2 objects each, the bucket holding %d objects at first (%d of runs not deleted): listing the bucket %s per run, from the run's log %s per run",
		2*n, n, others+4*n, others, per(tookBefore), per(tookAfter))
}

// listDeletePayloads is how DeletePayloads removed a run's objects
// before: it listed the whole bucket for the names of the run's.
func listDeletePayloads(ctx context.Context, obs jetstream.ObjectStore, run string) error {
	infos, err := obs.List(ctx)
	if errors.Is(err, jetstream.ErrNoObjectsFound) {
		return nil
	}
	if err != nil {
		return err
	}
	for _, info := range infos {
		if strings.HasPrefix(info.Name, run+".") {
			if err := obs.Delete(ctx, info.Name); err != nil && !errors.Is(err, jetstream.ErrObjectNotFound) {
				return err
			}
		}
	}
	return nil
}

// envPositive is the environment variable name as a positive number, or
// def.
func envPositive(t *testing.T, name string, def int) int {
	t.Helper()
	v := os.Getenv(name)
	if v == "" {
		return def
	}
	n, err := strconv.Atoi(v)
	if err != nil || n < 1 {
		t.Fatalf("%s=%q: want a positive number", name, v)
	}
	return n
}
