package coordinator

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strconv"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/weft-dev/weft/internal/eventlog"
	"github.com/weft-dev/weft/internal/logattr"
	"github.com/weft-dev/weft/internal/setup"
)

// Lanes. A partition's events come to its holder through two durable
// consumers of the events stream: the progress consumer ("<durable>-<i>",
// eventlog.ProgressFilters) and the starts consumer
// ("<durable>-starts-<i>", eventlog.StartFilters: the clients' run
// starts). Each delivers in stream order, each has its own
// max_ack_pending, and the holder reads both at once.
//
// The progress consumer delivers the runs' other client events, the
// workers' and the notices, and of the decisions only a run's start by
// its parent's coordinator and a local node's work item (which its
// coordinator holds until the node's outcome is in: local.go). A
// coordinator's other decisions are not delivered back to it: it applied
// them to its cached run as it appended them, and their echoes were half
// of what a burst delivered (a node-ready per node, a waiting per run
// behind a full limit: 9,000 of them in front of one tenant's outcomes
// when another's burst waited for its slots). A decision of another
// coordinator (two that both took a run: a pause past the lease) is not
// delivered either, and needs not be: the next decision either makes
// for the run is appended under the run's optimistic concurrency, which
// refuses it, and the run is read again from the log (handle.go,
// process); and a coordinator that was paused past its lease finds a
// gap in its deliveries and drops the partition's cached runs (dispatch). So a burst of starts waits in the stream, or in the
// shards' queue behind the runs in progress (turns.go), and never in
// front of the outcomes, cancel requests, signals and wakes of the runs
// already going: with one consumer, a run's outcome published after a
// burst of 9,000 starts of another tenant was delivered after all of
// them (measured: handled a second after it was written, where its run
// took 60 ms alone), and no ranking of what the coordinator holds can
// reach what the server has not delivered.
//
// What the split changes for a run: its start may now be handled after
// a later event of the run (a cancel request published right after it,
// say). That is safe because nothing is decided from an event alone:
// the later event, its run not cached, reads the run from the log, start
// included, and decides its start there; the start, delivered after,
// finds the run cached and decided, or, evicted meanwhile, decides from
// the start alone, which the log refuses (the run has decisions: a
// conflict), and the run is read again (handle.go, process: a retry
// after a conflict reads the log). A child run's start is a decision of
// its parent's coordinator (eventlog.ChildStartedSubject), on the
// progress consumer in its run's order.
//
// Deployments made before the split have one consumer per partition,
// filtered on all its events; a coordinator that finds one splits it
// (splitPartition): the starts consumer is created from the first event
// the old consumer had not acknowledged, then the old one is filtered on
// the progress, keeping its place. A start both deliver meanwhile is
// handled twice, which is harmless (a start handled again finds its run
// decided), and none is passed over. Coordinators of a version before
// the split do not know the starts consumer: upgrade them all together.

// lane is one of a partition's two consumers.
type lane int

const (
	progressLane lane = iota
	startsLane
)

func (l lane) String() string {
	if l == startsLane {
		return "starts"
	}
	return "progress"
}

// laneKey names one consumer of one partition (inflight's bounds).
type laneKey struct {
	p    int
	lane lane
}

// StartsConsumerName is the name of partition p's starts consumer.
func StartsConsumerName(durable string, p int) string {
	return durable + "-starts-" + strconv.Itoa(p)
}

// laneConsumer returns partition p's consumer of lane l, setting it up
// as it must be.
func (c *Coordinator) laneConsumer(ctx context.Context, p int, l lane) (jetstream.Consumer, error) {
	if l == startsLane {
		return c.startsConsumer(ctx, p)
	}
	return c.partitionConsumer(ctx, p)
}

// startsConsumer returns partition p's starts consumer, creating it when
// missing (from where the last repartition started the partition
// consumers: the stream's start, unless one was made), or replacing one
// left from another partition count.
func (c *Coordinator) startsConsumer(ctx context.Context, p int) (jetstream.Consumer, error) {
	// A progress consumer made before the split is split first, which
	// creates this one where the starts were left.
	if _, err := c.partitionConsumer(ctx, p); err != nil {
		return nil, err
	}
	return c.partConsumer(ctx, partConsumerSpec{
		stream: c.store.StreamName(), name: StartsConsumerName(c.opts.durable, p), what: "starts",
		filters: eventlog.StartFilters(p, c.opts.partitions),
		startAt: c.startAt,
		recorded: func(cfg jetstream.ConsumerConfig) uint64 {
			log, _ := recordedStarts(cfg)
			return log
		},
		config: func(startAt uint64) jetstream.ConsumerConfig { return c.startsConfig(p, startAt) },
	})
}

// startsConfig is partition p's starts consumer, delivering from startAt
// (0: from the start). It holds as many unacknowledged events as the
// progress consumer (partitionAckPending).
func (c *Coordinator) startsConfig(p int, startAt uint64) jetstream.ConsumerConfig {
	return c.laneConfig(p, startAt, startsLane)
}

