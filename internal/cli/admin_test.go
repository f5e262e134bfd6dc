package cli_test

import (
	"context"
	"encoding/json"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/weft-dev/weft/internal/cli"
	"github.com/weft-dev/weft/internal/eventlog"
	"github.com/weft-dev/weft/internal/testkit"
	"github.com/weft-dev/weft/internal/workqueue"
	"github.com/weft-dev/weft/pkg/events"
)

func TestAdminSettings(t *testing.T) {
	url, _ := engine(t)

	r := weft(t, "admin", "settings", "-nats", url)
	if r.code != 0 {
		t.Fatalf("exit %d\n%s%s", r.code, r.stdout, r.stderr)
	}
	wantContains(t, "admin settings", r.stdout, "stream WEFT", "weft.r.>", "duplicates window  2m0s",
		"message schedules  no", "coordinator-0", "work-default", "queue", "30s", "weft-workers", "weft-snapshots", "weft-coordinators")
	if strings.Contains(r.stdout, "cannot run with") {
		t.Errorf("a good stream reported problems:\n%s", r.stdout)
	}

	r = weft(t, "admin", "settings", "-nats", url, "-o", "json")
	var set cli.Settings
	if err := json.Unmarshal([]byte(r.stdout), &set); err != nil {
		t.Fatalf("-o json: %v\n%s", err, r.stdout)
	}
	if set.Stream.Name != "WEFT" || set.Stream.Replicas != 1 || set.Stream.Duplicates != "2m0s" || set.Stream.AllowMsgSchedules {
		t.Errorf("stream = %+v", set.Stream)
	}
	kinds := map[string]string{}
	for _, c := range set.Consumers {
		kinds[c.Name] = c.Kind
	}
	if kinds["coordinator-0"] != "coordinator" || kinds["work-default"] != "queue" {
		t.Errorf("consumers = %+v", set.Consumers)
	}
	if len(set.Buckets) != 3 || set.Buckets[2].Name != workqueue.WorkersBucket {
		t.Errorf("buckets = %+v", set.Buckets)
	}
}

func TestAdminApply(t *testing.T) {
	srv, st := testkit.Store(t)
	url, ctx := srv.ClientURL(), context.Background()
	js := eventlog.JetStream(st)
	for _, q := range []string{"default", "gpu"} {
		if _, err := workqueue.EnsureQueue(ctx, js, st.StreamName(), q, workqueue.QueueOptions{}); err != nil {
			t.Fatal(err)
		}
	}

	r := weft(t, "admin", "apply", "-nats", url, "-duplicates", "5m", "-max-age", "24h", "-ack-wait", "45s", "-queue", "gpu")
	if r.code != 0 {
		t.Fatalf("exit %d\n%s%s", r.code, r.stdout, r.stderr)
	}
	wantContains(t, "admin apply", r.stdout, "changed stream WEFT", "duplicate_window", "2m0s → 5m0s", "max_age", "forever → 24h0m0s",
		"changed consumer work-gpu", "ack_wait", "30s → 45s")
	if strings.Contains(r.stdout, "replicas") || strings.Contains(r.stdout, "work-default") {
		t.Errorf("changed what was not asked for:\n%s", r.stdout)
	}
	s, err := js.Stream(ctx, st.StreamName())
	if err != nil {
		t.Fatal(err)
	}
	if sc := s.CachedInfo().Config; sc.Duplicates != 5*time.Minute || sc.MaxAge != 24*time.Hour || sc.Replicas != 1 {
		t.Errorf("stream = duplicates %s, max age %s, replicas %d", sc.Duplicates, sc.MaxAge, sc.Replicas)
	}
	ackWait := func(q string) time.Duration {
		c, err := js.Consumer(ctx, st.StreamName(), workqueue.QueueConsumer(q))
		if err != nil {
			t.Fatal(err)
		}
		return c.CachedInfo().Config.AckWait
	}
	if ackWait("gpu") != 45*time.Second || ackWait("default") != workqueue.DefaultAckWait {
		t.Errorf("ack waits: gpu %s, default %s", ackWait("gpu"), ackWait("default"))
	}

	// Every queue, and nothing else.
	r = weft(t, "-o", "json", "admin", "apply", "-nats", url, "-ack-wait", "45s")
	var out struct {
		Changes []cli.Change `json:"changes"`
		Applied bool         `json:"applied"`
	}
	if err := json.Unmarshal([]byte(r.stdout), &out); err != nil {
		t.Fatalf("-o json: %v\n%s", err, r.stdout)
	}
	if !out.Applied || len(out.Changes) != 1 || out.Changes[0] != (cli.Change{Resource: "consumer work-default", Setting: "ack_wait", From: "30s", To: "45s"}) {
		t.Errorf("changes = %+v", out)
	}

	r = weft(t, "admin", "apply", "-nats", url, "-ack-wait", "45s", "-duplicates", "5m")
	wantContains(t, "apply again", r.stdout, "nothing to change")

	// A dry run, and a setting from the environment.
	t.Setenv("WEFT_MAX_AGE", "1h")
	r = weft(t, "admin", "apply", "-nats", url, "-dry-run")
	wantContains(t, "dry run", r.stdout, "would change stream WEFT", "max_age", "24h0m0s → 1h0m0s")
	s, _ = js.Stream(ctx, st.StreamName())
	if got := s.CachedInfo().Config.MaxAge; got != 24*time.Hour {
		t.Errorf("a dry run changed max age to %s", got)
	}
}

