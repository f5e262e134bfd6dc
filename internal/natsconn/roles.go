package natsconn

import (
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"

	"github.com/weft-dev/weft/internal/eventlog"
	"github.com/weft-dev/weft/pkg/events"
)

// Role is what a NATS user of a Weft deployment is for. Each role gets
// the subjects and JetStream API calls its programs make, and nothing
// more (DESIGN.md, principle 8); deploy/SECURITY.md explains each grant
// and lists the ones that are still broader than the role.
type Role string

// The roles.
const (
	// RoleClient starts, signals and cancels runs and reads them (the
	// weft CLI, pkg/client).
	RoleClient Role = "client"
	// RoleCoordinator decides runs (cmd/coordinator).
	RoleCoordinator Role = "coordinator"
	// RoleWorker runs the nodes of one task queue (cmd/nodeworker, or a
	// program on pkg/worker).
	RoleWorker Role = "worker"
	// RoleUI reads runs and workers and writes nothing.
	RoleUI Role = "ui"
	// RoleAdmin may do anything, purging and deleting the stream included.
	RoleAdmin Role = "admin"
)

// Roles lists the roles, workers last.
var Roles = []Role{RoleClient, RoleCoordinator, RoleUI, RoleAdmin, RoleTrigger, RoleServe, RoleWorker}

// Names of the KV buckets Weft keeps next to its stream (pkg/worker's
// WorkersBucket, internal/coordinator's SnapshotsBucket); repeated here,
// not imported, so that this package stays below both.
const (
	workersBucket   = "weft-workers"
	snapshotsBucket = "weft-snapshots"
	leasesBucket    = "weft-coordinators"
	// internal/flow: concurrency slots and their waiters.
	flowBucket = "weft-flow"
	// internal/readmodel: the read model of runs, and the archive of removed runs
	// (an Object Store bucket).
	runsBucket    = "weft-runs"
	archiveBucket = "weft-archive"
	// internal/batch: batch jobs and their progress.
	batchesBucket = "weft-batches"
)

// payloadsBucket is the Object Store bucket of the bodies kept beside the
// log (eventlog.PayloadsBucket).
const payloadsBucket = eventlog.PayloadsBucket

// payloadsRead are the reads of large payloads (eventlog's offload.go):
// the bucket's stream info, an object's meta (the last message on its meta
// subject, a direct get named in the request subject) and its chunks (a
// batched direct get by the chunks' subject). No consumer: an Object Store
// get would create one. Objects are named "<run>.<sha256 of the body>":
// a reader finds one only through an event's reference, and a sealed
// run's objects are as sealed as its events.
func payloadsRead(api string) []string {
	return []string{
		api + "STREAM.INFO.OBJ_" + payloadsBucket,
		api + "DIRECT.GET.OBJ_" + payloadsBucket,
		api + "DIRECT.GET.OBJ_" + payloadsBucket + ".>",
	}
}

// payloadsWrite are the writes of large payloads: an object's chunks and
// its meta (published to the bucket's stream, acknowledged on the
// writer's inbox). NATS cannot scope them to the writer's runs (an
// object's meta subject is its name in base64), so a writer could
// overwrite another run's object: its reader then refuses it (the
// reference's digest), a denial of service, never a forgery
// (deploy/SECURITY.md).
func payloadsWrite() []string {
	return []string{"$O." + payloadsBucket + ".C.>", "$O." + payloadsBucket + ".M.>"}
}

// runSubjects matches every run's subjects, weft.r.<slot>.<run>.… (each
// run's is eventlog.RunFilter), and nothing shorter: a subscription to
// weft.r.> is refused.
const runSubjects = eventlog.RunSubjects

