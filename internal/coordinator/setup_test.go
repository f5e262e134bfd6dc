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
	"github.com/weft-dev/weft/internal/natstest"
	"github.com/weft-dev/weft/pkg/events"
)

func TestEnsureConsumerUsesAnExistingOneAsItIs(t *testing.T) {
	_, st := natstest.Store(t)
	ctx := context.Background()
	js, stream := st.JetStream(), st.StreamName()
	if _, err := coordinator.EnsureConsumer(ctx, js, stream, coordinator.ConsumerConfig("coord", time.Minute), nil); err != nil {
		t.Fatal(err)
	}
	var logs bytes.Buffer
	log := slog.New(slog.NewTextHandler(&logs, nil))
	for range 2 {
		c, err := coordinator.EnsureConsumer(ctx, js, stream, coordinator.ConsumerConfig("coord", 0), log)
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

func TestEnsureConsumerRefusesOneThatLosesEvents(t *testing.T) {
	_, st := natstest.Store(t)
	ctx := context.Background()
	js, stream := st.JetStream(), st.StreamName()
	cfg := coordinator.ConsumerConfig("narrow", 0)
	cfg.FilterSubject = "weft.r.0.>"
	if _, err := js.CreateConsumer(ctx, stream, cfg); err != nil {
		t.Fatal(err)
	}
	_, err := coordinator.EnsureConsumer(ctx, js, stream, coordinator.ConsumerConfig("narrow", 0), nil)
	var se *events.SettingError
	if !errors.Is(err, events.ErrUnsafeSetting) || !errors.As(err, &se) || se.Setting != "filter_subjects" {
		t.Fatalf("got %v, want an unsafe filter_subjects", err)
	}
	cfg = coordinator.ConsumerConfig("wide", 0)
	cfg.FilterSubject = "weft.>"
	cfg.AckPolicy = jetstream.AckExplicitPolicy
	if _, err := js.CreateConsumer(ctx, stream, cfg); err != nil {
		t.Fatal(err)
	}
	if _, err := coordinator.EnsureConsumer(ctx, js, stream, coordinator.ConsumerConfig("wide", 0), nil); err != nil {
		t.Fatalf("a filter covering every run event was refused: %v", err)
	}
}
