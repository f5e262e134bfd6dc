package cli

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"slices"
	"strings"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/weft-dev/weft/internal/coordinator"
	"github.com/weft-dev/weft/internal/eventlog"
	"github.com/weft-dev/weft/internal/natsconn"
	"github.com/weft-dev/weft/internal/setup"
	"github.com/weft-dev/weft/internal/workqueue"
)

// Weft's daemons create the stream, consumers and KV buckets they miss,
// and use existing ones as they are (see package events). 'weft admin' is
// where an operator sees the live settings and changes them on purpose.

var cmdAdmin = &command{
	name:    "admin",
	args:    "settings|apply|reindex|retention|restore",
	summary: "show the live stream, consumer and KV settings, or change them",
	help: `'weft admin settings' shows the live settings of the events stream, its
consumers (the coordinators' partitions and each task queue's) and Weft's
KV buckets (coordinator leases, snapshots, worker announcements),
and any setting Weft cannot run with.

'weft admin apply' changes them on purpose, and prints what changed:
  -replicas N     the stream's and the KV buckets' replicas
  -duplicates D   the stream's de-duplication window (at least 1m)
  -max-age D      how long the stream keeps events (0: forever)
  -ack-wait D     the ack wait of the task queues' consumers (-queue Q: one)
It also sets what Weft relies on and an update can set (the stream's
subjects, direct gets and atomic batches): run it
with no change flags when a daemon refuses a stream. Only the settings
given change, by flag or by their environment variable (WEFT_REPLICAS,
WEFT_DUPLICATES, WEFT_MAX_AGE); -dry-run shows the changes without making
them.

'weft admin reindex' rebuilds the read model of runs from the log, and
'weft admin retention' removes (and archives) the ended runs whose
retention passed, and 'weft admin restore RUN...' puts archived runs back.

Run 'weft admin settings -h' or 'weft admin apply -h' for the flags.`,
	run: func(e *env, c *command, args []string) error {
		if len(args) == 0 || strings.HasPrefix(args[0], "-") {
			if len(args) > 0 && (args[0] == "-h" || args[0] == "-help" || args[0] == "--help") {
				fs, _ := e.flagSet(c)
				e.printHelp(c, fs)
				return flag.ErrHelp
			}
			return &usageError{cmd: c, msg: "want settings or apply"}
		}
		switch args[0] {
		case "settings":
			return adminSettings(e, cmdAdminSettings, args[1:])
		case "apply":
			return adminApply(e, cmdAdminApply, args[1:])
		case "reindex":
			return adminReindex(e, cmdAdminReindex, args[1:])
		case "retention":
			return adminRetention(e, cmdAdminRetention, args[1:])
		case "restore":
			return adminRestore(e, cmdAdminRestore, args[1:])
		}
		return &usageError{cmd: c, msg: fmt.Sprintf("unknown admin command %q (want settings, apply, reindex, retention or restore)", args[0])}
	},
}

var cmdAdminSettings = &command{
	name: "admin settings",
	help: `Shows the live settings of the events stream, its consumers and Weft's KV
buckets, and any setting Weft cannot run with.`,
}

var cmdAdminApply = &command{
	name: "admin apply",
	help: `Changes the live settings given (by flag or environment variable) and sets
what Weft relies on, then prints what changed. See 'weft help admin'.`,
}

// dial connects for an admin command and returns the JetStream context.
func (e *env) dial(c *command, cfg *natsconn.Config) (jetstream.JetStream, func(), error) {
	if err := cfg.Validate(); err != nil {
		return nil, nil, &usageError{cmd: c, msg: err.Error()}
	}
	nc, err := e.dialAs(c, cfg, natsconn.RoleAdmin)
	if err != nil {
		return nil, nil, err
	}
	js, err := jetstream.New(nc)
	if err != nil {
		nc.Close()
		return nil, nil, err
	}
	return js, nc.Close, nil
}