// Deployment is what the permissions depend on.
type Deployment struct {
	// Stream is the events stream's name (default "WEFT").
	Stream string `json:"stream,omitempty"`
	// Durable is the name the coordinators' partition consumers are
	// made from: "<durable>-<partition>" (default "coordinator").
	Durable string `json:"durable,omitempty"`
	// Partitions is how many coordinator partitions the permissions
	// cover (default eventlog.Slots, the most there can be): consumer
	// names are not wildcards, so each is granted by name.
	Partitions int `json:"partitions,omitempty"`
	// Queues are the task queues; each gets a worker user, and no other
	// role may pull from or reconfigure their consumers.
	Queues []string `json:"queues"`
	// Namespaces, when there are any, are the deployment's namespaces:
	// one NATS account each, with the users of every role and the
	// namespace's quota (namespace.go). None: one set of users in the
	// server's global account, the default namespace.
	Namespaces []Namespace `json:"namespaces,omitempty"`
	// TriggerStreams are the users' streams event triggers may read
	// (roles_starts.go).
	TriggerStreams []string `json:"triggerStreams,omitempty"`
	// WebhookSubjects are the subjects 'weft serve' publishes its
	// webhooks' deliveries on (roles_serve.go).
	WebhookSubjects []string `json:"webhookSubjects,omitempty"`
}

func (d Deployment) withDefaults() Deployment {
	if d.Stream == "" {
		d.Stream = "WEFT"
	}
	if d.Durable == "" {
		d.Durable = "coordinator"
	}
	if d.Partitions == 0 {
		d.Partitions = eventlog.Slots
	}
	return d
}

// Validate reports every problem with the deployment at once.
func (d Deployment) Validate() error {
	d = d.withDefaults()
	var errs []error
	if !eventlog.ValidToken(d.Stream) {
		errs = append(errs, fmt.Errorf("stream %q: not a valid stream name", d.Stream))
	}
	errs = append(errs, d.triggerStreamErrors()...)
	errs = append(errs, d.webhookSubjectErrors()...)
	if !eventlog.ValidToken(d.Durable) {
		errs = append(errs, fmt.Errorf("durable %q: not a valid consumer name", d.Durable))
	}
	if d.Partitions < 1 || d.Partitions > eventlog.Slots {
		errs = append(errs, fmt.Errorf("partitions: want 1 to %d, got %d", eventlog.Slots, d.Partitions))
	}
	if len(d.Queues) == 0 {
		errs = append(errs, errors.New("queues: at least one"))
	}
	for i, q := range d.Queues {
		if q == events.LocalQueue {
			errs = append(errs, fmt.Errorf("queue %q: reserved for the nodes the coordinator runs itself; no worker may have it", q))
		} else if !eventlog.ValidToken(q) {
			errs = append(errs, fmt.Errorf("queue %q: not a valid queue name (letters, digits, '-' and '_')", q))
		}
		if slices.Contains(d.Queues[:i], q) {
			errs = append(errs, fmt.Errorf("queue %q: given twice", q))
		}
	}
	for i, ns := range d.Namespaces {
		if err := CheckNamespaceName(ns.Name); err != nil {
			errs = append(errs, err)
			continue
		}
		if slices.ContainsFunc(d.Namespaces[:i], func(o Namespace) bool { return strings.EqualFold(o.Name, ns.Name) }) {
			errs = append(errs, fmt.Errorf("namespace %q: given twice", ns.Name))
		}
		errs = append(errs, ns.Quota.validate(ns.Name, d)...)
	}
	return errors.Join(errs...)
}

// User is a NATS user of a role: its name and what it may publish and
// subscribe to. Deny lists take precedence over allow lists (NATS's rule).
type User struct {
	Name           string
	Role           Role
	Queue          string // RoleWorker only
	Namespace      string // "" in a deployment without namespaces
	PublishAllow   []string
	PublishDeny    []string
	SubscribeAllow []string
	// AllowResponses lets the user answer the requests it receives, on
	// their reply subjects only (the coordinator answers admission
	// requests: internal/admission).
	AllowResponses bool
}

// UserName is the NATS user name of a role (and queue, for workers).
func UserName(r Role, queue string) string {
	if r == RoleWorker {
		return "weft-worker-" + queue
	}
	return "weft-" + string(r)
}

