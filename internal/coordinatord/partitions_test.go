package coordinatord_test

import (
	"bytes"
	"context"
	"errors"
	"github.com/weft-dev/weft/internal/testkit"
	"testing"
	"time"

	"github.com/weft-dev/weft/internal/coordinator"
	"github.com/weft-dev/weft/internal/coordinatord"
)

// The daemon told another partition count than the deployment's exits
// saying so, rather than retrying for ever; with -repartition it takes the
// new count and decides.
func TestRunRefusesAnotherPartitionCount(t *testing.T) {
	port, dir := testkit.FreePort(t), t.TempDir()
	srv := testkit.ServerAt(t, port, dir)
	url := srv.ClientURL()
	st := testkit.OpenStoreRetry(t, srv)

	run := func(ctx context.Context, args ...string) (chan error, *testkit.LogWatch) {
		logs := testkit.NewLogWatch()
		done := make(chan error, 1)
		go func() {
			done <- coordinatord.Run(ctx, append([]string{"-nats", url, "-lease-ttl", "1s"}, args...), &bytes.Buffer{}, logs)
		}()
		return done, logs
	}
	ctx, cancel := context.WithCancel(context.Background())
	done, _ := run(ctx, "-partitions", "2")
	decides(t, st)
	cancel()
	if err := <-done; err != nil {
		t.Fatal(err)
	}

	ctx, cancel = context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	done, logs := run(ctx, "-partitions", "3")
	if err := <-done; !errors.Is(err, coordinator.ErrPartitionCount) || ctx.Err() != nil {
		t.Fatalf("a daemon told 3 partitions on a deployment of 2: Run = %v, want ErrPartitionCount before its context ended\n%s", err, logs)
	}

	ctx, cancel = context.WithCancel(context.Background())
	done, logs = run(ctx, "-partitions", "3", "-repartition")
	decides(t, st)
	cancel()
	if err := <-done; err != nil {
		t.Fatalf("Run = %v\n%s", err, logs)
	}
}
