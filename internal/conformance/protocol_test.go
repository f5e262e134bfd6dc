package conformance

import (
	"bufio"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"maps"
	"os"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go"

	"github.com/weft-dev/weft/internal/eventlog"
	"github.com/weft-dev/weft/internal/natsconn"
	"github.com/weft-dev/weft/internal/testkit"
	"github.com/weft-dev/weft/internal/workqueue"
	"github.com/weft-dev/weft/pkg/client"
	"github.com/weft-dev/weft/pkg/events"
	"github.com/weft-dev/weft/pkg/graph"
	"github.com/weft-dev/weft/pkg/worker"
)

// The protocol document's tables against the code: each table marked
// <!-- conformance:table NAME --> in docs/worker-protocol.md is read and
// compared with what the code builds, so that a change to a subject, a
// header, an event type, an id, the queue consumer or the worker role on
// either side fails here.

const protocolDoc = "../../docs/worker-protocol.md"

// The document's example: run, queue, node charge, attempt 3, delivery 2,
// map item 2.
const (
	exRun   = "06h1c2dq3sbkce9j5fmrq0k7tg"
	exQueue = "default"
)

// docTables reads the marked tables of the document: name → rows, each
// row column → cell, code spans unwrapped.
func docTables(t *testing.T) map[string][]map[string]string {
	t.Helper()
	f, err := os.Open(protocolDoc)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	out := map[string][]map[string]string{}
	sc := bufio.NewScanner(f)
	name := ""
	var cols []string
	for sc.Scan() {
		line := strings.TrimSpace(sc.Text())
		if n, ok := strings.CutPrefix(line, "<!-- conformance:table "); ok {
			name, cols = strings.TrimSpace(strings.TrimSuffix(n, "-->")), nil
			if _, dup := out[name]; dup {
				t.Fatalf("table %q marked twice", name)
			}
			out[name] = nil
			continue
		}
		if name == "" {
			continue
		}
		if !strings.HasPrefix(line, "|") {
			if cols != nil {
				name = "" // the table ended
			}
			continue
		}
		cells := strings.Split(strings.Trim(line, "|"), "|")
		for i := range cells {
			cells[i] = strings.Trim(strings.TrimSpace(cells[i]), "`")
		}
		switch {
		case cols == nil:
			cols = cells
		case strings.HasPrefix(cells[0], "---"):
		default:
			row := map[string]string{}
			for i, c := range cols {
				if i < len(cells) {
					row[c] = cells[i]
				}
			}
			out[name] = append(out[name], row)
		}
	}
	for _, want := range []string{"subjects", "headers", "event-types", "ids", "failure-types", "consumer", "worker-permissions"} {
		if len(out[want]) == 0 {
			t.Fatalf("%s: no table %q (or it is empty)", protocolDoc, want)
		}
	}
	return out
}

func kindOf(t events.Type) string { k, _ := eventlog.Kind(t); return k }

func TestProtocolVersion(t *testing.T) {
	b, err := os.ReadFile(protocolDoc)
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(b), "This page defines **`"+worker.Protocol+"`**") {
		t.Fatalf("%s does not define worker.Protocol %q", protocolDoc, worker.Protocol)
	}
}