// Users returns the users of a deployment: one per role, and one worker
// user per queue; with namespaces, that in each namespace.
func (d Deployment) Users() []User {
	d = d.withDefaults()
	namespaces := d.NamespaceNames()
	if len(namespaces) == 0 {
		namespaces = []string{""}
	}
	var out []User
	for _, ns := range namespaces {
		for _, r := range Roles {
			if r == RoleWorker {
				for _, q := range d.Queues {
					out = append(out, d.user(ns, r, q))
				}
				continue
			}
			out = append(out, d.user(ns, r, ""))
		}
	}
	return out
}

// User returns the user of role r (and queue q, for a worker) of a
// deployment without namespaces.
func (d Deployment) User(r Role, q string) User { return d.user("", r, q) }

// UserIn returns the user of role r (and queue q) in namespace ns.
func (d Deployment) UserIn(ns string, r Role, q string) User { return d.user(ns, r, q) }

// Size: the permission table of every role, one block per role: read whole,
// it is the least-privilege contract (SECURITY.md).
func (d Deployment) user(ns string, r Role, q string) User {
	d = d.withDefaults()
	u := User{Name: NamespaceUser(ns, r, q), Role: r, Queue: q, Namespace: ns}
	// In a namespace, client writes pass the engine's admission (see
	// admission below and internal/admission).
	admission := ns != ""
	inbox := InboxPrefixFor(u.Name) + ".>"
	api := "$JS.API."
	s := d.Stream
	// Reading runs: batched direct gets (body-filtered, so not scoped to
	// a run), gets on the stream leader, stream info.
	reads := []string{
		api + "STREAM.INFO." + s,
		api + "DIRECT.GET." + s,
		api + "DIRECT.GET." + s + ".>",
		api + "STREAM.MSG.GET." + s,
	}
	// Following runs (pkg/client's Wait and Follow, the UI's live
	// updates): a core subscription on runs' subjects, a wake-up only;
	// what was published is read with the gets above. No consumer on the
	// events stream: a consumer's deliver subject and filters are in the
	// request body, which permissions do not see.
	follow := []string{runSubjects}
	// Following a model's streamed tokens (core NATS, outside the stream).
	tokens := []string{eventlog.AllTokens}
	// The worker announcements, read: the keys from the stream's subject
	// index, then gets (pkg/worker's LiveWorkers). No consumer: see
	// runsRead.
	workersRead := []string{
		api + "STREAM.INFO.KV_" + workersBucket,
		api + "DIRECT.GET.KV_" + workersBucket + ".>",
		api + "STREAM.MSG.GET.KV_" + workersBucket,
		// Whether a coordinator is alive ('weft status' warns when none
		// is): the leases bucket's stream information, nothing more.
		api + "STREAM.INFO.KV_" + leasesBucket,
	}
	// The read model of runs (internal/readmodel), read: stream info with
	// subject filters (the keys of one status), gets, and batched direct
	// gets (the summaries of some statuses); and the archive of removed
	// runs, read (an object's meta and its chunks, by direct gets). No
	// consumer on any bucket: a consumer's deliver subject is in the
	// request body, and each is a resource held on the server (a client
	// that creates hundreds of push consumers stalls it), so readers get
	// no CONSUMER.CREATE at all but the UI's one watcher (below).
	runsRead := []string{
		api + "STREAM.INFO.KV_" + runsBucket,
		api + "DIRECT.GET.KV_" + runsBucket,
		api + "DIRECT.GET.KV_" + runsBucket + ".>",
		api + "STREAM.MSG.GET.KV_" + runsBucket,
		api + "STREAM.INFO.OBJ_" + archiveBucket,
		api + "DIRECT.GET.OBJ_" + archiveBucket,
		api + "DIRECT.GET.OBJ_" + archiveBucket + ".>",
		api + "STREAM.MSG.GET.OBJ_" + archiveBucket,
	}
	// Batch jobs (internal/batch), read: 'weft batch list|describe' and
	// the UI. Only the admin writes them (a batch deletes runs, or acts
	// on thousands): no role here gets "$KV.weft-batches.>".
	batchesRead := []string{
		api + "STREAM.INFO.KV_" + batchesBucket,
		api + "DIRECT.GET.KV_" + batchesBucket,
		api + "DIRECT.GET.KV_" + batchesBucket + ".>",
		api + "STREAM.MSG.GET.KV_" + batchesBucket,
	}
	// Flow control's slots and rate keys, read: 'weft queues' and the
	// UI's workers page, by direct gets (internal/flow Lookup: no
	// consumer). Only coordinators write them.
	flowRead := []string{
		api + "STREAM.INFO.KV_" + flowBucket,
		api + "DIRECT.GET.KV_" + flowBucket,
		api + "DIRECT.GET.KV_" + flowBucket + ".>",
		api + "STREAM.MSG.GET.KV_" + flowBucket,
	}
	// The UI's live list of runs (internal/ui, GET /api/live/runs) is a
	// KV watcher of the read model: a consumer of that bucket's stream,
	// the one consumer a reader still creates (deploy/SECURITY.md, gap 4;
	// in a namespace, bounded by its account's max_consumers).
	runsWatch := kvWatch(api, runsBucket)
	switch r {
	case RoleClient:
		writes := []string{eventlog.ClientSubjects}
		if admission {
			// No right to any run's subject: starts, signals and cancel
			// requests are asked of the coordinators, which admit them
			// within the namespace's limits and append them.
			writes = []string{eventlog.AdmitAll}
		}
		u.PublishAllow = slices.Concat(writes, reads, workersRead, runsRead, batchesRead, flowRead, startsRead(api), payloadsRead(api), payloadsWrite())
		u.SubscribeAllow = slices.Concat([]string{inbox}, follow, tokens)
	case RoleUI:
		// The workers page counts the work waiting on each task queue:
		// the queues' consumers listed (their configurations and
		// counts, no messages).
		queuesRead := []string{api + "CONSUMER.LIST." + s, api + "CONSUMER.INFO." + s + ".*"}
		u.PublishAllow = slices.Concat(reads, workersRead, runsRead, batchesRead, flowRead, runsWatch, queuesRead, startsRead(api), payloadsRead(api))
		u.SubscribeAllow = slices.Concat([]string{inbox}, follow, tokens)
	case RoleCoordinator:
		u.PublishAllow = slices.Concat(
			[]string{
				eventlog.DecisionSubjects, // decisions, work items included
				eventlog.NoticeSubjects,   // notices: timers fired, children finished
				// Runs' ended notices (core NATS, not stored, no body):
				// workers spare the read of their ended-run check.
				eventlog.AllEndedNotices,
				// Outcomes of local nodes, which it runs itself: the
				// reserved queue no worker may have.
				eventlog.WorkerFilter(events.LocalQueue),
				eventlog.PendingTimers, // durable timers (message schedules), in the timers stream
				// A child run is cancelled by its parent's coordinator,
				// with a client's event. (It is started with a decision
				// of the child run, on d.started, above: never on a
				// client's subject, where a start naming a parent is
				// refused.)
				eventlog.KindFilter(eventlog.RunCancelRequested),
				// The runs the engine starts on its own (a schedule's
				// fire, an event trigger's message: internal/schedule,
				// internal/trigger) are started as child runs are, with
				// a decision of the run on its d.started, above, under
				// ids only coordinators can derive; a start naming a
				// schedule or trigger anywhere else is refused by the
				// decoder. No client's start (c.started) outside a
				// namespace.
			},
			reads,
			[]string{
				// Store.CancelSchedules: a purge of one run's timers, in
				// the timers stream only (NATS cannot check the filter,
				// but the events stream is out of reach).
				api + "STREAM.PURGE." + s + eventlog.TimerStreamSuffix,
				api + "STREAM.INFO." + s + eventlog.TimerStreamSuffix,
				// No stream create or update: a stream's configuration
				// (subjects, republish rules) is in the request body, so
				// the right would reach any subject. The admin sets the
				// stream and the buckets up ('weft roles -setup').
				// Task queues' consumers (workqueue.EnsureQueue before the
				// first work item of a queue): any queue, filtered on
				// work items only.
				api + "CONSUMER.INFO." + s + ".*",
				api + "CONSUMER.CREATE." + s + ".*." + eventlog.KindFilter(eventlog.NodeReady),
				// Snapshots (the bucket is the admin's to create).
				"$KV." + snapshotsBucket + ".>",
				api + "STREAM.INFO.KV_" + snapshotsBucket,
				api + "DIRECT.GET.KV_" + snapshotsBucket + ".>",
				api + "STREAM.MSG.GET.KV_" + snapshotsBucket,
				// Partition leases and coordinator announcements (the
				// bucket is the admin's to create; listing members is a
				// KV watcher).
				"$KV." + leasesBucket + ".>",
				api + "STREAM.INFO.KV_" + leasesBucket,
				api + "DIRECT.GET.KV_" + leasesBucket + ".>",
				api + "STREAM.MSG.GET.KV_" + leasesBucket,
				// The read model of runs (the bucket is the admin's to
				// create): puts, gets, and a purge of a run's older keys.
				// The purge's filter is in the body, so NATS cannot scope
				// it, but the right reaches this bucket's stream only, a
				// projection that 'weft admin reindex' rebuilds; the
				// events stream stays out of reach.
				"$KV." + runsBucket + ".>",
				api + "STREAM.INFO.KV_" + runsBucket,
				api + "DIRECT.GET.KV_" + runsBucket + ".>",
				api + "STREAM.MSG.GET.KV_" + runsBucket,
				api + "STREAM.PURGE.KV_" + runsBucket,
				// Flow control's slots (the bucket is the admin's to
				// create): compare-and-set puts and deletes, gets, and
				// listing keys (a KV watcher).
				"$KV." + flowBucket + ".>",
				api + "STREAM.INFO.KV_" + flowBucket,
				api + "DIRECT.GET.KV_" + flowBucket + ".>",
				api + "STREAM.MSG.GET.KV_" + flowBucket,
			},
			kvWatch(api, leasesBucket),
			kvWatch(api, flowBucket),
			// Its partition consumers: create with any of the
			// partitions' filters, info, pull, acknowledge; and the
			// partitions' consumers of fired timers.
			coordinatorGrants(api, s, d.coordinatorConsumers()),
			coordinatorGrants(api, s+eventlog.TimerStreamSuffix, d.timerConsumers()),
			[]string{api + "CONSUMER.INFO." + s + eventlog.TimerStreamSuffix + ".*"},
			startsCoordinator(api, s, d.Durable),
			triggerStreamsCoordinator(api, d.TriggerStreams),
			// Large payloads: it reads every run's, and writes those of
			// its decisions (a run's output, a child's input).
			payloadsRead(api), payloadsWrite())
		u.SubscribeAllow = []string{inbox}
		if admission {
			// It answers the clients' requests (a queue group on
			// weft.admit.*, replies on their inboxes only), takes a
			// ticket per request admitted, and appends the client's
			// event: a start (on the client's subject; one that names a
			// parent is refused before it is written), a signal or a
			// cancel request.
			u.PublishAllow = append(u.PublishAllow,
				eventlog.ClientStarts,
				eventlog.SignalSubjects,
				eventlog.AllTickets,
				api+"STREAM.INFO."+s+eventlog.AdmitStartsSuffix,
				api+"STREAM.INFO."+s+eventlog.AdmitSignalsSuffix)
			u.SubscribeAllow = append(u.SubscribeAllow, eventlog.AdmitAll)
			u.AllowResponses = true
		}
	case RoleWorker:
		cons := QueueConsumerName(q)
		u.PublishAllow = []string{
			eventlog.WorkerFilter(q), // its outcomes: weft.r.*.*.w.<queue>.>
			eventlog.TokenWrites(q),  // streamed tokens: weft.tok.*.*.<queue>.*, core NATS, not stored
		}
		// Reads, each a direct get of the last message on a subject
		// named in the request subject (eventlog.LastOn), so scoped: runs'
		// starts (its node's config; every run's, by design: a client's
		// on c.started, a child run's on d.started) and its own
		// queue's outcomes (confirming a duplicate ack). No batched or
		// leader get, whose subject or sequence is in the body: they read
		// any message. Stream info: opening the store, and whether a
		// stale item's run has ended (eventlog.HasEnd: message counts of
		// the run's decision subjects, no content).
		u.PublishAllow = append(u.PublishAllow, api+"STREAM.INFO."+s)
		for _, subject := range workerReads(q) {
			u.PublishAllow = append(u.PublishAllow, api+"DIRECT.GET."+s+"."+subject)
		}
		u.PublishAllow = append(u.PublishAllow,
			// Its queue's consumer only: info, create or update with the
			// queue's own filter, pull, acknowledge.
			api+"CONSUMER.INFO."+s+"."+cons,
			api+"CONSUMER.CREATE."+s+"."+cons+"."+eventlog.QueueFilter(q),
			api+"CONSUMER.MSG.NEXT."+s+"."+cons,
			"$JS.ACK."+s+"."+cons+".>",
			// Announcements (a read model for operators; the bucket is
			// the admin's to create).
			"$KV."+workersBucket+".>",
			api+"STREAM.INFO.KV_"+workersBucket,
		)
		// Large payloads: it reads its work items' inputs and writes its
		// outcomes' bodies.
		u.PublishAllow = slices.Concat(u.PublishAllow, payloadsRead(api), payloadsWrite())
		u.SubscribeAllow = []string{
			inbox,
			// Cancel requests, to stop a node of a cancelled run at once.
			eventlog.KindFilter(events.RunCancelRequested),
			// Runs' ended notices (that a run ended, no more: what
			// eventlog.HasEnd tells), sparing the ended-run check's read.
			eventlog.AllEndedNotices,
		}
	case RoleTrigger:
		u = triggerUser(u, api, slices.Concat(reads, payloadsRead(api)), runsRead, inbox)
		u.PublishAllow = append(u.PublishAllow, triggerStreamsManage(api, d.TriggerStreams)...)
	case RoleServe:
		u = serveUser(u, admission, slices.Concat(reads, payloadsRead(api)), inbox, d.WebhookSubjects)
	case RoleAdmin:
		u.PublishAllow = []string{">"}
		u.SubscribeAllow = []string{">"}
	}
	if ns != "" && r != RoleAdmin {
		// Which account the connection is in (VerifyNamespace).
		u.PublishAllow = append(u.PublishAllow, userInfoSubject)
	}
	return u
}

