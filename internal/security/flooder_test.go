package security

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/weft-dev/weft/internal/admission"
	"github.com/weft-dev/weft/internal/eventlog"
	"github.com/weft-dev/weft/internal/natsconn"
	"github.com/weft-dev/weft/pkg/client"
	"github.com/weft-dev/weft/pkg/events"
)

// The flooding client of TestNamespaceFairness runs as a process of its
// own, as a client on another machine would, so that what its own loop
// spends is not counted against the engine; everything it sends to the
// server and the coordinators is. It is this test binary run again with
// flooderEnv set (TestMain).
const (
	flooderEnv = "WEFT_TEST_FLOODER" // "client" or "raw"
	flooderURL = "WEFT_TEST_FLOODER_URL"
	flooderFor = "WEFT_TEST_FLOODER_FOR"
)

// Flood modes.
const (
	// floodClient starts runs with pkg/client from 16 goroutines, each
	// starting the next as soon as the last returned, admitted or not.
	floodClient = "client"
	// floodRaw sends admission requests over NATS without pkg/client,
	// 512 in flight: what a client that ignores every refusal can do.
	floodRaw = "raw"
)

// startFlooder runs the flooder as user for d, niced (it stands for a
// client on another machine), and returns a function that waits for it
// and returns its counts.
func (s *tenants) startFlooder(t *testing.T, mode, user string, d time.Duration) func() (admitted, refused int64) {
	t.Helper()
	args := []string{"-n", "19", os.Args[0], "-test.run", "^$"}
	cmd := exec.Command("nice", args...)
	if _, err := exec.LookPath("nice"); err != nil {
		cmd = exec.Command(os.Args[0], args[2:]...)
	}
	cmd.Env = append(cleanEnv(), s.roleEnv(user)...)
	cmd.Env = append(cmd.Env, flooderEnv+"="+mode, flooderURL+"="+s.url, flooderFor+"="+d.String())
	var out strings.Builder
	cmd.Stdout, cmd.Stderr = &out, &out
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = cmd.Process.Kill() })
	return func() (int64, int64) {
		t.Helper()
		if err := cmd.Wait(); err != nil {
			t.Fatalf("the flooder: %v\n%s", err, out.String())
		}
		var a, r int64
		if _, err := fmt.Sscanf(strings.TrimSpace(out.String()), "admitted %d refused %d", &a, &r); err != nil {
			t.Fatalf("the flooder said %q", out.String())
		}
		return a, r
	}
}

// flooder is the flooding process's main: it prints "admitted N refused
// M" and returns its exit status.
func flooder() int {
	d, err := time.ParseDuration(os.Getenv(flooderFor))
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 2
	}
	cfg := natsconn.Config{User: os.Getenv("WEFT_NATS_USER"), Password: os.Getenv("WEFT_NATS_PASSWORD")}
	nc, err := cfg.Connect(os.Getenv(flooderURL))
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	defer nc.Close()
	ctx, cancel := context.WithTimeout(context.Background(), d)
	defer cancel()
	var admitted, refused atomic.Int64
	switch os.Getenv(flooderEnv) {
	case floodClient:
		err = floodWithClient(ctx, nc, &admitted, &refused)
	case floodRaw:
		err = floodRawRequests(ctx, nc, &admitted, &refused)
	default:
		err = fmt.Errorf("%s=%q: want %s or %s", flooderEnv, os.Getenv(flooderEnv), floodClient, floodRaw)
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	fmt.Printf("admitted %d refused %d\n", admitted.Load(), refused.Load())
	return 0
}

func floodWithClient(ctx context.Context, nc *nats.Conn, admitted, refused *atomic.Int64) error {
	js, err := jetstream.New(nc)
	if err != nil {
		return err
	}
	st, err := events.Open(ctx, js)
	if err != nil {
		return err
	}
	cl := client.New(st)
	g := parse(nil, oneNode)
	var wg sync.WaitGroup
	errs := make(chan error, 16)
	for range 16 {
		wg.Go(func() {
			for ctx.Err() == nil {
				_, err := cl.Start(ctx, g)
				switch {
				case err == nil:
					admitted.Add(1)
				case errors.Is(err, client.ErrAdmission):
					refused.Add(1)
				case ctx.Err() != nil:
				default:
					errs <- err
					return
				}
			}
		})
	}
	wg.Wait()
	close(errs)
	return <-errs
}

func floodRawRequests(ctx context.Context, nc *nats.Conn, admitted, refused *atomic.Int64) error {
	g := parse(nil, oneNode)
	inflight := make(chan struct{}, 512)
	inbox := nc.NewRespInbox()
	sub, err := nc.Subscribe(inbox+".*", func(m *nats.Msg) {
		if m.Header.Get(admission.HdrError) == "" {
			admitted.Add(1)
		} else {
			refused.Add(1)
		}
		select {
		case <-inflight:
		default:
		}
	})
	if err != nil {
		return err
	}
	defer func() { _ = sub.Unsubscribe() }()
	for i := 0; ctx.Err() == nil; i++ {
		select {
		case inflight <- struct{}{}:
		case <-ctx.Done():
			return nil
		case <-time.After(time.Second):
			// Answers lost (a slow consumer): free the slots.
			for len(inflight) > 0 {
				<-inflight
			}
			continue
		}
		run := events.NewRunID()
		e, err := events.New(run, run, time.Time{}, &events.RunStartedData{GraphName: "one", GraphDigest: g.Digest(), Graph: g.Canonical()})
		if err != nil {
			return err
		}
		m, err := eventlog.Encode(e)
		if err != nil {
			return err
		}
		req := nats.NewMsg(eventlog.AdmitStart)
		req.Header = m.Header
		req.Header.Set(admission.HdrSubject, m.Subject)
		req.Data = m.Data
		req.Reply = inbox + "." + strconv.Itoa(i)
		if err := nc.PublishMsg(req); err != nil {
			return err
		}
	}
	return nil
}