// liveStream returns the events stream.
func liveStream(ctx context.Context, js jetstream.JetStream, name string) (jetstream.Stream, error) {
	s, err := js.Stream(ctx, name)
	if errors.Is(err, jetstream.ErrStreamNotFound) {
		return nil, fmt.Errorf("no stream %q on the NATS server at %s: nothing has run there yet, or -stream (WEFT_STREAM) names another stream", name, js.Conn().ConnectedUrlRedacted())
	}
	if err != nil {
		return nil, fmt.Errorf("looking up stream %q: %w", name, err)
	}
	return s, nil
}

// Settings are the live settings 'weft admin settings' shows.
type Settings struct {
	Stream    StreamSettings     `json:"stream"`
	Consumers []ConsumerSettings `json:"consumers"`
	Buckets   []BucketSettings   `json:"buckets"`
	// Problems are the settings Weft cannot run with.
	Problems []string `json:"problems,omitempty"`
}

// StreamSettings are the events stream's.
type StreamSettings struct {
	Name               string   `json:"name"`
	Subjects           []string `json:"subjects"`
	Storage            string   `json:"storage"`
	Replicas           int      `json:"replicas"`
	Duplicates         string   `json:"duplicates"`
	MaxAge             string   `json:"maxAge"`
	Retention          string   `json:"retention"`
	AllowDirect        bool     `json:"allowDirect"`
	AllowMsgSchedules  bool     `json:"allowMsgSchedules"`
	AllowMsgTTL        bool     `json:"allowMsgTTL"`
	AllowAtomicPublish bool     `json:"allowAtomicPublish"`
	Messages           uint64   `json:"messages"`
	Bytes              uint64   `json:"bytes"`
}

// ConsumerSettings are a consumer's of the events stream.
type ConsumerSettings struct {
	Name string `json:"name"`
	// Kind is "coordinator", "queue" or "other".
	Kind          string   `json:"kind"`
	Queue         string   `json:"queue,omitempty"`
	Filters       []string `json:"filters,omitempty"`
	AckPolicy     string   `json:"ackPolicy"`
	AckWait       string   `json:"ackWait"`
	MaxAckPending int      `json:"maxAckPending"`
	MaxDeliver    int      `json:"maxDeliver"`
	Replicas      int      `json:"replicas"`
	Pending       uint64   `json:"pending"`
	AckPending    int      `json:"ackPending"`
}

// BucketSettings are a KV bucket's.
type BucketSettings struct {
	Name     string `json:"name"`
	Missing  bool   `json:"missing,omitempty"`
	Replicas int    `json:"replicas,omitempty"`
	TTL      string `json:"ttl,omitempty"`
	History  int64  `json:"history,omitempty"`
	Values   uint64 `json:"values,omitempty"`
}

// buckets are Weft's KV buckets.
var buckets = []string{coordinator.LeasesBucket, coordinator.SnapshotsBucket, workqueue.WorkersBucket}

func adminSettings(e *env, c *command, args []string) error {
	flags := func(fs *flag.FlagSet) action {
		return action{do: func(e *env, x *call) error {
			cfg, js := x.nats, x.js
			ctx, cancel := context.WithTimeout(e.ctx, 30*time.Second)
			defer cancel()
			set, err := readSettings(ctx, js, cfg.Stream)
			if err != nil {
				return err
			}
			if x.out == "json" {
				return e.writeJSON(set)
			}
			writeSettings(e.stdout, set)
			return nil
		}}
	}
	return e.skeleton(c.with(0, 0, connJetStream, flags), args)
}

