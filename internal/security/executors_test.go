package security

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/weft-dev/weft/internal/testkit"
	"github.com/weft-dev/weft/pkg/client"
	"github.com/weft-dev/weft/pkg/graph"
	"github.com/weft-dev/weft/pkg/projection"
	"github.com/weft-dev/weft/pkg/worker/builtin"
)

// Secrets the worker holds in this test; none may be seen anywhere but
// in the requests that carry them.
const (
	apiToken = "tok-7f3a9c2e51d84b06"
	llmKey   = "sk-llm-0c1d2e3f4a5b6c7d"
)

// countingServer is a loopback HTTP server that counts its requests.
type countingServer struct {
	*httptest.Server
	hits atomic.Int64
}

func newCountingServer(t *testing.T, h http.HandlerFunc) *countingServer {
	t.Helper()
	s := &countingServer{}
	s.Server = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		s.hits.Add(1)
		h(w, r)
	}))
	t.Cleanup(s.Close)
	return s
}

func (s *countingServer) port() string {
	_, p, _ := net.SplitHostPort(s.Listener.Addr().String())
	return p
}

// TestExecutorAttacks runs graphs that turn the built-in executors against
// their host, each started by the client role and run by a real worker
// process under its role, against a real nats-server with the roles:
// SSRF to a loopback canary (directly and through a redirect from an
// allowed host), an oversized response, template bombs, a schema $ref to
// a file, and graphs that try to send the worker's llm key elsewhere. Each
// fails its node (or its graph) with a located error, the canary records
// no request, the worker keeps serving, and neither secret appears in any
// message of the stream nor in any process's output.
func TestExecutorAttacks(t *testing.T) {
	canary := newCountingServer(t, func(w http.ResponseWriter, r *http.Request) {
		_, _ = io.WriteString(w, "canary")
	})
	var sawToken atomic.Value
	sawToken.Store("")
	allowed := newCountingServer(t, func(w http.ResponseWriter, r *http.Request) {
		switch r.URL.Path {
		case "/redirect":
			http.Redirect(w, r, canary.URL+"/stolen", http.StatusFound)
		case "/big":
			_, _ = w.Write([]byte(strings.Repeat("x", 2<<20)))
		case "/echo":
			// A careless service that echoes credentials back.
			sawToken.Store(r.Header.Get("Authorization"))
			w.Header().Set("X-Seen", r.Header.Get("Authorization"))
			_, _ = io.WriteString(w, "you sent "+r.Header.Get("Authorization"))
		default:
			_, _ = io.WriteString(w, "ok")
		}
	})
	var llmAuth atomic.Value
	llmAuth.Store("")
	llm := newCountingServer(t, func(w http.ResponseWriter, r *http.Request) {
		llmAuth.Store(r.Header.Get("Authorization"))
		w.Header().Set("Content-Type", "application/json")
		_, _ = io.WriteString(w, `{"model":"m","choices":[{"message":{"role":"assistant","content":"hello"}}]}`)
	})

	s := startServer(t)
	s.setup(t)
	dir := t.TempDir()
	startProcess(t, "coordinator", filepath.Join(dir, "coordinator.log"), s.roleEnv(userCoord), "-nats", s.url)
	workerLog := filepath.Join(dir, "worker.log")
	env := append(s.roleEnv(userWorker), "WEFT_SECRET_API_TOKEN="+apiToken, "WEFT_SECRET_LLM_KEY="+llmKey)
	startProcess(t, "nodeworker", workerLog, env, "-nats", s.url, "-queues", queueA, "-name", "wexec",
		"-http-allow", "127.0.0.1:"+allowed.port(),
		"-llm-endpoint", "name=default,url="+llm.URL+"/v1,key=LLM_KEY",
		"-log-level", "debug")

	cl := client.New(openStore(t, s.connect(t, userClient)))
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()

	// run starts a one-node graph and waits for its end.
	run := func(t *testing.T, node map[string]any) *projection.State {
		t.Helper()
		node["id"] = "n"
		b, _ := json.Marshal(map[string]any{
			"name":  "attack",
			"nodes": []any{node},
			"edges": []any{map[string]any{"from": "START", "to": "n"}, map[string]any{"from": "n", "to": "END"}},
		})
		g, err := graph.Parse(b, "attack.json")
		if err != nil {
			t.Fatal(err)
		}
		id, err := cl.Start(ctx, g)
		if err != nil {
			t.Fatal(err)
		}
		st, err := cl.Wait(ctx, id)
		if err != nil {
			t.Fatal(err)
		}
		return st
	}
	// refused checks the run failed at its node with a non-retryable
	// failure of the type, whose message says want.
	refused := func(t *testing.T, st *projection.State, typ, want string) {
		t.Helper()
		n := st.Nodes["n"]
		if st.Status != projection.RunFailed || n == nil || n.Error == nil {
			t.Fatalf("run %s: %s, node %+v; want it failed at n", st.RunID, st.Status, n)
		}
		if n.Error.Type != typ || n.Error.Retryable || !strings.Contains(n.Error.Message, want) {
			t.Fatalf("failure = %+v, want a non-retryable %s saying %q", n.Error, typ, want)
		}
	}

	t.Run("ssrf to loopback", func(t *testing.T) {
		st := run(t, map[string]any{"type": "http", "config": map[string]any{"url": canary.URL + "/admin"}})
		refused(t, st, builtin.FailureAddressDenied, "127.0.0.1:"+canary.port())
	})
	t.Run("ssrf to metadata", func(t *testing.T) {
		st := run(t, map[string]any{"type": "http", "config": map[string]any{"url": "http://169.254.169.254/latest/meta-data/"}})
		refused(t, st, builtin.FailureAddressDenied, "link-local")
	})
	t.Run("redirect to loopback", func(t *testing.T) {
		st := run(t, map[string]any{"type": "http", "config": map[string]any{"url": allowed.URL + "/redirect"}})
		refused(t, st, builtin.FailureAddressDenied, "loopback")
	})
	if n := canary.hits.Load(); n != 0 {
		t.Errorf("the canary got %d requests", n)
	}
	t.Run("oversized response", func(t *testing.T) {
		st := run(t, map[string]any{"type": "http", "config": map[string]any{"url": allowed.URL + "/big"}})
		refused(t, st, builtin.FailureResponseTooLarge, "1048576-byte limit")
	})
	t.Run("template bombs", func(t *testing.T) {
		st := run(t, map[string]any{"type": "llm", "config": map[string]any{"model": "m", "prompt": "{{range 1000000000000}}{{end}}"}})
		refused(t, st, builtin.FailureTemplateLimit, "range iterations")
		st = run(t, map[string]any{"type": "llm", "config": map[string]any{"model": "m", "prompt": "{{range 100000000}}xxxxxxxxxxxxxxxx{{end}}"}})
		refused(t, st, builtin.FailureTemplateLimit, "byte limit")
		// The worker serves on: an llm node within its limits completes.
		st = run(t, map[string]any{"type": "llm", "config": map[string]any{"model": "m", "prompt": "{{range 3}}hi {{end}}"}})
		if st.Status != projection.RunCompleted {
			t.Fatalf("a good llm run after the bombs: %s %+v", st.Status, st.Error)
		}
		if llmAuth.Load() != "Bearer "+llmKey {
			t.Errorf("the endpoint got Authorization %q", llmAuth.Load())
		}
	})
	t.Run("schema ref to a file", func(t *testing.T) {
		st := run(t, map[string]any{"type": "echo", "inputSchema": map[string]any{"$ref": "file:///etc/passwd"}})
		refused(t, st, "ValidationError", "may not load")
		if b, _ := json.Marshal(st); strings.Contains(string(b), "root:") {
			t.Errorf("the run shows /etc/passwd: %s", b)
		}
	})
	t.Run("llm key exfiltration refused at validation", func(t *testing.T) {
		for _, cfg := range []string{
			`{"model": "m", "prompt": "p", "baseURL": "` + canary.URL + `/v1"}`,
			`{"model": "m", "prompt": "p", "apiKeyEnv": "WEFT_NATS_PASSWORD"}`,
		} {
			doc := `{"name": "x", "nodes": [{"id": "n", "type": "llm", "config": ` + cfg + `}], "edges": [{"from": "START", "to": "n"}, {"from": "n", "to": "END"}]}`
			_, err := graph.Parse([]byte(doc), "x.json")
			if err == nil || !strings.Contains(err.Error(), `"endpoint": "NAME"`) || !strings.Contains(err.Error(), `node "n"`) {
				t.Errorf("%s: %v", cfg, err)
			}
		}
	})
	t.Run("secret header", func(t *testing.T) {
		st := run(t, map[string]any{"type": "http", "config": map[string]any{
			"url": allowed.URL + "/echo", "headers": map[string]string{"Authorization": "Bearer ${secret:API_TOKEN}"}}})
		if st.Status != projection.RunCompleted {
			t.Fatalf("run: %s %+v", st.Status, st.Error)
		}
		if sawToken.Load() != "Bearer "+apiToken {
			t.Errorf("the service got Authorization %q", sawToken.Load())
		}
		// Not to a host the allow-list does not name.
		st = run(t, map[string]any{"type": "http", "config": map[string]any{
			"url": "https://example.com/", "headers": map[string]string{"Authorization": "Bearer ${secret:API_TOKEN}"}}})
		refused(t, st, builtin.FailureAddressDenied, "secrets are sent only to hosts")
	})
	if n := canary.hits.Load(); n != 0 {
		t.Errorf("the canary got %d requests", n)
	}

	// Neither secret is in any message of the stream, nor in any output.
	admin := s.connect(t, userAdmin)
	str := mustStream(t, admin)
	info, err := str.Info(ctx)
	if err != nil {
		t.Fatal(err)
	}
	for seq := uint64(1); seq <= info.State.LastSeq; seq++ {
		m, err := str.GetMsg(ctx, seq)
		if err != nil {
			continue // deleted
		}
		raw := fmt.Sprintf("%s %v %s", m.Subject, m.Header, m.Data)
		for _, secret := range []string{apiToken, llmKey} {
			if strings.Contains(raw, secret) {
				t.Errorf("message %d on %s holds a secret: %s", seq, m.Subject, raw)
			}
		}
	}
	if info.State.Msgs == 0 {
		t.Error("no messages to search")
	}
	for _, f := range []string{workerLog, filepath.Join(dir, "coordinator.log")} {
		b, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		for _, secret := range []string{apiToken, llmKey} {
			if strings.Contains(string(b), secret) {
				t.Errorf("%s holds a secret", filepath.Base(f))
			}
		}
	}
	testkit.CheckNoViolations(t, dir)
}