func TestProtocolSubjects(t *testing.T) {
	w := func(t events.Type) func(run, q string) string {
		return func(run, q string) string { return eventlog.Subject(run, eventlog.ClassWorker, kindOf(t), q) }
	}
	c := func(t events.Type) func(run, q string) string {
		return func(run, q string) string { return eventlog.Subject(run, eventlog.ClassClient, kindOf(t), q) }
	}
	code := map[string]func(run, q string) string{
		"run":            func(run, _ string) string { return eventlog.RunFilter(run) },
		"started":        func(run, _ string) string { return eventlog.StartedSubject(run) },
		"child-started":  func(run, _ string) string { return eventlog.ChildStartedSubject(run) },
		"signal":         c(events.SignalReceived),
		"cancelreq":      c(events.RunCancelRequested),
		"decisions":      func(run, _ string) string { return eventlog.DecisionFilter(run) },
		"ready":          eventlog.ReadySubject,
		"completed":      func(run, _ string) string { return eventlog.TerminalSubjects(run)[0] },
		"failed":         func(run, _ string) string { return eventlog.TerminalSubjects(run)[1] },
		"cancelled":      func(run, _ string) string { return eventlog.TerminalSubjects(run)[2] },
		"invoking":       w(events.NodeInvoking),
		"invoked":        w(events.NodeInvoked),
		"nodefailed":     w(events.NodeFailed),
		"nodecancelled":  w(events.NodeCanceled),
		"heartbeat":      w(events.Heartbeat),
		"queue":          func(_, q string) string { return eventlog.QueueFilter(q) },
		"worker-writes":  func(_, q string) string { return eventlog.WorkerFilter(q) },
		"all-cancelreqs": func(string, string) string { return eventlog.KindFilter(events.RunCancelRequested) },
	}
	// The terminal subjects are the ends' subjects, in this order.
	for i, typ := range []events.Type{events.RunCompleted, events.RunFailed, events.RunCancelled} {
		if got, want := eventlog.TerminalSubjects(exRun)[i], eventlog.Subject(exRun, eventlog.ClassCoordinator, kindOf(typ), ""); got != want {
			t.Errorf("terminal subject %d is %s, want %s's %s", i, got, typ, want)
		}
	}
	rows := docTables(t)["subjects"]
	seen := map[string]bool{}
	for _, r := range rows {
		name := r["name"]
		seen[name] = true
		f, ok := code[name]
		if !ok {
			t.Errorf("subjects: the document's %q is not one the test knows", name)
			continue
		}
		want := f(exRun, exQueue)
		if r["example"] != want {
			t.Errorf("subjects: %s: the document's example is %s, the code's %s", name, r["example"], want)
		}
		pattern := strings.NewReplacer("<slot>", eventlog.Slot(exRun), "<run>", exRun, "<queue>", exQueue).Replace(r["pattern"])
		if pattern != want {
			t.Errorf("subjects: %s: the document's pattern %s gives %s, the code's %s", name, r["pattern"], pattern, want)
		}
		// The kit's own slot and run base (from the document) agree.
		if strings.Contains(r["pattern"], "<slot>") && !strings.HasPrefix(want, runBase(exRun)) {
			t.Errorf("subjects: %s: %s does not start with the kit's run base %s", name, want, runBase(exRun))
		}
	}
	for name := range code {
		if !seen[name] {
			t.Errorf("subjects: the document has no row %q", name)
		}
	}
	// A worker's events go where the encoder puts them.
	for _, typ := range []events.Type{events.NodeInvoking, events.NodeInvoked, events.NodeFailed, events.NodeCanceled, events.Heartbeat} {
		p, _ := events.NewPayload(typ)
		ev, err := events.New(exRun, "x", time.Time{}, p)
		if err != nil {
			t.Fatal(err)
		}
		ev.Queue = exQueue
		m, err := eventlog.Encode(ev)
		if err != nil {
			t.Fatal(err)
		}
		if want := code[kindOf(typ)](exRun, exQueue); m.Subject != want {
			t.Errorf("%s is encoded on %s; the document says %s", typ, m.Subject, want)
		}
	}
}

func TestProtocolEventTypes(t *testing.T) {
	rows := docTables(t)["event-types"]
	var doc []events.Type
	u := natsconn.Deployment{Queues: []string{exQueue}}.User(natsconn.RoleWorker, exQueue)
	// What the worker role reads: direct gets by subject, its
	// subscriptions, and its queue's work items (through its consumer).
	readable := []string{eventlog.QueueFilter(exQueue)}
	readable = append(readable, u.SubscribeAllow...)
	for _, p := range u.PublishAllow {
		if s, ok := strings.CutPrefix(p, "$JS.API.DIRECT.GET.WEFT."); ok {
			readable = append(readable, s)
		}
	}
	for _, r := range rows {
		typ := events.Type(r["type"])
		doc = append(doc, typ)
		kind, ok := eventlog.Kind(typ)
		if !ok {
			t.Errorf("event-types: %s is not in the catalogue", typ)
			continue
		}
		if r["kind"] != kind || r["class"] != eventlog.Class(typ) {
			t.Errorf("event-types: %s: the document says kind %s class %s, the code kind %s class %s", typ, r["kind"], r["class"], kind, eventlog.Class(typ))
		}
		subject := eventlog.Subject(exRun, eventlog.Class(typ), kind, exQueue)
		reads := eventlog.SubjectsCover(readable, subject)
		want := "—"
		switch {
		case eventlog.Class(typ) == eventlog.ClassWorker:
			want = "writes"
			if !eventlog.SubjectsCover([]string{eventlog.WorkerFilter(exQueue)}, subject) {
				t.Errorf("event-types: %s: the worker may not publish %s", typ, subject)
			}
		case reads:
			want = "reads"
		}
		if r["worker"] != want {
			t.Errorf("event-types: %s: the document says the worker %s it, the roles say %s", typ, r["worker"], want)
		}
	}
	if !slices.Equal(doc, events.Types()) {
		t.Errorf("event-types: the document lists %q, the catalogue %q", doc, events.Types())
	}
}

