// Package gateway is Weft's HTTP face ('weft serve'): POST endpoints to
// start a run and to signal a node, idempotent through an Idempotency-Key
// header, for callers holding an API token; and webhooks, which verify an
// HMAC signature with a timestamp before they hand the body to an event
// trigger (internal/trigger), which maps it to a run exactly once.
//
//	POST /v1/runs                  {"graph": {…definition…}, "input": {…}}
//	POST /v1/runs/{run}/signal     {"node": "approve", "data": …}
//	POST /v1/webhooks/{name}       any body; header Weft-Signature
//
// The first two need "Authorization: Bearer <token>", one of the tokens
// the gateway was given (each names a caller, recorded as the run's or
// signal's sender). With an Idempotency-Key, a request sent again starts
// no second run (the run id is derived from the caller's token and the
// key, so no one else can take it) and applies its signal once (the
// signal's id is derived from the key).
//
// A webhook's signature is the Stripe scheme: "t=<unix seconds>,v1=<hex
// HMAC-SHA256 of "<t>.<body>" with the webhook's secret>". A signature
// that does not verify, or whose timestamp is more than the tolerance
// away from the gateway's clock, is refused (401) and nothing is
// published. A verified body is published to the webhook's subject with
// Nats-Msg-Id derived from the signature, so that the same delivery
// replayed within the tolerance is the same message: one run.
package gateway

import (
	"context"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/weft-dev/weft/internal/eventlog"
	"github.com/weft-dev/weft/internal/logattr"
	"github.com/weft-dev/weft/pkg/client"
	"github.com/weft-dev/weft/pkg/events"
	"github.com/weft-dev/weft/pkg/graph"
)

// MaxBody bounds a request body.
const MaxBody = 1 << 20

// DefaultTolerance is how far a webhook's timestamp may be from now.
const DefaultTolerance = 5 * time.Minute

// Webhook is a webhook: its secret and the subject its bodies go to (an
// event trigger's).
type Webhook struct {
	Secret  []byte
	Subject string
}

// Config is the gateway's configuration.
type Config struct {
	// Tokens maps an API token to its caller's name.
	Tokens   map[string]string
	Webhooks map[string]Webhook
	// Tolerance of webhook timestamps (default DefaultTolerance).
	Tolerance time.Duration
	Log       *slog.Logger
	// Now is the clock (default time.Now).
	Now func() time.Time
}

// Handler returns the gateway over store: runs and signals through
// clients made with opts (each recorded as "<caller> via weft serve"),
// webhooks published on the store's connection.
func Handler(store events.Store, opts []client.Option, cfg Config) http.Handler {
	if cfg.Tolerance == 0 {
		cfg.Tolerance = DefaultTolerance
	}
	if cfg.Log == nil {
		cfg.Log = slog.Default()
	}
	if cfg.Now == nil {
		cfg.Now = time.Now
	}
	g := &gateway{store: store, opts: opts, js: eventlog.JetStream(store), cfg: cfg}
	mux := http.NewServeMux()
	mux.HandleFunc("POST /v1/runs", g.auth(g.start))
	mux.HandleFunc("POST /v1/runs/{run}/signal", g.auth(g.signal))
	mux.HandleFunc("POST /v1/webhooks/{name}", g.webhook)
	return mux
}

type gateway struct {
	store events.Store
	opts  []client.Option
	js    jetstream.JetStream
	cfg   Config
}

// client is a client that records what it does as the caller's.
func (g *gateway) client(c caller) *client.Client {
	return client.New(g.store, append(g.opts[:len(g.opts):len(g.opts)], client.WithIdentity(c.name+" via weft serve"))...)
}

// problem writes an error as JSON.
func problem(w http.ResponseWriter, code int, msg string) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(code)
	_ = json.NewEncoder(w).Encode(map[string]string{"error": msg})
}

func reply(w http.ResponseWriter, code int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(code)
	_ = json.NewEncoder(w).Encode(v)
}

type caller struct{ name, token string }

func (g *gateway) auth(next func(http.ResponseWriter, *http.Request, caller)) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		tok, ok := strings.CutPrefix(r.Header.Get("Authorization"), "Bearer ")
		name, known := g.cfg.Tokens[tok]
		if !ok || tok == "" || !known {
			problem(w, http.StatusUnauthorized, "an API token is required: Authorization: Bearer <token>")
			return
		}
		next(w, r, caller{name: name, token: tok})
	}
}