// workerReads are the subjects whose last message a worker of queue q may
// read (pkg/worker's runinfo.go, events.Store's duplicate check).
func workerReads(q string) []string {
	return []string{eventlog.KindFilter(events.RunStarted), eventlog.WorkerFilter(q)}
}

// coordinatorConsumers are the names of the coordinators' partition
// consumers (internal/coordinator's ConsumerName and StartsConsumerName),
// and the durable's own name (a single consumer, as before partitions).
func (d Deployment) coordinatorConsumers() []string {
	out := []string{d.Durable}
	for p := range d.Partitions {
		out = append(out, d.Durable+"-"+strconv.Itoa(p), d.Durable+"-starts-"+strconv.Itoa(p))
	}
	return out
}

// timerConsumers are the names of the partitions' consumers of fired
// timers (internal/coordinator relay.go).
func (d Deployment) timerConsumers() []string {
	var out []string
	for p := range max(d.Partitions, 1) {
		out = append(out, d.Durable+"-timers-"+strconv.Itoa(p))
	}
	return out
}

func coordinatorGrants(api, stream string, names []string) []string {
	var out []string
	for _, n := range names {
		out = append(out,
			api+"CONSUMER.CREATE."+stream+"."+n,
			api+"CONSUMER.CREATE."+stream+"."+n+".>",
			api+"CONSUMER.MSG.NEXT."+stream+"."+n,
			"$JS.ACK."+stream+"."+n+".>",
		)
	}
	return out
}

// QueueConsumerName is pkg/worker's QueueConsumer: the durable consumer
// of a task queue.
func QueueConsumerName(queue string) string { return "work-" + queue }
