package natsconn_test

import (
	"context"
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats-server/v2/server"
	"golang.org/x/crypto/bcrypt"

	"github.com/weft-dev/weft/internal/natsconn"
)

func namespaced(names ...string) natsconn.Deployment {
	d := natsconn.Deployment{Queues: []string{"default"}, Partitions: 4}
	for _, n := range names {
		d.Namespaces = append(d.Namespaces, natsconn.Namespace{Name: n, Quota: natsconn.DefaultQuota()})
	}
	return d
}

// TestNamespaceNames: a namespace names an account and is a subject
// token; anything else is refused, saying why.
func TestNamespaceNames(t *testing.T) {
	for _, ok := range []string{"a", "team-1", "Prod_EU", strings.Repeat("x", natsconn.MaxNamespaceLen)} {
		if err := natsconn.CheckNamespaceName(ok); err != nil {
			t.Errorf("%q: %v", ok, err)
		}
	}
	for name, want := range map[string]string{
		"":       "empty",
		"a.b":    "not a valid name",
		"a b":    "not a valid name",
		"a*":     "not a valid name",
		">":      "not a valid name",
		"$G":     "not a valid name",
		"_x":     "not a valid name",
		"SYS":    "reserved",
		"global": "reserved",
		strings.Repeat("x", natsconn.MaxNamespaceLen+1): "longer than",
	} {
		err := natsconn.CheckNamespaceName(name)
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("%q: %v, want %q", name, err, want)
		}
	}
}

// TestQuotaRefused: a quota of zero, or one the engine cannot run in, is
// refused with the namespace and the limit named.
func TestQuotaRefused(t *testing.T) {
	tests := []struct {
		name string
		edit func(*natsconn.Quota)
		want string
	}{
		{"zero starts", func(q *natsconn.Quota) { q.StartsPerSecond = 0 }, "namespace a: quota starts-per-second: want at least 1, got 0"},
		{"zero signals", func(q *natsconn.Quota) { q.SignalsPerSecond = 0 }, "signals-per-second: want at least 1, got 0"},
		{"zero storage", func(q *natsconn.Quota) { q.MaxStorage = 0 }, "max-storage: want at least 1MiB"},
		{"zero streams", func(q *natsconn.Quota) { q.MaxStreams = 0 }, "max-streams: want at least 9"},
		{"too few consumers", func(q *natsconn.Quota) { q.MaxConsumers = 3 }, "max-consumers: want at least 10"},
		{"ack pending under the coordinator's", func(q *natsconn.Quota) { q.MaxAckPending = 100 }, "max-ack-pending: want at least 20000"},
		{"zero messages", func(q *natsconn.Quota) { q.StreamMaxMsgs = 0 }, "stream-max-msgs: want at least 1"},
		{"stream over the storage", func(q *natsconn.Quota) { q.StreamMaxBytes = q.MaxStorage }, "leaves no room"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			d := namespaced("a")
			tt.edit(&d.Namespaces[0].Quota)
			err := d.Validate()
			if err == nil || !strings.Contains(err.Error(), tt.want) {
				t.Fatalf("got %v, want %q", err, tt.want)
			}
		})
	}
	d := namespaced("a", "b", "a")
	d.Namespaces = append(d.Namespaces, natsconn.Namespace{Name: "x.y"})
	err := d.Validate()
	for _, want := range []string{`namespace "a": given twice`, `namespace "x.y": not a valid name`} {
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("%v lacks %q", err, want)
		}
	}
}

// TestNamespacedUsers: each namespace has every role, named after it;
// its client may write nothing but admission requests, its coordinator
// answers them, and nobody's rights name another namespace.
func TestNamespacedUsers(t *testing.T) {
	d := namespaced("a", "b")
	users := d.Users()
	if len(users) != 2*7 { // client, coordinator, ui, admin, trigger, serve, one worker
		t.Fatalf("%d users", len(users))
	}
	for _, u := range users {
		if !strings.HasSuffix(u.Name, "@"+u.Namespace) || u.Namespace == "" {
			t.Errorf("user %s of namespace %q", u.Name, u.Namespace)
		}
	}
	client := d.UserIn("a", natsconn.RoleClient, "")
	if client.Name != "weft-client@a" {
		t.Fatalf("client %s", client.Name)
	}
	for _, p := range client.PublishAllow {
		if strings.HasPrefix(p, "weft.r.") {
			t.Errorf("the client of a namespace may publish on %s", p)
		}
	}
	if !slices.Contains(client.PublishAllow, "weft.admit.*") {
		t.Errorf("the client may not ask for admission: %v", client.PublishAllow)
	}
	coord := d.UserIn("a", natsconn.RoleCoordinator, "")
	if !coord.AllowResponses || !slices.Contains(coord.SubscribeAllow, "weft.admit.*") || !slices.Contains(coord.PublishAllow, "weft.r.*.*.c.signal") {
		t.Errorf("the coordinator cannot answer admission requests: %+v", coord)
	}
	// Without namespaces: today's users, unchanged.
	plain := natsconn.Deployment{Queues: []string{"default"}}.User(natsconn.RoleClient, "")
	if plain.Name != "weft-client" || !slices.Contains(plain.PublishAllow, "weft.r.*.*.c.*") || slices.Contains(plain.PublishAllow, "weft.admit.*") {
		t.Errorf("the default namespace's client changed: %+v", plain)
	}
}

