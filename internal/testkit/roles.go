package testkit

import (
	"bufio"
	"bytes"
	"crypto/rand"
	"encoding/base64"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"golang.org/x/crypto/bcrypt"

	"github.com/weft-dev/weft/internal/natsconn"
)

// Roles are the NATS users of a test deployment under Weft's roles: the
// users 'weft roles' generates for it (natsconn.Deployment.NewCredentials
// and natsconn.AuthConfig, the generator itself, not a copy of its
// output), and any extra users the test's own programs need, as one
// authorization block for the servers to include.
type Roles struct {
	auth  []byte
	creds map[string]natsconn.Credential
}

// NewRoles generates the users of d, and the extra ones, with random
// passwords (bcrypt at its lowest cost: every connection pays one
// comparison).
func NewRoles(t testing.TB, d natsconn.Deployment, extra ...natsconn.User) *Roles {
	t.Helper()
	creds, err := d.NewCredentials()
	if err != nil {
		t.Fatal(err)
	}
	for _, u := range extra {
		b := make([]byte, 24)
		_, _ = rand.Read(b)
		creds = append(creds, natsconn.Credential{User: u, Password: base64.RawURLEncoding.EncodeToString(b)})
	}
	conf, err := natsconn.AuthConfig(creds, bcrypt.MinCost)
	if err != nil {
		t.Fatal(err)
	}
	r := &Roles{auth: conf, creds: map[string]natsconn.Credential{}}
	for _, c := range creds {
		r.creds[c.User.Name] = c
	}
	return r
}

// Include writes the authorization block as auth.conf into dir, a
// server's configuration directory, and returns the line that includes it
// (nats-server resolves includes against the including file's directory).
func (r *Roles) Include(t testing.TB, dir string) string {
	t.Helper()
	if err := os.WriteFile(filepath.Join(dir, "auth.conf"), r.auth, 0o600); err != nil {
		t.Fatal(err)
	}
	return "include ./auth.conf\n"
}

// Config is the connection configuration of user (its own inbox prefix
// follows from the user name).
func (r *Roles) Config(t testing.TB, user string) natsconn.Config {
	t.Helper()
	c, ok := r.creds[user]
	if !ok {
		t.Fatalf("no user %q in the roles", user)
	}
	return natsconn.Config{User: c.User.Name, Password: c.Password}
}

// Env is the environment a process of user runs with: WEFT_NATS_USER and
// WEFT_NATS_PASSWORD, as in the <user>.env file 'weft roles' writes.
func (r *Roles) Env(t testing.TB, user string) []string {
	t.Helper()
	c := r.Config(t, user)
	return []string{"WEFT_NATS_USER=" + c.User, "WEFT_NATS_PASSWORD=" + c.Password}
}

// violations are what a refused permission leaves in a log: the client's
// error ("nats: permissions violation: Permissions Violation for Publish
// to ...", as Weft's programs log it) and the server's own lines
// ("Publish Violation - ...", "Subscription Violation - ...").
var violations = [][]byte{[]byte("permissions violation"), []byte("publish violation"), []byte("subscription violation")}

// CheckNoViolations fails the test for every line of the logs that says
// a permission was refused. Each path is a log file, or a directory whose
// *.log files are read; a log that does not exist (a process that never
// started) is passed over.
func CheckNoViolations(t testing.TB, paths ...string) {
	t.Helper()
	var files []string
	for _, p := range paths {
		if info, err := os.Stat(p); err == nil && info.IsDir() {
			logs, _ := filepath.Glob(filepath.Join(p, "*.log"))
			files = append(files, logs...)
			continue
		}
		files = append(files, p)
	}
	for _, f := range files {
		b, err := os.ReadFile(f)
		if os.IsNotExist(err) {
			continue
		}
		if err != nil {
			t.Fatal(err)
		}
		sc := bufio.NewScanner(bytes.NewReader(b))
		sc.Buffer(nil, 1<<20)
		for sc.Scan() {
			line := bytes.ToLower(sc.Bytes())
			for _, v := range violations {
				if bytes.Contains(line, v) {
					t.Errorf("%s: a permission was refused: %s", filepath.Base(f), strings.TrimSpace(sc.Text()[:min(len(sc.Text()), 300)]))
					break
				}
			}
		}
	}
}

// RefusedPublish connects to url as cfg's user, publishes on subject, and
// fails the test unless the server refuses it with a permissions
// violation that names the subject.
func RefusedPublish(t testing.TB, url string, cfg natsconn.Config, subject string) {
	t.Helper()
	refused := make(chan error, 16)
	nc, err := cfg.Connect(url, nats.ErrorHandler(func(_ *nats.Conn, _ *nats.Subscription, err error) { refused <- err }))
	if err != nil {
		t.Fatalf("connecting as %s: %v", cfg.User, err)
	}
	defer nc.Close()
	if err := nc.Publish(subject, []byte("{}")); err != nil {
		t.Fatal(err)
	}
	select {
	case err := <-refused:
		if !errors.Is(err, nats.ErrPermissionViolation) || !strings.Contains(err.Error(), subject) {
			t.Fatalf("%s publishing on %s: %v, want a permissions violation", cfg.User, subject, err)
		}
	case <-time.After(10 * time.Second):
		t.Fatalf("%s: a publish on %s was not refused", cfg.User, subject)
	}
}