func TestProtocolHeaders(t *testing.T) {
	rows := docTables(t)["headers"]
	on := map[string][]string{}
	for _, r := range rows {
		on[r["written on"]] = append(on[r["written on"]], r["header"])
	}
	for _, c := range []struct {
		what  string
		build func() *events.Event
		want  []string
	}{
		{"a run.started without trace context", func() *events.Event {
			ev, _ := events.New(exRun, exRun, time.Time{}, &events.RunStartedData{GraphName: "g"})
			return ev
		}, on["every event"]},
		{"a traced node.invoked", func() *events.Event {
			ev, _ := events.New(exRun, "x", time.Time{}, &events.NodeInvokedData{NodeRef: events.NodeRef{Node: "a", Iteration: 1}, Attempt: 2})
			ev.Queue, ev.TraceParent, ev.TraceState = exQueue, "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01", "k=v"
			return ev
		}, slices.Concat(on["every event"], on["node-scoped events"], on["traced events"])},
	} {
		m, err := eventlog.Encode(c.build())
		if err != nil {
			t.Fatal(err)
		}
		got := slices.Sorted(maps.Keys(m.Header))
		want := slices.Sorted(slices.Values(c.want))
		if !slices.Equal(got, want) {
			t.Errorf("headers: %s is encoded with %q; the document says %q", c.what, got, want)
		}
	}
	if h := on["decisions"]; !slices.Equal(h, []string{eventlog.HdrCheckpoint}) {
		t.Errorf("headers: the document's decision headers %q, the code's %q", h, eventlog.HdrCheckpoint)
	}
	if h := on["restored messages"]; !slices.Equal(h, []string{eventlog.HdrRestored}) {
		t.Errorf("headers: the document's restored-message headers %q, the code's %q", h, eventlog.HdrRestored)
	}

	// What a client's start puts on the wire, heard as it is published.
	srv, st := testkit.Store(t)
	nc, _ := testkit.Connect(t, srv)
	heard := make(chan *nats.Msg, 1)
	sub, err := nc.ChanSubscribe(eventlog.KindFilter(events.RunStarted), heard)
	if err != nil {
		t.Fatal(err)
	}
	defer sub.Unsubscribe()
	if err := nc.Flush(); err != nil {
		t.Fatal(err)
	}
	g, err := graph.Parse([]byte(`{"name":"g","nodes":[{"id":"a","type":"conf.echo"}],"edges":[{"from":"START","to":"a"},{"from":"a","to":"END"}]}`), "test", graph.AllowAnyType())
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	run, err := client.New(st).Start(ctx, g, client.WithRunID(exRun))
	if err != nil {
		t.Fatal(err)
	}
	var m *nats.Msg
	select {
	case m = <-heard:
	case <-ctx.Done():
		t.Fatal("the run-started was not heard")
	}
	want := slices.Sorted(slices.Values(slices.Concat(on["every event"], on["run-started"])))
	if got := slices.Sorted(maps.Keys(m.Header)); !slices.Equal(got, want) {
		t.Errorf("headers: a client's run.started goes with %q; the document says %q", got, want)
	}
	if got := m.Header.Get("Nats-Expected-Last-Subject-Sequence"); got != "0" {
		t.Errorf("run.started: Nats-Expected-Last-Subject-Sequence %q, the document says 0", got)
	}
	if got := m.Header.Get("Nats-Expected-Last-Subject-Sequence-Subject"); got != eventlog.RunFilter(run) {
		t.Errorf("run.started: Nats-Expected-Last-Subject-Sequence-Subject %q, the document says the run's filter %s", got, eventlog.RunFilter(run))
	}
	// The digest is sha256 over the graph's bytes as stored.
	if id := m.Header.Get("ce-id"); id != run || m.Header.Get("Nats-Msg-Id") != run {
		t.Errorf("run.started: ce-id %q, Nats-Msg-Id %q; the document says the run id %s", id, m.Header.Get("Nats-Msg-Id"), run)
	}
	var data events.RunStartedData
	if err := json.Unmarshal(m.Data, &data); err != nil {
		t.Fatal(err)
	}
	sum := sha256.Sum256(data.Graph)
	if want := "sha256:" + hex.EncodeToString(sum[:]); data.GraphDigest != want {
		t.Errorf("run.started: graphDigest %s, but sha256 of its graph's bytes is %s", data.GraphDigest, want)
	}
}