// idempotencyKey reads the header: at most 128 printable characters.
func idempotencyKey(r *http.Request) (string, error) {
	k := r.Header.Get("Idempotency-Key")
	if len(k) > 128 {
		return "", errors.New("Idempotency-Key: at most 128 characters")
	}
	for _, c := range k {
		if c < 0x21 || c > 0x7e {
			return "", errors.New("Idempotency-Key: printable ASCII only")
		}
	}
	return k, nil
}

// keyed derives an id from the caller's token and the key: the same for
// the same caller and key, unguessable for anyone without the token.
func keyed(token, purpose, key string) string {
	m := hmac.New(sha256.New, []byte(token))
	m.Write([]byte(purpose + "\x00" + key))
	return eventlog.B32.EncodeToString(m.Sum(nil)[:15])
}

type startRequest struct {
	Graph      json.RawMessage `json:"graph"`
	Input      json.RawMessage `json:"input"`
	Invocation json.RawMessage `json:"invocation"`
}

func (g *gateway) start(w http.ResponseWriter, r *http.Request, c caller) {
	key, err := idempotencyKey(r)
	if err != nil {
		problem(w, http.StatusBadRequest, err.Error())
		return
	}
	var req startRequest
	dec := json.NewDecoder(http.MaxBytesReader(w, r.Body, MaxBody))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&req); err != nil {
		problem(w, http.StatusBadRequest, "body: "+err.Error())
		return
	}
	if len(req.Graph) == 0 {
		problem(w, http.StatusBadRequest, "body: graph: required (a graph definition, as JSON)")
		return
	}
	gr, err := graph.Parse(req.Graph, "graph")
	if err != nil {
		problem(w, http.StatusUnprocessableEntity, err.Error())
		return
	}
	opts := []client.StartOption{}
	if len(req.Input) > 0 {
		opts = append(opts, client.WithInput(req.Input))
	}
	if len(req.Invocation) > 0 {
		opts = append(opts, client.WithInvocation(req.Invocation))
	}
	if key != "" {
		opts = append(opts, client.WithRunID("h-"+keyed(c.token, "start", key)))
	}
	run, err := g.client(c).Start(r.Context(), gr, opts...)
	switch {
	case errors.Is(err, events.ErrRunExists) && key != "":
		// The same request again: the run it started.
		reply(w, http.StatusOK, map[string]any{"runId": "h-" + keyed(c.token, "start", key), "replayed": true})
	case errors.Is(err, client.ErrInvalidInput):
		problem(w, http.StatusBadRequest, err.Error())
	case err != nil:
		g.cfg.Log.Warn("starting a run over HTTP", logattr.Caller, c.name, logattr.Error, err)
		problem(w, http.StatusServiceUnavailable, err.Error())
	default:
		reply(w, http.StatusCreated, map[string]any{"runId": run})
	}
}

type signalRequest struct {
	Node string          `json:"node"`
	Data json.RawMessage `json:"data"`
}

func (g *gateway) signal(w http.ResponseWriter, r *http.Request, c caller) {
	key, err := idempotencyKey(r)
	if err != nil {
		problem(w, http.StatusBadRequest, err.Error())
		return
	}
	run := r.PathValue("run")
	var req signalRequest
	dec := json.NewDecoder(http.MaxBytesReader(w, r.Body, MaxBody))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&req); err != nil || req.Node == "" {
		problem(w, http.StatusBadRequest, fmt.Sprintf("body: want {\"node\": …, \"data\": …}: %v", err))
		return
	}
	var opts []client.SignalOption
	sigID := "h-" + keyed(c.token, "signal", key)
	if key != "" {
		opts = append(opts, client.WithSignalID(sigID))
	}
	var data any
	if len(req.Data) > 0 {
		data = req.Data
	}
	cl := g.client(c)
	err = cl.Signal(r.Context(), run, req.Node, data, opts...)
	if err != nil && key != "" && g.sent(r.Context(), cl, run, sigID) {
		// The same request again, after the first moved the run on (or
		// ended it): what it did stands.
		reply(w, http.StatusOK, map[string]any{"runId": run, "node": req.Node, "replayed": true})
		return
	}
	switch {
	case errors.Is(err, events.ErrRunNotFound):
		problem(w, http.StatusNotFound, err.Error())
	case errors.Is(err, client.ErrRunEnded), errors.Is(err, graph.ErrUnknownNode), errors.Is(err, client.ErrInvalidInput):
		problem(w, http.StatusConflict, err.Error())
	case err != nil:
		problem(w, http.StatusServiceUnavailable, err.Error())
	default:
		reply(w, http.StatusAccepted, map[string]any{"runId": run, "node": req.Node})
	}
}

