package security

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/weft-dev/weft/internal/testkit"
)

// TestNoSecretsInOutput starts each daemon and the CLI with a password in
// the URL, in -user/-password and in the environment, against a server
// that accepts it, one that refuses it and a port where nothing listens,
// and looks for the password (and the URL's user information) in all
// they print.
func TestNoSecretsInOutput(t *testing.T) {
	s := startServer(t)
	s.setup(t)
	dead := fmt.Sprintf("nats://127.0.0.1:%d", testkit.FreePort(t))
	hostport := strings.TrimPrefix(s.url, "nats://")
	const wrong = "Wr0ngPassw0rdNotTheRealOne"

	type target struct {
		name   string
		bin    string
		args   []string
		daemon bool // runs until killed; the CLI commands exit by themselves
	}
	targets := func(user string) []target {
		return []target{
			{"coordinator", "coordinator", nil, true},
			{"nodeworker", "nodeworker", []string{"-queues", queueA}, true},
			{"weft list", "weft", []string{"list"}, false},
			{"weft status", "weft", []string{"status", "no-such-run"}, false},
			{"weft cancel", "weft", []string{"cancel", "no-such-run"}, false},
		}
	}
	// How the credentials are given: each yields the args and environment,
	// and the secret that must not show.
	type way struct {
		name string
		make func(user, pw, url string) (args, env []string)
	}
	inURL := func(user, pw, url string) string {
		return strings.Replace(url, "nats://", "nats://"+user+":"+pw+"@", 1)
	}
	ways := []way{
		{"url", func(user, pw, url string) ([]string, []string) {
			return []string{"-nats", inURL(user, pw, url)}, nil
		}},
		{"flags", func(user, pw, url string) ([]string, []string) {
			return []string{"-nats", url, "-user", user, "-password", pw}, nil
		}},
		{"env", func(user, pw, url string) ([]string, []string) {
			return nil, []string{"WEFT_NATS_URL=" + url, "WEFT_NATS_USER=" + user, "WEFT_NATS_PASSWORD=" + pw}
		}},
	}
	users := map[string]string{
		"coordinator": userCoord, "nodeworker": userWorker,
		"weft list": userClient, "weft status": userClient, "weft cancel": userClient,
	}
	for _, tg := range targets("") {
		for _, w := range ways {
			for _, server := range []struct{ name, url, pw string }{
				{"accepted", s.url, s.creds[users[tg.name]].Password},
				{"refused", s.url, wrong},
				{"unreachable", dead, s.creds[users[tg.name]].Password},
			} {
				t.Run(tg.name+"/"+w.name+"/"+server.name, func(t *testing.T) {
					t.Parallel()
					user := users[tg.name]
					args, env := w.make(user, server.pw, server.url)
					out := runFor(t, tg.bin, append(append([]string{}, tg.args...), args...), append(env, "WEFT_LOG_LEVEL=debug"), tg.daemon)
					for _, secret := range []string{server.pw, user + ":" + server.pw, user + ":" + server.pw[:4]} {
						if strings.Contains(out, secret) {
							t.Fatalf("the output holds %q:\n%s", secret, out)
						}
					}
					if strings.TrimSpace(out) == "" {
						t.Fatal("no output at all: nothing was checked")
					}
					if tg.name == "coordinator" && server.name == "accepted" && !strings.Contains(out, `"nats":"nats://`+hostport+`"`) {
						t.Errorf("the coordinator's start line lacks the redacted URL:\n%s", out)
					}
				})
			}
		}
	}
}

// runFor runs a binary and returns all it printed: a daemon for a few
// seconds (then it is killed), a command until it exits.
func runFor(t *testing.T, bin string, args, env []string, daemon bool) string {
	t.Helper()
	d := 20 * time.Second
	if daemon {
		d = 4 * time.Second
	}
	ctx, cancel := context.WithTimeout(context.Background(), d)
	defer cancel()
	logPath := filepath.Join(t.TempDir(), "out.log")
	f, err := os.Create(logPath)
	if err != nil {
		t.Fatal(err)
	}
	cmd := exec.CommandContext(ctx, filepath.Join(binaries(t), bin), args...)
	cmd.Stdout, cmd.Stderr = f, f
	cmd.Env = append(cleanEnv(), env...)
	err = cmd.Run()
	f.Close()
	var exit *exec.ExitError
	if err != nil && !errors.As(err, &exit) {
		t.Fatal(err)
	}
	b, err := os.ReadFile(logPath)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

// cleanEnv is the environment without WEFT_ variables of the caller's.
func cleanEnv() []string {
	var out []string
	for _, kv := range os.Environ() {
		if !strings.HasPrefix(kv, "WEFT_") {
			out = append(out, kv)
		}
	}
	return out
}