func TestProtocolIDs(t *testing.T) {
	item := 2
	ref := events.NodeRef{Node: "charge", Iteration: 1}
	mapRef := events.NodeRef{Node: "charge", Iteration: 1, Item: &item}
	const attempt, delivery = 3, 2
	a, d := strconv.Itoa(attempt), strconv.Itoa(delivery)
	code := map[string]string{
		"ref key":                          ref.Key(),
		"ref key (map item)":               mapRef.Key(),
		"node.invoking":                    eventlog.DecisionID(exRun, events.NodeInvoking, ref.Key(), a, d),
		"node.invoked":                     eventlog.DecisionID(exRun, events.NodeInvoked, ref.Key(), a, d),
		"node.failed":                      eventlog.DecisionID(exRun, events.NodeFailed, ref.Key(), a, d),
		"node.cancelled":                   eventlog.DecisionID(exRun, events.NodeCanceled, ref.Key(), a, d),
		"node.heartbeat":                   eventlog.DecisionID(exRun, events.Heartbeat, ref.Key(), a, d, "1"),
		"idempotency key":                  eventlog.IdempotencyKey(exRun, ref, attempt),
		"idempotency key (map item)":       eventlog.IdempotencyKey(exRun, mapRef, attempt),
		"run.started":                      exRun,
		"run.cancel_requested":             eventlog.DecisionID(exRun, events.RunCancelRequested),
		"run.cancel_requested (terminate)": eventlog.DecisionID(exRun, events.RunCancelRequested, "terminate"),
		"signal.received (with an id)":     eventlog.DecisionID(exRun, events.SignalReceived, "approve-42"),
	}
	// The kit's own formulas, written from the document, agree.
	kit := map[string]string{
		"ref key":                    refKey("charge", 1, nil),
		"ref key (map item)":         refKey("charge", 1, &item),
		"node.invoking":              outcomeID(exRun, "invoking", "charge/1", attempt, delivery),
		"node.invoked":               outcomeID(exRun, "invoked", "charge/1", attempt, delivery),
		"node.failed":                outcomeID(exRun, "nodefailed", "charge/1", attempt, delivery),
		"node.cancelled":             outcomeID(exRun, "nodecancelled", "charge/1", attempt, delivery),
		"idempotency key":            idempotencyKey(exRun, "charge/1", attempt),
		"idempotency key (map item)": idempotencyKey(exRun, "charge/1/2", attempt),
	}
	vars := strings.NewReplacer("<run>", exRun, "<key>", ref.Key(), "<node>", "charge", "<iteration>", "1", "<item>", "2",
		"<attempt>", a, "<delivery>", d, "<n>", "1", "<signal id>", "approve-42")
	seen := map[string]bool{}
	for _, r := range docTables(t)["ids"] {
		name := r["id of"]
		seen[name] = true
		want, ok := code[name]
		if !ok {
			t.Errorf("ids: the document's %q is not one the test knows", name)
			continue
		}
		if r["example"] != want {
			t.Errorf("ids: %s: the document's example %q, the code's %q", name, r["example"], want)
		}
		if k, ok := kit[name]; ok && k != want {
			t.Errorf("ids: %s: the kit computes %q, the code %q", name, k, want)
		}
		formula := r["formula"]
		if strings.Contains(formula, "[") {
			continue // the ref key's optional part: the two rows' examples say it
		}
		got := vars.Replace(formula)
		if inner, ok := strings.CutPrefix(got, `hex(sha256("`); ok {
			inner, rest, _ := strings.Cut(inner, `"))`)
			if rest != "[0:32]" {
				t.Errorf("ids: %s: formula %q: want hex(sha256(\"…\"))[0:32]", name, formula)
			}
			sum := sha256.Sum256([]byte(inner))
			got = hex.EncodeToString(sum[:])[:32]
		}
		if got != want {
			t.Errorf("ids: %s: the document's formula %q gives %q, the code %q", name, formula, got, want)
		}
	}
	for name := range code {
		if !seen[name] {
			t.Errorf("ids: the document has no row %q", name)
		}
	}
}