// ErrSignature is a webhook request whose signature does not verify.
var ErrSignature = errors.New("webhook signature")

// Verify checks a Weft-Signature header over body with secret at now.
func Verify(header string, body, secret []byte, now time.Time, tolerance time.Duration) error {
	var ts string
	var sigs []string
	for part := range strings.SplitSeq(header, ",") {
		k, v, _ := strings.Cut(strings.TrimSpace(part), "=")
		switch k {
		case "t":
			ts = v
		case "v1":
			sigs = append(sigs, v)
		}
	}
	sec, err := strconv.ParseInt(ts, 10, 64)
	if err != nil || len(sigs) == 0 {
		return fmt.Errorf("%w: want Weft-Signature: t=<unix seconds>,v1=<hex HMAC-SHA256>", ErrSignature)
	}
	at := time.Unix(sec, 0)
	if d := now.Sub(at); d > tolerance || d < -tolerance {
		return fmt.Errorf("%w: timestamp %s is %s from now, the tolerance is %s (a replayed or delayed delivery)", ErrSignature, at.UTC().Format(time.RFC3339), d.Round(time.Second), tolerance)
	}
	want := Sign(secret, sec, body)
	for _, s := range sigs {
		if hmac.Equal([]byte(s), []byte(want)) {
			return nil
		}
	}
	return fmt.Errorf("%w: no v1 signature matches", ErrSignature)
}

// Sign is the v1 signature of body at unix time t.
func Sign(secret []byte, t int64, body []byte) string {
	m := hmac.New(sha256.New, secret)
	m.Write([]byte(strconv.FormatInt(t, 10) + "."))
	m.Write(body)
	return hex.EncodeToString(m.Sum(nil))
}

func (g *gateway) webhook(w http.ResponseWriter, r *http.Request) {
	name := r.PathValue("name")
	hook, ok := g.cfg.Webhooks[name]
	if !ok {
		problem(w, http.StatusNotFound, "no webhook "+name)
		return
	}
	body, err := io.ReadAll(http.MaxBytesReader(w, r.Body, MaxBody))
	if err != nil {
		problem(w, http.StatusRequestEntityTooLarge, err.Error())
		return
	}
	sig := r.Header.Get("Weft-Signature")
	if err := Verify(sig, body, hook.Secret, g.cfg.Now(), g.cfg.Tolerance); err != nil {
		g.cfg.Log.Warn("a webhook request refused", logattr.Webhook, name, logattr.Error, err)
		problem(w, http.StatusUnauthorized, err.Error())
		return
	}
	m := nats.NewMsg(hook.Subject)
	m.Data = body
	// The same delivery (same timestamp and signature) is the same message.
	sum := sha256.Sum256([]byte(sig))
	m.Header.Set(nats.MsgIdHdr, "wh-"+name+"-"+hex.EncodeToString(sum[:12]))
	m.Header.Set("Weft-Webhook", name)
	ctx, cancel := context.WithTimeout(r.Context(), 10*time.Second)
	defer cancel()
	ack, err := g.js.PublishMsg(ctx, m)
	if err != nil {
		problem(w, http.StatusServiceUnavailable, err.Error())
		return
	}
	reply(w, http.StatusAccepted, map[string]any{"webhook": name, "messageId": m.Header.Get(nats.MsgIdHdr), "duplicate": ack.Duplicate})
}

// sent reports whether run's log holds the signal of id.
func (g *gateway) sent(ctx context.Context, cl *client.Client, run, id string) bool {
	evs, err := cl.History(ctx, run)
	if err != nil {
		return false
	}
	want := eventlog.DecisionID(run, events.SignalReceived, id)
	for _, e := range evs {
		if e.ID == want {
			return true
		}
	}
	return false
}