// TestWriteNamespacedRoles: one account per namespace, with its
// JetStream limits, parsed by nats-server; a <user>.env per user of each
// namespace, naming it; the deployment kept beside them.
func TestWriteNamespacedRoles(t *testing.T) {
	dir := t.TempDir()
	d := namespaced("a", "b")
	d.Namespaces[1].Quota.MaxStorage = 2 << 30
	d.Namespaces[1].Quota.MaxConsumers = 64
	files, err := natsconn.WriteRoles(dir, d, bcrypt.MinCost, false)
	if err != nil {
		t.Fatal(err)
	}
	if len(files) != 2+2*7 {
		t.Fatalf("%d files", len(files))
	}
	main := filepath.Join(dir, "server.conf")
	if err := os.WriteFile(main, []byte("listen: 127.0.0.1:-1\njetstream { store_dir: "+filepath.Join(dir, "js")+" }\ninclude ./auth.conf\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	opts, err := server.ProcessConfigFile(main)
	if err != nil {
		t.Fatalf("nats-server refuses the configuration: %v", err)
	}
	if len(opts.Users) != 14 {
		t.Fatalf("%d users", len(opts.Users))
	}
	for _, u := range opts.Users {
		_, ns, _ := strings.Cut(u.Username, "@")
		if u.Account == nil || u.Account.Name != ns {
			t.Errorf("user %s in account %v", u.Username, u.Account)
		}
	}
	env, err := os.ReadFile(filepath.Join(dir, "weft-client@b.env"))
	if err != nil || !strings.Contains(string(env), "WEFT_NAMESPACE=b\n") || !strings.Contains(string(env), "WEFT_NATS_USER=weft-client@b\n") {
		t.Fatalf("weft-client@b.env: %v\n%s", err, env)
	}
	back, err := natsconn.ReadDeployment(dir)
	if err != nil {
		t.Fatal(err)
	}
	if n, ok := back.Namespace("b"); !ok || n.Quota.MaxStorage != 2<<30 || n.Quota.StreamMaxBytes != 3<<29 || n.Quota.MaxConsumers != 64 {
		t.Fatalf("namespace b read back: %+v", n)
	}
	// The server enforces the accounts' limits: start it.
	s, err := server.NewServer(opts)
	if err != nil {
		t.Fatal(err)
	}
	s.Start()
	defer func() { s.Shutdown(); s.WaitForShutdown() }()
	if !s.ReadyForConnections(10 * time.Second) {
		t.Fatal("not ready")
	}
	acc, err := s.LookupAccount("b")
	if err != nil {
		t.Fatal(err)
	}
	if l := acc.JetStreamUsage().Limits; l.MaxStore != 2<<30 || l.MaxConsumers != 64 || l.MaxAckPending != natsconn.CoordinatorAckPending {
		t.Fatalf("account b's limits: %+v", l)
	}
}

// TestTargets: a process serves its -namespace with the credentials it
// was given, or several with those of its role in each, read from
// -roles-dir; a namespace with no credentials there is named.
func TestTargets(t *testing.T) {
	dir := t.TempDir()
	if _, err := natsconn.WriteRoles(dir, namespaced("a", "b"), bcrypt.MinCost, false); err != nil {
		t.Fatal(err)
	}
	cfg := natsconn.Config{Namespace: "a,b", RolesDir: dir}
	ts, err := cfg.Targets(natsconn.RoleWorker, "default")
	if err != nil || len(ts) != 2 || ts[0].User != "weft-worker-default@a" || ts[1].Namespace != "b" || ts[1].Password == "" {
		t.Fatalf("targets %+v, %v", ts, err)
	}
	cfg.Namespace = "a,c"
	if _, err := cfg.Targets(natsconn.RoleCoordinator, ""); err == nil || !strings.Contains(err.Error(), `namespace "c": no credentials of weft-coordinator@c`) {
		t.Fatalf("an unknown namespace: %v", err)
	}
	two := natsconn.Config{Namespace: "a,b", User: "weft-client@a"}
	if _, err := two.Targets(natsconn.RoleClient, ""); err == nil || !strings.Contains(err.Error(), "-roles-dir") {
		t.Fatalf("several namespaces without their credentials: %v", err)
	}
	one := natsconn.Config{Namespace: "a", User: "weft-client@a"}
	if ts, err := one.Targets(natsconn.RoleClient, ""); err != nil || len(ts) != 1 || ts[0].User != "weft-client@a" || ts[0].Namespace != "a" {
		t.Fatalf("one namespace: %+v, %v", ts, err)
	}
	if err := (&natsconn.Config{Storage: "file", Replicas: 1, Stream: "WEFT", Namespace: "a.b"}).Validate(); err == nil || !strings.Contains(err.Error(), "-namespace") {
		t.Fatalf("a bad -namespace: %v", err)
	}
}

// TestVerifyNamespace: the server says which account a connection is in;
// credentials of another namespace than the one asked for are refused,
// naming both.
func TestVerifyNamespace(t *testing.T) {
	dir := t.TempDir()
	d := namespaced("a", "b")
	if _, err := natsconn.WriteRoles(dir, d, bcrypt.MinCost, false); err != nil {
		t.Fatal(err)
	}
	main := filepath.Join(dir, "server.conf")
	if err := os.WriteFile(main, []byte("listen: 127.0.0.1:-1\njetstream { store_dir: "+filepath.Join(dir, "js")+" }\ninclude ./auth.conf\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	opts, err := server.ProcessConfigFile(main)
	if err != nil {
		t.Fatal(err)
	}
	s, err := server.NewServer(opts)
	if err != nil {
		t.Fatal(err)
	}
	s.Start()
	defer func() { s.Shutdown(); s.WaitForShutdown() }()
	if !s.ReadyForConnections(10 * time.Second) {
		t.Fatal("not ready")
	}
	cfg := natsconn.Config{Namespace: "b", RolesDir: dir}
	ts, err := cfg.Targets(natsconn.RoleClient, "")
	if err != nil {
		t.Fatal(err)
	}
	nc, err := ts[0].Connect(s.ClientURL())
	if err != nil {
		t.Fatal(err)
	}
	defer nc.Close()
	ctx := context.Background()
	if err := natsconn.VerifyNamespace(ctx, nc, "b"); err != nil {
		t.Fatalf("b's client in b: %v", err)
	}
	err = natsconn.VerifyNamespace(ctx, nc, "a")
	if !errors.Is(err, natsconn.ErrWrongNamespace) || !strings.Contains(err.Error(), `user weft-client@b is in NATS account "b"`) {
		t.Fatalf("b's client told namespace a: %v", err)
	}
	if !natsconn.Fatal(err) {
		t.Fatal("a wrong namespace is not fatal to a daemon")
	}
}

func TestSize(t *testing.T) {
	for in, want := range map[string]natsconn.Size{"1024": 1024, "10GiB": 10 << 30, "512MiB": 512 << 20, "1g": 1 << 30, "3K": 3 << 10, "7B": 7} {
		if got, err := natsconn.ParseSize(in); err != nil || got != want {
			t.Errorf("%q: %v %v", in, got, err)
		}
	}
	for _, bad := range []string{"", "-1", "ten", "1.5G", "99999999999T"} {
		if _, err := natsconn.ParseSize(bad); err == nil {
			t.Errorf("%q parsed", bad)
		}
	}
	var q natsconn.Quota
	if err := json.Unmarshal([]byte(`{"maxStorage":"2GiB","streamMaxBytes":1048576}`), &q); err != nil || q.MaxStorage != 2<<30 || q.StreamMaxBytes != 1<<20 {
		t.Fatalf("%+v %v", q, err)
	}
	if (10 << 30 * natsconn.Size(1)).String() != "10GiB" {
		t.Fatal((10 << 30 * natsconn.Size(1)).String())
	}
}

// TestParseNamespaces: a namespaces file gives each namespace what its
// quota changes from the defaults; zeros and unknown fields are refused.
func TestParseNamespaces(t *testing.T) {
	base := natsconn.DefaultQuota()
	nss, err := natsconn.ParseNamespaces([]byte(`
namespaces:
  - name: team-a
    quota: {maxStorage: 50GiB, startsPerSecond: 500}
  - name: team-b
`), base)
	if err != nil {
		t.Fatal(err)
	}
	if len(nss) != 2 || nss[0].Quota.MaxStorage != 50<<30 || nss[0].Quota.StartsPerSecond != 500 || nss[0].Quota.SignalsPerSecond != base.SignalsPerSecond || nss[1].Quota != base {
		t.Fatalf("%+v", nss)
	}
	for src, want := range map[string]string{
		`{"namespaces":[{"name":"a","quota":{"startsPerSecond":0}}]}`: "quota startsPerSecond: a quota of zero",
		`{"namespaces":[{"name":"a","quota":{"maxStorage":"0"}}]}`:    "quota maxStorage: a quota of zero",
		`{"namespaces":[{"name":"a","quota":{"starts":5}}]}`:          "unknown field",
		`{"namespaces":[]}`: "no namespaces",
		`{"namespaces":[{"name":"a","quota":{"maxStorage":"lots"}}]}`: "not a size",
	} {
		if _, err := natsconn.ParseNamespaces([]byte(src), base); err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("%s: %v, want %q", src, err, want)
		}
	}
}
