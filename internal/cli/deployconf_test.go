package cli_test

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/nats-io/nats-server/v2/server"
)

// TestShippedClusterConfigsRefuseAnonymous: deploy/nats's cluster
// configurations start with authorization on: without the roles 'weft
// roles' generates, the server refuses to start (the include is missing);
// with them, it admits only their users.
func TestShippedClusterConfigsRefuseAnonymous(t *testing.T) {
	confs, err := filepath.Glob("../../deploy/nats/nats-cluster-*.conf")
	if err != nil || len(confs) != 3 {
		t.Fatalf("cluster configs: %v, %v", confs, err)
	}
	dir := t.TempDir()
	for _, c := range confs {
		b, err := os.ReadFile(c)
		if err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(dir, filepath.Base(c)), b, 0o644); err != nil {
			t.Fatal(err)
		}
		if _, err := server.ProcessConfigFile(filepath.Join(dir, filepath.Base(c))); err == nil || !strings.Contains(err.Error(), "auth.conf") {
			t.Errorf("%s without the roles: %v, want a refusal naming auth.conf", c, err)
		}
	}
	if r := weft(t, "roles", "-out", filepath.Join(dir, "auth"), "-queues", "default,cpu"); r.code != 0 {
		t.Fatalf("weft roles: exit %d\n%s", r.code, r.stderr)
	}
	for _, c := range confs {
		opts, err := server.ProcessConfigFile(filepath.Join(dir, filepath.Base(c)))
		if err != nil {
			t.Fatalf("%s with the roles: %v", c, err)
		}
		// Users of every account, Weft's roles' included, are in these lists.
		users := len(opts.Users) + len(opts.Nkeys)
		if users == 0 || opts.NoAuthUser != "" {
			t.Errorf("%s: %d users, no_auth_user %q: want Weft's roles and no anonymous user", c, users, opts.NoAuthUser)
		}
	}
}