func readSettings(ctx context.Context, js jetstream.JetStream, stream string) (*Settings, error) {
	s, err := liveStream(ctx, js, stream)
	if err != nil {
		return nil, err
	}
	info := s.CachedInfo()
	sc := info.Config
	set := &Settings{Stream: StreamSettings{
		Name: sc.Name, Subjects: sc.Subjects, Storage: strings.ToLower(sc.Storage.String()), Replicas: max(sc.Replicas, 1),
		Duplicates: sc.Duplicates.String(), MaxAge: age(sc.MaxAge), Retention: strings.ToLower(sc.Retention.String()),
		AllowDirect: sc.AllowDirect, AllowMsgSchedules: sc.AllowMsgSchedules, AllowMsgTTL: sc.AllowMsgTTL, AllowAtomicPublish: sc.AllowAtomicPublish,
		Messages: info.State.Msgs, Bytes: info.State.Bytes,
	}}
	set.Problems = unsafeSettings(eventlog.CheckStream(sc))
	lister := s.ListConsumers(ctx)
	for ci := range lister.Info() {
		cs := consumerSettings(ci)
		set.Consumers = append(set.Consumers, cs)
		if cs.Kind == "coordinator" {
			set.Problems = append(set.Problems, unsafeSettings(coordinator.CheckConsumer(stream, ci.Config))...)
		}
	}
	if err := lister.Err(); err != nil {
		return nil, fmt.Errorf("listing the consumers of %s: %w", stream, err)
	}
	slices.SortFunc(set.Consumers, func(a, b ConsumerSettings) int { return strings.Compare(a.Name, b.Name) })
	for _, name := range buckets {
		b := BucketSettings{Name: name}
		kv, err := js.KeyValue(ctx, name)
		switch {
		case errors.Is(err, jetstream.ErrBucketNotFound):
			b.Missing = true
		case err != nil:
			return nil, fmt.Errorf("opening KV bucket %s: %w", name, err)
		default:
			st, err := kv.Status(ctx)
			if err != nil {
				return nil, fmt.Errorf("reading KV bucket %s: %w", name, err)
			}
			b.TTL, b.History, b.Values = age(st.TTL()), st.History(), st.Values()
			if bs, ok := st.(*jetstream.KeyValueBucketStatus); ok {
				b.Replicas = max(bs.StreamInfo().Config.Replicas, 1)
			}
		}
		set.Buckets = append(set.Buckets, b)
	}
	return set, nil
}

func consumerSettings(ci *jetstream.ConsumerInfo) ConsumerSettings {
	cc := ci.Config
	cs := ConsumerSettings{
		Name: ci.Name, Kind: "other", Filters: cc.FilterSubjects,
		AckPolicy: strings.ToLower(cc.AckPolicy.String()), AckWait: cc.AckWait.String(),
		MaxAckPending: cc.MaxAckPending, MaxDeliver: cc.MaxDeliver, Replicas: cc.Replicas,
		Pending: ci.NumPending, AckPending: ci.NumAckPending,
	}
	if cc.FilterSubject != "" {
		cs.Filters = append([]string{cc.FilterSubject}, cs.Filters...)
	}
	if q, ok := workqueue.QueueName(ci.Name); ok {
		cs.Kind, cs.Queue = "queue", q
	} else if strings.HasPrefix(cc.Description, "Weft coordinator") || strings.HasPrefix(ci.Name, "coordinator") {
		cs.Kind = "coordinator"
	}
	return cs
}

func unsafeSettings(err error) []string {
	if err == nil {
		return nil
	}
	var out []string
	if j, ok := err.(interface{ Unwrap() []error }); ok {
		for _, e := range j.Unwrap() {
			out = append(out, e.Error())
		}
		return out
	}
	return []string{err.Error()}
}

func age(d time.Duration) string {
	if d == 0 {
		return "forever"
	}
	return d.String()
}

func yesNo(b bool) string {
	if b {
		return "yes"
	}
	return "no"
}

