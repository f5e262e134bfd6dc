package coordinator_test

import (
	"bytes"
	"context"
	"errors"
	"log/slog"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/weft-dev/weft/internal/coordinator"
	"github.com/weft-dev/weft/internal/eventlog"
	"github.com/weft-dev/weft/internal/testkit"
)

func partitionConsumer(name string, ackWait time.Duration) jetstream.ConsumerConfig {
	return jetstream.ConsumerConfig{
		Durable: name, AckPolicy: jetstream.AckExplicitPolicy, AckWait: ackWait, MaxAckPending: 20000, MaxDeliver: -1,
		DeliverPolicy: jetstream.DeliverAllPolicy, FilterSubject: "weft.r.>",
	}
}

func TestEnsureConsumerUsesAnExistingOneAsItIs(t *testing.T) {
	_, st := testkit.Store(t)
	ctx := context.Background()
	js, stream := eventlog.JetStream(st), st.StreamName()
	if _, err := coordinator.EnsureConsumer(ctx, js, stream, partitionConsumer("coord-0", time.Minute), nil); err != nil {
		t.Fatal(err)
	}
	var logs bytes.Buffer
	log := slog.New(slog.NewTextHandler(&logs, nil))
	for range 2 {
		c, err := coordinator.EnsureConsumer(ctx, js, stream, partitionConsumer("coord-0", 10*time.Second), log)
		if err != nil {
			t.Fatal(err)
		}
		if got := c.CachedInfo().Config.AckWait; got != time.Minute {
			t.Fatalf("ack wait changed to %s", got)
		}
	}
	if n := strings.Count(logs.String(), "setting=ack_wait have=1m0s want=10s"); n != 1 {
		t.Fatalf("the difference was logged %d times, want once:\n%s", n, logs.String())
	}
}

func TestEnsureConsumerRefusesOneWithoutAcks(t *testing.T) {
	_, st := testkit.Store(t)
	ctx := context.Background()
	js, stream := eventlog.JetStream(st), st.StreamName()
	cfg := partitionConsumer("noack", time.Minute)
	cfg.AckPolicy, cfg.AckWait = jetstream.AckNonePolicy, 0
	if _, err := js.CreateConsumer(ctx, stream, cfg); err != nil {
		t.Fatal(err)
	}
	_, err := coordinator.EnsureConsumer(ctx, js, stream, partitionConsumer("noack", time.Minute), nil)
	var se *eventlog.SettingError
	if !errors.Is(err, eventlog.ErrUnsafeSetting) || !errors.As(err, &se) || se.Setting != "ack_policy" {
		t.Fatalf("got %v, want an unsafe ack_policy", err)
	}
}