// laneConfig is partition p's consumer of lane l, delivering from
// startAt (0: from the start).
func (c *Coordinator) laneConfig(p int, startAt uint64, l lane) jetstream.ConsumerConfig {
	n := c.opts.partitions
	name, desc, filters := ConsumerName(c.opts.durable, p), fmt.Sprintf("Weft coordinator partition %d of %d", p, n), eventlog.ProgressFilters(p, n)
	if l == startsLane {
		name, desc, filters = StartsConsumerName(c.opts.durable, p), desc+": run starts", eventlog.StartFilters(p, n)
	}
	cfg := jetstream.ConsumerConfig{
		Durable:       name,
		Description:   desc,
		AckPolicy:     jetstream.AckExplicitPolicy,
		AckWait:       c.opts.ackWait,
		MaxAckPending: partitionAckPending(n),
		MaxDeliver:    -1,
		DeliverPolicy: jetstream.DeliverAllPolicy,
		Metadata:      map[string]string{"weft.partition": strconv.Itoa(p), partitionsMeta: strconv.Itoa(n)},
	}
	if startAt > 0 {
		cfg.DeliverPolicy, cfg.OptStartSeq = jetstream.DeliverByStartSequencePolicy, startAt
	}
	setFilters(&cfg, filters)
	return cfg
}

// partConsumerSpec is one of a partition's consumers other than its
// progress consumer (which records the deployment's partition count):
// the starts consumer, the timers consumer.
type partConsumerSpec struct {
	stream, name, what string
	filters            []string
	// startAt is where a new one starts (0: at the stream's start).
	startAt uint64
	// recorded reads, from partition 0's progress consumer, where the
	// last repartition started this kind of consumer.
	recorded func(jetstream.ConsumerConfig) uint64
	config   func(startAt uint64) jetstream.ConsumerConfig
}

// partConsumer returns the consumer s names: as it is when its filters
// are s's; replaced, from where the last repartition started it, when
// they are not (it is left from another partition count: repartition.go);
// created when missing.
func (c *Coordinator) partConsumer(ctx context.Context, s partConsumerSpec) (jetstream.Consumer, error) {
	cons, err := c.js.Consumer(ctx, s.stream, s.name)
	startAt := s.startAt
	switch {
	case err == nil:
		if slices.Equal(filtersOf(cons.CachedInfo().Config), s.filters) {
			return cons, nil
		}
		rec, err := c.js.Consumer(ctx, c.store.StreamName(), ConsumerName(c.opts.durable, 0))
		if err != nil {
			return nil, err
		}
		startAt = s.recorded(rec.CachedInfo().Config)
		c.log.Warn("replacing a partition's "+s.what+" consumer left from another partition count", logattr.Consumer, s.name, logattr.FromSeq, startAt)
		if err := c.js.DeleteConsumer(ctx, s.stream, s.name); err != nil && !errors.Is(err, jetstream.ErrConsumerNotFound) {
			return nil, err
		}
	case !errors.Is(err, jetstream.ErrConsumerNotFound):
		return nil, err
	}
	return setup.CreateConsumer(ctx, c.js, s.stream, s.config(startAt))
}

// splitPartition splits partition p's consumer cons, made before the
// split (filtered on all of the partition's events): the starts
// consumer is created, unless a split cut short made it, from the first
// event cons had not acknowledged and with its ack wait and
// max_ack_pending; then cons is filtered on the progress, keeping its
// place (see Lanes above).
func (c *Coordinator) splitPartition(ctx context.Context, p int, cons jetstream.Consumer) (jetstream.Consumer, error) {
	stream := c.store.StreamName()
	name := cons.CachedInfo().Name
	_, err := c.js.Consumer(ctx, stream, StartsConsumerName(c.opts.durable, p))
	if errors.Is(err, jetstream.ErrConsumerNotFound) {
		from, err := resumePoint(ctx, c.js, stream, []string{name})
		if err != nil {
			return nil, err
		}
		c.log.Warn("splitting a partition consumer made before the starts had their own", logattr.Consumer, name, logattr.FromSeq, from)
		// The operator's settings of the old one hold for both.
		starts := c.startsConfig(p, from)
		starts.AckWait, starts.MaxAckPending = cons.CachedInfo().Config.AckWait, cons.CachedInfo().Config.MaxAckPending
		if _, err := setup.CreateConsumer(ctx, c.js, stream, starts); err != nil {
			return nil, err
		}
	} else if err != nil {
		return nil, err
	}
	cfg := cons.CachedInfo().Config
	setFilters(&cfg, eventlog.ProgressFilters(p, c.opts.partitions))
	return setup.UpdateConsumer(ctx, c.js, stream, cfg)
}

// setFilters sets cfg's filters: one as FilterSubject, more as
// FilterSubjects.
func setFilters(cfg *jetstream.ConsumerConfig, f []string) {
	cfg.FilterSubject, cfg.FilterSubjects = "", nil
	if len(f) == 1 {
		cfg.FilterSubject = f[0]
		return
	}
	cfg.FilterSubjects = f
}