func writeSettings(w io.Writer, set *Settings) {
	s := set.Stream
	tw := table(w)
	fmt.Fprintf(tw, "stream %s\n", s.Name)
	fmt.Fprintf(tw, "  subjects\t%s\n", strings.Join(s.Subjects, ", "))
	fmt.Fprintf(tw, "  storage\t%s\n", s.Storage)
	fmt.Fprintf(tw, "  replicas\t%d\n", s.Replicas)
	fmt.Fprintf(tw, "  duplicates window\t%s\n", s.Duplicates)
	fmt.Fprintf(tw, "  max age\t%s\n", s.MaxAge)
	fmt.Fprintf(tw, "  retention\t%s\n", s.Retention)
	fmt.Fprintf(tw, "  direct gets\t%s\n", yesNo(s.AllowDirect))
	fmt.Fprintf(tw, "  message schedules\t%s\n", yesNo(s.AllowMsgSchedules))
	fmt.Fprintf(tw, "  message TTLs\t%s\n", yesNo(s.AllowMsgTTL))
	fmt.Fprintf(tw, "  atomic batches\t%s\n", yesNo(s.AllowAtomicPublish))
	fmt.Fprintf(tw, "  messages\t%d (%d bytes)\n", s.Messages, s.Bytes)
	_ = tw.Flush()

	fmt.Fprintln(w, "\nconsumers")
	if len(set.Consumers) == 0 {
		fmt.Fprintln(w, "  (none)")
	} else {
		tw = table(w)
		fmt.Fprintln(tw, "  NAME\tKIND\tACK WAIT\tMAX ACK PENDING\tMAX DELIVER\tREPLICAS\tPENDING\tACK PENDING")
		for _, c := range set.Consumers {
			r := "stream's"
			if c.Replicas > 0 {
				r = fmt.Sprint(c.Replicas)
			}
			fmt.Fprintf(tw, "  %s\t%s\t%s\t%d\t%d\t%s\t%d\t%d\n", c.Name, c.Kind, c.AckWait, c.MaxAckPending, c.MaxDeliver, r, c.Pending, c.AckPending)
		}
		_ = tw.Flush()
	}

	fmt.Fprintln(w, "\nKV buckets")
	tw = table(w)
	fmt.Fprintln(tw, "  NAME\tREPLICAS\tTTL\tHISTORY\tVALUES")
	for _, b := range set.Buckets {
		if b.Missing {
			fmt.Fprintf(tw, "  %s\t(not created yet)\t\t\t\n", b.Name)
			continue
		}
		fmt.Fprintf(tw, "  %s\t%d\t%s\t%d\t%d\n", b.Name, b.Replicas, b.TTL, b.History, b.Values)
	}
	_ = tw.Flush()

	if len(set.Problems) > 0 {
		fmt.Fprintln(w, "\nsettings Weft cannot run with")
		for _, p := range set.Problems {
			fmt.Fprintf(w, "  %s\n", p)
		}
	}
}

// Change is one setting 'weft admin apply' changed (or would change).
type Change struct {
	Resource string `json:"resource"`
	Setting  string `json:"setting"`
	From     string `json:"from"`
	To       string `json:"to"`
}

func adminApply(e *env, c *command, args []string) error {
	flags := func(fs *flag.FlagSet) action {
		fs.Lookup("replicas").Usage = "set the stream's and the KV buckets' replicas (env WEFT_REPLICAS)"
		fs.Lookup("duplicates").Usage = "set the stream's de-duplication window, at least 1m (env WEFT_DUPLICATES)"
		fs.Lookup("max-age").Usage = "set how long the stream keeps events, 0 forever (env WEFT_MAX_AGE)"
		ackWait := fs.Duration("ack-wait", 0, "the task queues' ack wait: how long a work item goes without a heartbeat before it is delivered again")
		queue := fs.String("queue", "", "change only this task queue's consumer (with -ack-wait)")
		dryRun := fs.Bool("dry-run", false, "print the changes without making them")
		given := map[string]bool{}
		check := func(e *env, x *call) error {
			fs.Visit(func(f *flag.Flag) { given[f.Name] = true })
			if msg := applyUsage(given, x.nats, *ackWait, *queue); msg != "" {
				return &usageError{cmd: x.cmd, msg: msg}
			}
			return nil
		}
		return action{check: check, do: func(e *env, x *call) error {
			cfg, js := x.nats, x.js
			ctx, cancel := context.WithTimeout(e.ctx, time.Minute)
			defer cancel()

			a := &applier{js: js, stream: cfg.Stream, dryRun: *dryRun}
			if err := a.apply(ctx, given, cfg, *queue, *ackWait); err != nil {
				return err
			}
			if x.out == "json" {
				return e.writeJSON(map[string]any{"changes": nonNil(a.changes), "applied": !*dryRun})
			}
			return e.printChanges(a.changes, *dryRun)
		}}
	}
	return e.skeleton(c.with(0, 0, connStreamFlags, flags), args)
}

