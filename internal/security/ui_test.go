package security

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/weft-dev/weft/internal/readmodel"
	"github.com/weft-dev/weft/internal/testkit"
	"github.com/weft-dev/weft/internal/ui"
	"github.com/weft-dev/weft/pkg/projection"
)

// uiPassword is the UI's password in TestUIDoor; uiUser its user.
const (
	uiUser     = "ops"
	uiPassword = "staple-battery-horse-correct"
)

// from is an HTTP client whose connections come from the loopback
// address ip (127.0.0.2, …): to the UI, another client.
func from(ip string) *http.Client {
	d := &net.Dialer{LocalAddr: &net.TCPAddr{IP: net.ParseIP(ip)}, Timeout: 5 * time.Second}
	return &http.Client{Transport: &http.Transport{DialContext: d.DialContext, MaxIdleConnsPerHost: 64}}
}

// uiGet sends GET path with user and password (none when user is "").
func uiGet(t *testing.T, hc *http.Client, url, user, password string) (int, http.Header, string) {
	t.Helper()
	req, err := http.NewRequest(http.MethodGet, url, nil)
	if err != nil {
		t.Fatal(err)
	}
	if user != "" {
		req.SetBasicAuth(user, password)
	}
	resp, err := hc.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, resp.Header, string(b)
}