func TestProtocolFailureTypes(t *testing.T) {
	code := map[string]bool{ // type → retryable, as the worker writes it
		"Error":                        true,
		events.FailureTimeout:          true,
		events.FailureValidation:       false,
		events.FailurePayloadTooLarge:  false,
		events.FailurePanic:            false,
		worker.FailureRunNotFound:      false,
		worker.FailureRunStartMismatch: false,
		events.FailureInvalidGraph:     false,
		events.FailureRateLimited:      true,
	}
	got := map[string]bool{}
	for _, r := range docTables(t)["failure-types"] {
		got[r["type"]] = r["retryable"] == "yes"
	}
	if !maps.Equal(got, code) {
		t.Errorf("failure-types: the document has %v, the code %v", got, code)
	}
}

func TestProtocolConsumer(t *testing.T) {
	cfg := workqueue.QueueConfig(exQueue, workqueue.QueueOptions{})
	b, err := json.Marshal(cfg)
	if err != nil {
		t.Fatal(err)
	}
	var wire map[string]any
	if err := json.Unmarshal(b, &wire); err != nil {
		t.Fatal(err)
	}
	for _, r := range docTables(t)["consumer"] {
		field, want := r["field"], strings.ReplaceAll(r["value"], "<queue>", exQueue)
		var got string
		switch field {
		case "opt_start_seq":
			continue // set when created (workqueue.EnsureQueue)
		case "ack_wait":
			got = cfg.AckWait.String()
		default:
			v, ok := wire[field]
			if !ok {
				t.Errorf("consumer: the document's field %s is not in the queue consumer's configuration %s", field, b)
				continue
			}
			got = strings.Trim(string(mustJSON(v)), `"`)
		}
		if got != want {
			t.Errorf("consumer: %s: the document says %s, the code %s", field, want, got)
		}
	}
}

func TestProtocolWorkerPermissions(t *testing.T) {
	const q = "QUEUE"
	u := natsconn.Deployment{Queues: []string{q}}.User(natsconn.RoleWorker, q)
	var pub, sub []string
	for _, r := range docTables(t)["worker-permissions"] {
		s := strings.ReplaceAll(r["subject"], "<queue>", q)
		switch r["direction"] {
		case "publish":
			pub = append(pub, s)
		case "subscribe":
			sub = append(sub, s)
		default:
			t.Errorf("worker-permissions: direction %q", r["direction"])
		}
	}
	if got, want := slices.Sorted(slices.Values(pub)), slices.Sorted(slices.Values(u.PublishAllow)); !slices.Equal(got, want) {
		t.Errorf("worker-permissions: the document's publish rights %q, the role's %q", got, want)
	}
	if got, want := slices.Sorted(slices.Values(sub)), slices.Sorted(slices.Values(u.SubscribeAllow)); !slices.Equal(got, want) {
		t.Errorf("worker-permissions: the document's subscribe rights %q, the role's %q", got, want)
	}
	if len(u.PublishDeny) > 0 {
		t.Errorf("worker-permissions: the role has deny rules %q the document does not show", u.PublishDeny)
	}
}