// applyUsage says what is wrong with the flags 'weft admin apply' was
// given (those set are in given); "" when nothing is.
func applyUsage(given map[string]bool, cfg *natsconn.Config, ackWait time.Duration, queue string) string {
	switch {
	case given["duplicates"] && cfg.Duplicates < eventlog.MinDuplicates:
		return fmt.Sprintf("-duplicates: want at least %s, got %s", eventlog.MinDuplicates, cfg.Duplicates)
	case given["ack-wait"] && ackWait < time.Second:
		return fmt.Sprintf("-ack-wait: want at least 1s, got %s", ackWait)
	case queue != "" && !eventlog.ValidToken(queue):
		return fmt.Sprintf("-queue: %q is not a valid queue name (letters, digits, '-' and '_')", queue)
	case queue != "" && !given["ack-wait"]:
		return "-queue: goes with -ack-wait"
	}
	return ""
}

// apply makes (or, dry, records) the changes the flags given ask for: the
// stream's settings, the buckets' replicas, the task queues' ack wait.
func (a *applier) apply(ctx context.Context, given map[string]bool, cfg *natsconn.Config, queue string, ackWait time.Duration) error {
	err := a.applyStream(ctx, func(sc *jetstream.StreamConfig) {
		if given["replicas"] {
			sc.Replicas = cfg.Replicas
		}
		if given["duplicates"] {
			sc.Duplicates = cfg.Duplicates
		}
		if given["max-age"] {
			sc.MaxAge = cfg.MaxAge
		}
	})
	if err == nil && given["replicas"] {
		err = a.applyBuckets(ctx, cfg.Replicas)
	}
	if err == nil && given["ack-wait"] {
		err = a.applyQueues(ctx, queue, ackWait)
	}
	return err
}

// printChanges prints the changes 'weft admin apply' made, or would make.
func (e *env) printChanges(changes []Change, dryRun bool) error {
	if len(changes) == 0 {
		fmt.Fprintln(e.stdout, "nothing to change")
		return nil
	}
	verb := "changed"
	if dryRun {
		verb = "would change"
	}
	tw := table(e.stdout)
	for _, ch := range changes {
		fmt.Fprintf(tw, "%s %s\t%s\t%s → %s\n", verb, ch.Resource, ch.Setting, ch.From, ch.To)
	}
	return tw.Flush()
}

func nonNil(c []Change) []Change {
	if c == nil {
		return []Change{}
	}
	return c
}

// applier makes the changes of 'weft admin apply' and records them.
type applier struct {
	js      jetstream.JetStream
	stream  string
	dryRun  bool
	changes []Change
}

func (a *applier) note(resource, setting string, from, to any) {
	a.changes = append(a.changes, Change{Resource: resource, Setting: setting, From: fmt.Sprint(from), To: fmt.Sprint(to)})
}

