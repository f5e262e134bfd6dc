package provision_test

import (
	"context"
	"testing"
	"time"

	"github.com/weft-dev/weft/internal/batch"
	"github.com/weft-dev/weft/internal/coordinator"
	"github.com/weft-dev/weft/internal/eventlog"
	"github.com/weft-dev/weft/internal/flow"
	"github.com/weft-dev/weft/internal/provision"
	"github.com/weft-dev/weft/internal/readmodel"
	"github.com/weft-dev/weft/internal/schedule"
	"github.com/weft-dev/weft/internal/testkit"
	"github.com/weft-dev/weft/internal/workqueue"
)

// TestRun: the buckets are made, the leases bucket with the lease
// duration asked for, and a second run keeps what is there.
func TestRun(t *testing.T) {
	_, st := testkit.Store(t)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	for range 2 {
		names, err := provision.Run(ctx, st, provision.Options{LeaseTTL: 3 * time.Second})
		if err != nil {
			t.Fatal(err)
		}
		if len(names) != 8 { // and the schedules' two (internal/schedule), flow control's, the batch jobs'
			t.Fatalf("buckets %v", names)
		}
	}
	js := eventlog.JetStream(st)
	for _, b := range []string{workqueue.WorkersBucket, coordinator.SnapshotsBucket, coordinator.LeasesBucket, readmodel.Bucket, schedule.Bucket, schedule.KeysBucket, flow.Bucket, batch.Bucket} {
		if _, err := js.KeyValue(ctx, b); err != nil {
			t.Errorf("bucket %s: %v", b, err)
		}
	}
	kv, err := js.KeyValue(ctx, coordinator.LeasesBucket)
	if err != nil {
		t.Fatal(err)
	}
	status, err := kv.Status(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if status.TTL() != 3*time.Second {
		t.Errorf("leases bucket TTL %s, want 3s", status.TTL())
	}
}
