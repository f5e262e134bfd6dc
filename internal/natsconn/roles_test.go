package natsconn_test

import (
	"errors"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats-server/v2/server"
	"github.com/nats-io/nkeys"
	"golang.org/x/crypto/bcrypt"

	"github.com/weft-dev/weft/internal/natsconn"
)

// TestWriteRoles: the generated authorization parses as nats-server
// configuration, holds hashes only, and the env files are private.
func TestWriteRoles(t *testing.T) {
	dir := t.TempDir()
	d := natsconn.Deployment{Queues: []string{"default", "gpu"}}
	files, err := natsconn.WriteRoles(dir, d, bcrypt.MinCost, false)
	if err != nil {
		t.Fatal(err)
	}
	if len(files) != 1+6+2 { // auth.conf, 6 roles (trigger and serve included), 2 workers
		t.Fatalf("%d files", len(files))
	}
	conf, err := os.ReadFile(filepath.Join(dir, "auth.conf"))
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range files[1:] {
		info, err := os.Stat(f.Path)
		if err != nil {
			t.Fatal(err)
		}
		if info.Mode().Perm() != 0o600 {
			t.Errorf("%s: mode %v", f.Path, info.Mode())
		}
		b, _ := os.ReadFile(f.Path)
		_, pw, _ := strings.Cut(string(b), "WEFT_NATS_PASSWORD=")
		pw, _, _ = strings.Cut(pw, "\n")
		if len(pw) < 32 || strings.Contains(string(conf), pw) {
			t.Errorf("%s: password %d chars, in auth.conf: %v", f.User, len(pw), strings.Contains(string(conf), pw))
		}
	}
	main := filepath.Join(dir, "server.conf")
	if err := os.WriteFile(main, []byte("listen: 127.0.0.1:-1\ninclude ./auth.conf\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	opts, err := server.ProcessConfigFile(main)
	if err != nil {
		t.Fatalf("nats-server refuses the configuration: %v", err)
	}
	if len(opts.Users) != 8 {
		t.Fatalf("%d users", len(opts.Users))
	}
	for _, u := range opts.Users {
		if !strings.HasPrefix(u.Password, "$2a$") || u.Permissions == nil || u.Permissions.Publish == nil {
			t.Errorf("user %s: password %q…, permissions %+v", u.Username, u.Password[:4], u.Permissions)
		}
	}
	if _, err := natsconn.WriteRoles(dir, d, bcrypt.MinCost, false); !errors.Is(err, natsconn.ErrExists) {
		t.Fatalf("overwrote: %v", err)
	}
	if _, err := natsconn.WriteRoles(dir, d, bcrypt.MinCost, true); err != nil {
		t.Fatalf("-force: %v", err)
	}
}

func TestDeploymentValidate(t *testing.T) {
	err := natsconn.Deployment{Queues: []string{"a.b", "x", "x"}, Durable: "c d"}.Validate()
	for _, want := range []string{`queue "a.b"`, `queue "x": given twice`, `durable "c d"`} {
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("error %v lacks %q", err, want)
		}
	}
}

// TestWorkerPermissions: a worker publishes only its queue's outcomes
// (and its queue's streamed tokens, outside the stream) and touches only
// its queue's consumer.
func TestWorkerPermissions(t *testing.T) {
	u := natsconn.Deployment{Queues: []string{"a", "b"}}.User(natsconn.RoleWorker, "a")
	for _, p := range u.PublishAllow {
		if strings.HasPrefix(p, "weft.") && p != "weft.r.*.*.w.a.>" && p != "weft.tok.*.*.a.*" {
			t.Errorf("worker of a may publish %s", p)
		}
		if strings.Contains(p, "work-b") || strings.Contains(p, "PURGE") || strings.Contains(p, "DELETE") || strings.Contains(p, "STREAM.CREATE") {
			t.Errorf("worker of a may call %s", p)
		}
		// Reads by subject only: no batched or leader get (the subject is
		// in the body), no direct get of any subject.
		switch p {
		case "$JS.API.DIRECT.GET.WEFT", "$JS.API.DIRECT.GET.WEFT.>", "$JS.API.STREAM.MSG.GET.WEFT":
			t.Errorf("worker of a may read any message: %s", p)
		}
	}
}

// TestReadersCreateNoConsumers: the client and the UI follow runs with a
// core subscription and gets, and may create no consumer on the events
// stream.
func TestReadersCreateNoConsumers(t *testing.T) {
	d := natsconn.Deployment{Queues: []string{"a"}}
	for _, r := range []natsconn.Role{natsconn.RoleClient, natsconn.RoleUI} {
		u := d.User(r, "")
		for _, p := range u.PublishAllow {
			// Listing the queues' consumers (the UI's workers page)
			// reads configurations and counts; it creates nothing.
			if strings.HasPrefix(p, "$JS.API.CONSUMER.LIST.") || strings.HasPrefix(p, "$JS.API.CONSUMER.INFO.") {
				continue
			}
			if strings.HasPrefix(p, "$JS.API.CONSUMER.") && strings.Contains(p, ".WEFT") {
				t.Errorf("%s may call %s", u.Name, p)
			}
		}
		if !slices.Contains(u.SubscribeAllow, "weft.r.*.*.>") {
			t.Errorf("%s may not subscribe to runs' subjects: %v", u.Name, u.SubscribeAllow)
		}
	}
}

// TestNKeyAndUserConnect: -nkey and -user/-password authenticate, and a
// user's connection takes replies on its own inbox prefix.
func TestNKeyAndUserConnect(t *testing.T) {
	kp, err := nkeys.CreateUser()
	if err != nil {
		t.Fatal(err)
	}
	pub, _ := kp.PublicKey()
	seed, _ := kp.Seed()
	seedFile := filepath.Join(t.TempDir(), "user.nk")
	if err := os.WriteFile(seedFile, seed, 0o600); err != nil {
		t.Fatal(err)
	}
	s, err := server.NewServer(&server.Options{
		Host: "127.0.0.1", Port: -1, NoLog: true, NoSigs: true,
		Nkeys: []*server.NkeyUser{{Nkey: pub}},
		Users: []*server.User{{Username: "alice", Password: "pw", Permissions: &server.Permissions{
			Publish:   &server.SubjectPermission{Allow: []string{"x"}},
			Subscribe: &server.SubjectPermission{Allow: []string{"_INBOX_alice.>"}},
		}}},
	})
	if err != nil {
		t.Fatal(err)
	}
	s.Start()
	t.Cleanup(s.Shutdown)
	if !s.ReadyForConnections(5 * time.Second) {
		t.Fatal("server not ready")
	}
	nk := natsconn.Config{NKey: seedFile}
	nc, err := nk.Connect(s.ClientURL())
	if err != nil {
		t.Fatalf("nkey: %v", err)
	}
	nc.Close()
	alice := natsconn.Config{User: "alice", Password: "pw"}
	nc, err = alice.Connect(s.ClientURL())
	if err != nil {
		t.Fatalf("user: %v", err)
	}
	defer nc.Close()
	if in := nc.NewRespInbox(); !strings.HasPrefix(in, "_INBOX_alice.") {
		t.Fatalf("inbox %q", in)
	}
	bad := natsconn.Config{User: "alice", Password: "wrong"}
	if _, err := bad.Connect(s.ClientURL()); err == nil || strings.Contains(err.Error(), "wrong") {
		t.Fatalf("wrong password: %v", err)
	}
}

// TestReadCredentials: what WriteRoles wrote reads back, user by user; a
// deployment with a queue the files lack is fs.ErrNotExist, and a file
// of another user is refused, naming the file.
func TestReadCredentials(t *testing.T) {
	dir := t.TempDir()
	d := natsconn.Deployment{Queues: []string{"default"}}
	if _, err := natsconn.WriteRoles(dir, d, bcrypt.MinCost, false); err != nil {
		t.Fatal(err)
	}
	creds, err := natsconn.ReadCredentials(dir, d)
	if err != nil {
		t.Fatal(err)
	}
	if len(creds) != len(d.Users()) {
		t.Fatalf("%d credentials, want %d", len(creds), len(d.Users()))
	}
	for _, c := range creds {
		b, _ := os.ReadFile(filepath.Join(dir, c.User.Name+".env"))
		if len(c.Password) < 32 || !strings.Contains(string(b), "WEFT_NATS_PASSWORD="+c.Password+"\n") {
			t.Errorf("%s: password not read back", c.User.Name)
		}
	}
	if _, err := natsconn.ReadCredentials(dir, natsconn.Deployment{Queues: []string{"default", "gpu"}}); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("a queue without a file: %v, want not exist", err)
	}
	client := filepath.Join(dir, "weft-client.env")
	if err := os.WriteFile(client, []byte("WEFT_NATS_USER=weft-admin\nWEFT_NATS_PASSWORD=x\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	if _, err := natsconn.ReadCredentials(dir, d); err == nil || !strings.Contains(err.Error(), client) {
		t.Errorf("a file of another user: %v", err)
	}
}

// TestServePermissions: 'weft serve' starts runs and signals (in a
// namespace, by asking admission), reads runs, and publishes on its
// webhooks' subjects; it cancels nothing, decides nothing, reads no
// bucket, creates no consumer and subscribes to its inbox only.
func TestServePermissions(t *testing.T) {
	d := natsconn.Deployment{Queues: []string{"a"}, WebhookSubjects: []string{"orders.webhook", "gh.>"}}
	u := d.User(natsconn.RoleServe, "")
	if u.Name != "weft-serve" {
		t.Fatalf("user %s", u.Name)
	}
	for _, want := range []string{"weft.r.*.*.c.started", "weft.r.*.*.c.signal", "orders.webhook", "gh.>", "$JS.API.STREAM.INFO.WEFT"} {
		if !slices.Contains(u.PublishAllow, want) {
			t.Errorf("serve may not publish %s: %v", want, u.PublishAllow)
		}
	}
	for _, p := range u.PublishAllow {
		if strings.HasPrefix(p, "$JS.API.CONSUMER.") || strings.HasPrefix(p, "$KV.") || strings.Contains(p, "KV_") || strings.Contains(p, "cancelreq") || strings.Contains(p, ".d.") || p == "weft.r.*.*.c.*" || p == ">" {
			t.Errorf("serve may call %s", p)
		}
	}
	if !slices.Equal(u.SubscribeAllow, []string{"_INBOX_weft-serve.>"}) {
		t.Errorf("serve subscribes to %v", u.SubscribeAllow)
	}
	ns := natsconn.Deployment{Queues: []string{"a"}, Namespaces: []natsconn.Namespace{{Name: "a"}}}.UserIn("a", natsconn.RoleServe, "")
	for _, p := range ns.PublishAllow {
		if strings.HasPrefix(p, "weft.r.") {
			t.Errorf("serve of namespace a may publish %s (a namespace's starts are admitted)", p)
		}
	}
	if !slices.Contains(ns.PublishAllow, "weft.admit.start") || !slices.Contains(ns.PublishAllow, "weft.admit.signal") {
		t.Errorf("serve of namespace a may not ask admission: %v", ns.PublishAllow)
	}
	err := natsconn.Deployment{Queues: []string{"a"}, WebhookSubjects: []string{"weft.r.>", "$KV.x", "a..b", "_INBOX_weft-client.x", "ok.x", "ok.x"}}.Validate()
	for _, want := range []string{`"weft.r.>": Weft's own`, `"$KV.x": Weft's own`, `"a..b": not a NATS subject`, `"_INBOX_weft-client.x": Weft's own`, `"ok.x": given twice`} {
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("error %v lacks %q", err, want)
		}
	}
}