// stream sets what Weft relies on and the changes of change.
func (a *applier) applyStream(ctx context.Context, change func(*jetstream.StreamConfig)) error {
	s, err := liveStream(ctx, a.js, a.stream)
	if err != nil {
		return err
	}
	have := s.CachedInfo().Config
	upd := eventlog.Repair(have)
	change(&upd)
	res := "stream " + a.stream
	n := len(a.changes)
	if !slices.Equal(have.Subjects, upd.Subjects) {
		a.note(res, "subjects", strings.Join(have.Subjects, ","), strings.Join(upd.Subjects, ","))
	}
	for _, f := range []struct {
		name     string
		from, to bool
	}{
		{"allow_direct", have.AllowDirect, upd.AllowDirect},
		{"allow_msg_schedules", have.AllowMsgSchedules, upd.AllowMsgSchedules},
		{"allow_msg_ttl", have.AllowMsgTTL, upd.AllowMsgTTL},
		{"allow_atomic", have.AllowAtomicPublish, upd.AllowAtomicPublish},
	} {
		if f.from != f.to {
			a.note(res, f.name, f.from, f.to)
		}
	}
	if max(have.Replicas, 1) != max(upd.Replicas, 1) {
		a.note(res, "replicas", max(have.Replicas, 1), upd.Replicas)
	}
	if have.Duplicates != upd.Duplicates {
		a.note(res, "duplicate_window", have.Duplicates, upd.Duplicates)
	}
	if have.MaxAge != upd.MaxAge {
		a.note(res, "max_age", age(have.MaxAge), age(upd.MaxAge))
	}
	if a.dryRun || len(a.changes) == n {
		return nil
	}
	if _, err := setup.UpdateStream(ctx, a.js, upd); err != nil {
		return fmt.Errorf("updating %s: %w", res, err)
	}
	return nil
}

// buckets sets the replicas of Weft's KV buckets that exist.
func (a *applier) applyBuckets(ctx context.Context, replicas int) error {
	for _, name := range buckets {
		kv, err := a.js.KeyValue(ctx, name)
		if errors.Is(err, jetstream.ErrBucketNotFound) {
			continue // created with the stream's replicas when needed
		}
		if err != nil {
			return fmt.Errorf("opening KV bucket %s: %w", name, err)
		}
		st, err := kv.Status(ctx)
		if err != nil {
			return fmt.Errorf("reading KV bucket %s: %w", name, err)
		}
		bs, ok := st.(*jetstream.KeyValueBucketStatus)
		if !ok {
			continue
		}
		have := max(bs.StreamInfo().Config.Replicas, 1)
		if have == replicas {
			continue
		}
		a.note("KV bucket "+name, "replicas", have, replicas)
		if a.dryRun {
			continue
		}
		kc := bs.Config()
		kc.Replicas = replicas
		if _, err := setup.UpdateKV(ctx, a.js, kc); err != nil {
			return fmt.Errorf("updating KV bucket %s: %w", name, err)
		}
	}
	return nil
}

// queues sets the ack wait of the task queues' consumers (one when queue
// is set).
func (a *applier) applyQueues(ctx context.Context, queue string, ackWait time.Duration) error {
	var names []string
	if queue != "" {
		names = []string{workqueue.QueueConsumer(queue)}
	} else {
		s, err := liveStream(ctx, a.js, a.stream)
		if err != nil {
			return err
		}
		lister := s.ConsumerNames(ctx)
		for name := range lister.Name() {
			if _, ok := workqueue.QueueName(name); ok {
				names = append(names, name)
			}
		}
		if err := lister.Err(); err != nil {
			return fmt.Errorf("listing the consumers of %s: %w", a.stream, err)
		}
		slices.Sort(names)
	}
	for _, name := range names {
		c, err := a.js.Consumer(ctx, a.stream, name)
		if errors.Is(err, jetstream.ErrConsumerNotFound) {
			return fmt.Errorf("queue %q has no consumer on stream %s yet (it is created with the first work of the queue)", queue, a.stream)
		}
		if err != nil {
			return fmt.Errorf("looking up consumer %s: %w", name, err)
		}
		cc := c.CachedInfo().Config
		if cc.AckWait == ackWait {
			continue
		}
		a.note(fmt.Sprintf("consumer %s", name), "ack_wait", cc.AckWait, ackWait)
		if a.dryRun {
			continue
		}
		cc.AckWait = ackWait
		if _, err := setup.UpdateConsumer(ctx, a.js, a.stream, cc); err != nil {
			return fmt.Errorf("updating consumer %s: %w", name, err)
		}
	}
	return nil
}