// TestUIDoor attacks the door of a real 'weft ui' process, connected to a
// real nats-server as Weft's ui role, with its credentials in a password
// file that 'weft ui hash-password' wrote: a one-character password is
// refused at start; 2,000 wrong passwords from one client get 5 checks,
// each logged (never the password), and 429s; 100 live run lists from
// four clients cost the server one consumer of the read model's bucket,
// and each gets every change; a client's 33rd stream is refused; a
// cross-origin action is refused.
func TestUIDoor(t *testing.T) {
	s := startServer(t)
	s.setup(t)
	admin := s.connect(t, userAdmin)
	dir := t.TempDir()
	weftBin := filepath.Join(binaries(t), "weft")

	// A short password is refused at start, by name, before anything
	// listens.
	for _, pw := range []string{"x", "eleven-char"} {
		cmd := exec.Command(weftBin, "ui", "-nats", s.url, "-addr", "127.0.0.1:0", "-ui-user", uiUser, "-ui-password", pw)
		cmd.Env = append(cleanEnv(), s.roleEnv(userUI)...)
		out, err := cmd.CombinedOutput()
		if ee, ok := err.(*exec.ExitError); !ok || ee.ExitCode() != 2 || !strings.Contains(string(out), "want at least 12") {
			t.Errorf("weft ui with a password of %d characters: %v\n%s", len(pw), err, out)
		}
	}
	cmd := exec.Command(weftBin, "ui", "hash-password", "-user", uiUser, "-cost", "10")
	cmd.Stdin = strings.NewReader(uiPassword + "\n")
	line, err := cmd.Output()
	if err != nil {
		t.Fatalf("weft ui hash-password: %v", err)
	}
	passwd := filepath.Join(dir, "ui.passwd")
	if err := os.WriteFile(passwd, line, 0o600); err != nil {
		t.Fatal(err)
	}

	port := testkit.FreePort(t)
	logPath := filepath.Join(dir, "ui.log")
	startProcess(t, "weft", logPath, s.roleEnv(userUI), "ui", "-nats", s.url, "-addr", fmt.Sprintf("127.0.0.1:%d", port), "-read-only", "-password-file", passwd)
	base := fmt.Sprintf("http://127.0.0.1:%d", port)
	// Polls: the UI's log file is written without notice.
	for deadline := time.Now().Add(30 * time.Second); ; time.Sleep(50 * time.Millisecond) {
		if b, _ := os.ReadFile(logPath); strings.Contains(string(b), "UI: "+base) {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("weft ui did not start")
		}
	}

	t.Run("brute force", func(t *testing.T) {
		attacker := from("127.0.0.2")
		var mu sync.Mutex
		codes := map[int]int{}
		retryAfter := map[string]bool{}
		jobs := make(chan int)
		var wg sync.WaitGroup
		start := time.Now()
		for range 8 {
			wg.Go(func() {
				for i := range jobs {
					code, h, _ := uiGet(t, attacker, base+"/api/config", uiUser, fmt.Sprintf("guess-%04d-pw", i))
					mu.Lock()
					codes[code]++
					if code == http.StatusTooManyRequests {
						retryAfter[h.Get("Retry-After")] = true
					}
					mu.Unlock()
				}
			})
		}
		for i := range 2000 {
			jobs <- i
		}
		close(jobs)
		wg.Wait()
		t.Logf("2000 wrong passwords from one client in %v: %v", time.Since(start).Round(time.Millisecond), codes)
		if codes[http.StatusUnauthorized] != ui.DefaultLoginFailures || codes[http.StatusTooManyRequests] != 2000-ui.DefaultLoginFailures {
			t.Errorf("2000 wrong passwords: %v, want %d checked (401) and the rest refused (429)", codes, ui.DefaultLoginFailures)
		}
		if retryAfter[""] || len(retryAfter) == 0 {
			t.Errorf("429s without Retry-After: %v", retryAfter)
		}
		// Locked out, the right password is refused too: no oracle.
		if code, _, _ := uiGet(t, attacker, base+"/api/config", uiUser, uiPassword); code != http.StatusTooManyRequests {
			t.Errorf("the right password from the locked-out client: %d, want 429", code)
		}
		if code, _, body := uiGet(t, from("127.0.0.3"), base+"/api/config", uiUser, uiPassword); code != http.StatusOK {
			t.Errorf("the right password from another client: %d %s", code, body)
		}
		b, _ := os.ReadFile(logPath)
		log := string(b)
		var failed, logins, refused int
		for l := range strings.SplitSeq(log, "\n") {
			switch {
			case strings.Contains(l, `msg="ui: logins refused: the client is locked out`):
				refused++
			case strings.Contains(l, `msg="ui: login failed"`):
				failed++
				if !strings.Contains(l, "remote=127.0.0.2:") || !strings.Contains(l, "user="+uiUser) {
					t.Errorf("a failure's line without the remote address or user: %s", l)
				}
			case strings.Contains(l, `msg="ui: login"`):
				logins++
				if !strings.Contains(l, "remote=127.0.0.3:") {
					t.Errorf("a login's line without the remote address: %s", l)
				}
			}
		}
		if failed != ui.DefaultLoginFailures || logins != 1 || refused < 1 || refused > 2 {
			t.Errorf("%d failed logins, %d logins and %d lines of refusals logged, want %d, 1 and one every 10 s:\n%s", failed, logins, refused, ui.DefaultLoginFailures, log)
		}
		if strings.Contains(log, "guess-") || strings.Contains(log, uiPassword) {
			t.Errorf("a password is in the UI's log:\n%s", log)
		}
	})

	t.Run("live streams", func(t *testing.T) {
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
		defer cancel()
		kvStream, err := admin.js.Stream(ctx, "KV_"+readmodel.Bucket)
		if err != nil {
			t.Fatal(err)
		}
		consumers := func() int {
			t.Helper()
			info, err := kvStream.Info(ctx)
			if err != nil {
				t.Fatal(err)
			}
			return info.State.Consumers
		}
		if n := consumers(); n != 0 {
			t.Fatalf("%d consumers of the read model's bucket before any stream", n)
		}
		sctx, scancel := context.WithCancel(ctx)
		defer scancel()
		open := func(hc *http.Client) (*http.Response, error) {
			req, _ := http.NewRequestWithContext(sctx, http.MethodGet, base+"/api/live/runs", nil)
			req.SetBasicAuth(uiUser, uiPassword)
			return hc.Do(req)
		}
		var streams []*bufio.Reader
		var bodies []io.Closer
		defer func() {
			for _, b := range bodies {
				b.Close()
			}
		}()
		for _, c := range []struct {
			ip string
			n  int
		}{{"127.0.0.4", 32}, {"127.0.0.5", 32}, {"127.0.0.6", 32}, {"127.0.0.7", 4}} {
			hc := from(c.ip)
			for i := range c.n {
				resp, err := open(hc)
				if err != nil {
					t.Fatal(err)
				}
				if resp.StatusCode != http.StatusOK {
					b, _ := io.ReadAll(resp.Body)
					resp.Body.Close()
					t.Fatalf("stream %d of %s: %d %s", i+1, c.ip, resp.StatusCode, b)
				}
				bodies = append(bodies, resp.Body)
				streams = append(streams, bufio.NewReader(resp.Body))
			}
			if c.n == ui.DefaultLivePerClient {
				resp, err := open(hc)
				if err != nil {
					t.Fatal(err)
				}
				b, _ := io.ReadAll(resp.Body)
				resp.Body.Close()
				if resp.StatusCode != http.StatusTooManyRequests || resp.Header.Get("Retry-After") == "" || !strings.Contains(string(b), "this client has 32 live streams open") {
					t.Errorf("stream 33 of %s: %d %s, want 429 saying why", c.ip, resp.StatusCode, b)
				}
			}
		}
		if n := consumers(); n != 1 {
			t.Errorf("%d live run lists: %d consumers of the read model's bucket, want 1", len(streams), n)
		}
		// One change to the read model reaches every stream.
		kv, err := admin.js.KeyValue(ctx, readmodel.Bucket)
		if err != nil {
			t.Fatal(err)
		}
		sum, _ := json.Marshal(readmodel.Summary{RunID: "doorrun", Graph: "door", Status: projection.RunRunning})
		if _, err := kv.Put(ctx, "test.doorrun", sum); err != nil {
			t.Fatal(err)
		}
		var wg sync.WaitGroup
		got := make(chan bool, len(streams))
		for _, r := range streams {
			wg.Go(func() {
				for {
					l, err := r.ReadString('\n')
					if err != nil {
						got <- false
						return
					}
					if strings.HasPrefix(l, "data: ") && strings.Contains(l, `"runId":"doorrun"`) {
						got <- true
						return
					}
				}
			})
		}
		wg.Wait()
		close(got)
		n := 0
		for ok := range got {
			if ok {
				n++
			}
		}
		if n != len(streams) {
			t.Errorf("the change reached %d of %d streams", n, len(streams))
		}
		if n := consumers(); n != 1 {
			t.Errorf("after a change: %d consumers, want 1", n)
		}
		scancel()
		// Polls: a consumer's deletion on the server sends no event to this test.
		for deadline := time.Now().Add(30 * time.Second); consumers() != 0; time.Sleep(100 * time.Millisecond) {
			if time.Now().After(deadline) {
				t.Fatalf("the watch outlived the streams: %d consumers", consumers())
			}
		}
	})

	t.Run("cross-origin action", func(t *testing.T) {
		hc := from("127.0.0.8")
		for _, tt := range []struct {
			name string
			h    map[string]string
			want string
		}{
			{"Origin elsewhere", map[string]string{"Origin": "http://evil.example"}, "cross-origin POST refused"},
			{"Sec-Fetch-Site cross-site", map[string]string{"Sec-Fetch-Site": "cross-site", "Origin": "http://evil.example"}, "cross-origin POST refused"},
			{"same origin", map[string]string{"Sec-Fetch-Site": "same-origin", "Origin": base}, "read-only"},
		} {
			req, _ := http.NewRequest(http.MethodPost, base+"/api/runs/somerun/cancel", strings.NewReader(`{}`))
			req.SetBasicAuth(uiUser, uiPassword)
			req.Header.Set(ui.ActionHeader, "1")
			for k, v := range tt.h {
				req.Header.Set(k, v)
			}
			resp, err := hc.Do(req)
			if err != nil {
				t.Fatal(err)
			}
			b, _ := io.ReadAll(resp.Body)
			resp.Body.Close()
			if resp.StatusCode != http.StatusForbidden || !strings.Contains(string(b), tt.want) {
				t.Errorf("%s: %d %s, want 403 saying %q", tt.name, resp.StatusCode, b, tt.want)
			}
		}
	})

	testkit.CheckNoViolations(t, dir)
}