// TestKVWatchersMayRestart: every role that may create a consumer of a
// KV bucket's stream (a watcher) may also create it on the legacy
// subject, with no name: nats.go asks there when it starts an ordered
// consumer again after a NATS node went, and a watch refused then stops
// for good (a coordinator's schedules watch did, under TestChaos).
func TestKVWatchersMayRestart(t *testing.T) {
	d := natsconn.Deployment{Queues: []string{"default"}}
	watched := 0
	for _, u := range d.Users() {
		for _, p := range u.PublishAllow {
			rest, ok := strings.CutPrefix(p, "$JS.API.CONSUMER.CREATE.KV_")
			if !ok {
				continue
			}
			stream, _, named := strings.Cut(rest, ".")
			if !named {
				continue
			}
			watched++
			if !slices.Contains(u.PublishAllow, "$JS.API.CONSUMER.CREATE.KV_"+stream) {
				t.Errorf("%s watches KV_%s but may not create its consumer on the legacy subject", u.Name, stream)
			}
		}
	}
	if watched < 4 { // UI (runs), coordinator (leases, flow, schedules), trigger (schedules)
		t.Fatalf("found %d watchers in the roles, want at least 4", watched)
	}
}

// TestEndedNoticesOnlyFromCoordinators: a worker skips the item of a run
// it heard ended (internal/worker, endwatch.go), so an ended notice is a
// coordinator's to publish alone: a client or a worker that could forge
// one would have live runs' work passed over (the admin may do anything).
// The workers may hear them.
func TestEndedNoticesOnlyFromCoordinators(t *testing.T) {
	d := natsconn.Deployment{Queues: []string{"default"}}
	notice := "weft.ended.3.06h1tqf5bdddhaqtil06sv88c0"
	heard := false
	for _, u := range d.Users() {
		publishes := slices.ContainsFunc(u.PublishAllow, func(p string) bool { return server.SubjectMatchesFilter(notice, p) })
		if publishes != (u.Role == natsconn.RoleCoordinator || u.Role == natsconn.RoleAdmin) {
			t.Errorf("%s (role %s) may publish an ended notice: %t", u.Name, u.Role, publishes)
		}
		if u.Role == natsconn.RoleWorker {
			heard = slices.ContainsFunc(u.SubscribeAllow, func(p string) bool { return server.SubjectMatchesFilter(notice, p) })
			if !heard {
				t.Errorf("worker %s may not hear ended notices", u.Name)
			}
		}
	}
	if !heard {
		t.Fatal("no worker in the deployment")
	}
}