// A stream a daemon refuses: settings shows why, apply fixes it.
func TestAdminApplyRepairsAStream(t *testing.T) {
	srv := testkit.Server(t)
	_, js := testkit.Connect(t, srv)
	ctx := context.Background()
	sc := eventlog.OpenStreamConfig()
	sc.AllowDirect, sc.AllowAtomicPublish = false, false
	if _, err := js.CreateStream(ctx, sc); err != nil {
		t.Fatal(err)
	}
	if _, err := events.Open(ctx, js); err == nil {
		t.Fatal("the stream was accepted")
	}
	url := srv.ClientURL()
	r := weft(t, "admin", "settings", "-nats", url)
	wantContains(t, "settings", r.stdout, "settings Weft cannot run with", "allow_direct is false")

	r = weft(t, "admin", "apply", "-nats", url)
	if r.code != 0 {
		t.Fatalf("exit %d\n%s%s", r.code, r.stdout, r.stderr)
	}
	wantContains(t, "apply", r.stdout, "allow_direct", "allow_atomic", "false → true")
	if _, err := events.Open(ctx, js); err != nil {
		t.Fatalf("after apply: %v", err)
	}
}

func TestAdminUsageErrors(t *testing.T) {
	tests := []struct {
		name string
		args []string
		want string
	}{
		{"no subcommand", []string{"admin"}, "want settings or apply"},
		{"unknown subcommand", []string{"admin", "drop"}, `unknown admin command "drop"`},
		{"argument", []string{"admin", "settings", "extra"}, "want no arguments, got 1"},
		{"unknown flag", []string{"admin", "apply", "-force"}, "flag provided but not defined: -force"},
		{"short ack wait", []string{"admin", "apply", "-ack-wait", "10ms"}, "-ack-wait: want at least 1s"},
		{"bad ack wait", []string{"admin", "apply", "-ack-wait", "soon"}, `invalid value "soon" for flag -ack-wait`},
		{"queue alone", []string{"admin", "apply", "-queue", "gpu"}, "-queue: goes with -ack-wait"},
		{"bad queue", []string{"admin", "apply", "-queue", "a.b", "-ack-wait", "1m"}, `-queue: "a.b" is not a valid queue name`},
		{"short window", []string{"admin", "apply", "-duplicates", "5s"}, "-duplicates: want at least 1m0s"},
		{"no window", []string{"admin", "apply", "-duplicates", "0"}, "-duplicates: want at least 1m0s"},
		{"replicas", []string{"admin", "apply", "-replicas", "9"}, "-replicas: want 1 to 5, got 9"},
		{"output", []string{"admin", "settings", "-o", "yaml"}, `-o: want text or json`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r := weft(t, tt.args...)
			if r.code != 2 || !strings.Contains(r.stderr, tt.want) {
				t.Fatalf("exit %d, stderr %q; want 2 and %q", r.code, r.stderr, tt.want)
			}
		})
	}
}

func TestAdminHelp(t *testing.T) {
	r := weft(t, "help", "admin")
	wantContains(t, "help admin", r.stdout, "weft admin settings|apply", "-ack-wait D")
	r = weft(t, "help", "admin", "apply")
	wantContains(t, "help admin apply", r.stdout, "usage: weft admin apply", "-dry-run", "-queue")
	r = weft(t, "help")
	if !slices.ContainsFunc(strings.Split(r.stdout, "\n"), func(l string) bool { return strings.Contains(l, "admin settings|apply") }) {
		t.Errorf("the command list has no admin:\n%s", r.stdout)
	}
}
