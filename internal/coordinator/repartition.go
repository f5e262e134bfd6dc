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
)

// Changing the number of partitions. A run's partition is its slot modulo
// the partition count, and each partition consumer is filtered on its
// slots: coordinators with different counts would consume some slots twice
// and, with fewer partitions than before, leave the slots of the old
// consumers they no longer read undecided. So the count is recorded where
// it matters, in the partition consumers' metadata ("weft.partitions"), and
// a coordinator told another count refuses to start (ErrPartitionCount)
// unless it is told to repartition.
//
// The procedure (the package docs say it for operators): stop every
// coordinator (SIGTERM); start one with the new count and WithRepartition
// (-repartition); once it runs, start the others with the new count. Runs
// in flight wait meanwhile, their events kept by the stream, and go on
// once the new partitions are taken. Repartitioning refuses while another
// coordinator is announced in the leases bucket; it reads where the old
// consumers stand, deletes them (the progress and starts consumers,
// lanes.go, and the timer consumers), and creates the
// new ones starting at the earliest event any old one had not
// acknowledged: events handled already may be handled again, which
// de-duplication and the concurrency check make harmless, and no event is
// passed over. It replaces partition 0's consumer first, which records the
// new count and the starting points; a coordinator that finds another
// partition's consumer (or a timer consumer) made for another count once
// partition 0's agrees with it replaces it from those points, so a
// repartition that dies midway is finished by the next coordinators
// (TestInterruptedRepartitionFinishes).

// ErrPartitionCount says the deployment's partition consumers were made
// for another number of partitions than the coordinator was told.
var ErrPartitionCount = errors.New("the partition count differs from the deployment's")

// WithRepartition lets the coordinator replace partition consumers made
// for another partition count (see repartition.go); without it, such a
// coordinator refuses to start.
func WithRepartition(ok bool) Option { return func(o *options) { o.repartition = ok } }

// The metadata of partition consumers: the partition count, and on
// partition 0's after a repartition, where the new timer consumers
// started.
const (
	partitionsMeta  = "weft.partitions"
	timersStartMeta = "weft.timers-start"
)

// recordedStarts reads, from partition 0's consumer, where the last
// repartition started the partition consumers in the events and timers
// streams (0: at their start).
func recordedStarts(cfg jetstream.ConsumerConfig) (log, timers uint64) {
	if cfg.DeliverPolicy == jetstream.DeliverByStartSequencePolicy {
		log = cfg.OptStartSeq
	}
	timers, _ = strconv.ParseUint(cfg.Metadata[timersStartMeta], 10, 64)
	return log, timers
}

// checkPartitions makes sure the partition consumers are made for this
// coordinator's partition count, creating partition 0's when there is
// none (then a coordinator started at the same time with another count
// finds it), and repartitioning when told to.
func (c *Coordinator) checkPartitions(ctx context.Context, kv jetstream.KeyValue) error {
	cons, err := c.partitionConsumer(ctx, 0)
	if err != nil {
		return err
	}
	cfg := cons.CachedInfo().Config
	have := deployedPartitions(cfg)
	if have == c.opts.partitions {
		return nil
	}
	if have == 0 && slices.Equal(filtersOf(cfg), eventlog.ProgressFilters(0, c.opts.partitions)) {
		return nil // made without the record, by its filters for this count
	}
	if !c.opts.repartition {
		return fmt.Errorf("%w: consumer %s was made for %s partitions, this coordinator is told %d: start it with the deployment's count, or change the count as the coordinator's docs say (stop every coordinator, start one with -repartition)",
			ErrPartitionCount, ConsumerName(c.opts.durable, 0), countText(have), c.opts.partitions)
	}
	return c.repartitionTo(ctx, kv, have)
}

// deployedPartitions reads the partition count a consumer was made for
// (0: it does not say).
func deployedPartitions(cfg jetstream.ConsumerConfig) int {
	n, err := strconv.Atoi(cfg.Metadata[partitionsMeta])
	if err != nil {
		return 0
	}
	return n
}

func countText(n int) string {
	if n == 0 {
		return "an unrecorded number of"
	}
	return strconv.Itoa(n)
}

// repartitionTo replaces the partition consumers made for have partitions
// (0: unknown) with this coordinator's.
//
// (Its length is the procedure's steps in their required order, each a
// call.)
func (c *Coordinator) repartitionTo(ctx context.Context, kv jetstream.KeyValue, have int) error {
	others, err := c.othersAnnounced(ctx, kv)
	if err != nil {
		return err
	}
	if others > 0 {
		return fmt.Errorf("%w: repartitioning needs every other coordinator stopped, and %d is announced in %s (a killed one's announcement expires after %s)", ErrPartitionCount, others, LeasesBucket, c.opts.leaseTTL)
	}
	old, eventsFrom, err := c.oldPartitions(ctx, c.store.StreamName(), c.opts.durable, c.opts.durable+"-starts")
	if err != nil {
		return err
	}
	timers, timersFrom, err := c.oldPartitions(ctx, c.store.TimerStream(), c.opts.durable+"-timers")
	if err != nil {
		return err
	}
	if from, err := c.unconsumedFrom(ctx, have); err != nil {
		return err
	} else if from > 0 {
		eventsFrom = min(eventsFrom, from)
	}
	c.log.Warn("repartitioning", logattr.From, countText(have), logattr.To, c.opts.partitions, logattr.EventsFromSeq, eventsFrom, logattr.TimersFromSeq, timersFrom)
	// Partition 0's consumer first: it records the new count and where
	// the new consumers start, so that a repartition interrupted from here
	// on is finished by the coordinators that start next (partitionConsumer
	// and timerConsumer replace a consumer left from the old count).
	c.startAt, c.timersStartAt = eventsFrom, timersFrom
	first := ConsumerName(c.opts.durable, 0)
	if err := c.deleteConsumers(ctx, c.store.StreamName(), []string{first}); err != nil {
		return err
	}
	if _, err := c.partitionConsumer(ctx, 0); err != nil {
		return err
	}
	if err := c.deleteConsumers(ctx, c.store.StreamName(), slices.DeleteFunc(slices.Clone(old), func(n string) bool { return n == first })); err != nil {
		return err
	}
	if err := c.deleteConsumers(ctx, c.store.TimerStream(), timers); err != nil {
		return err
	}
	for p := range c.opts.partitions {
		if _, err := c.partitionConsumer(ctx, p); err != nil {
			return err
		}
		if _, err := c.startsConsumer(ctx, p); err != nil {
			return err
		}
		if _, err := c.timerConsumer(ctx, p); err != nil {
			return err
		}
	}
	return nil
}

// othersAnnounced counts the coordinators other than this one announced in the
// leases bucket.
func (c *Coordinator) othersAnnounced(ctx context.Context, kv jetstream.KeyValue) (int, error) {
	lister, err := kv.ListKeysFiltered(ctx, "member.>")
	if err != nil {
		if errors.Is(err, jetstream.ErrNoKeysFound) {
			return 0, nil
		}
		return 0, err
	}
	n := 0
	for k := range lister.Keys() {
		if k != memberKey(c.id) {
			n++
		}
	}
	return n, nil
}

// consumersOf lists a stream's consumers whose names match.
func (c *Coordinator) consumersOf(ctx context.Context, stream string, match func(string) bool) ([]string, error) {
	s, err := c.js.Stream(ctx, stream)
	if err != nil {
		return nil, fmt.Errorf("reading stream %s: %w", stream, err)
	}
	var out []string
	names := s.ConsumerNames(ctx)
	for name := range names.Name() {
		if match(name) {
			out = append(out, name)
		}
	}
	if err := names.Err(); err != nil {
		return nil, fmt.Errorf("listing the consumers of %s: %w", stream, err)
	}
	return out, nil
}

// partitionIndex is the partition of a consumer named "<prefix>-<i>", or
// -1.
func partitionIndex(prefix, name string) int {
	if len(name) <= len(prefix)+1 || name[:len(prefix)+1] != prefix+"-" {
		return -1
	}
	i, err := strconv.Atoi(name[len(prefix)+1:])
	if err != nil || i < 0 {
		return -1
	}
	return i
}

// resumePoint is the stream sequence new consumers start at so that no
// event any of the old ones had not acknowledged is passed over: the
// lowest acknowledgement floor of the consumers with work outstanding,
// plus one. A consumer with nothing outstanding has acknowledged all it
// matches up to the stream's last sequence, read before it.
func resumePoint(ctx context.Context, js jetstream.JetStream, stream string, names []string) (uint64, error) {
	s, err := js.Stream(ctx, stream)
	if err != nil {
		return 0, fmt.Errorf("reading stream %s: %w", stream, err)
	}
	si, err := s.Info(ctx)
	if err != nil {
		return 0, fmt.Errorf("reading stream %s: %w", stream, err)
	}
	floor := si.State.LastSeq
	for _, name := range names {
		cons, err := s.Consumer(ctx, name)
		if err != nil {
			return 0, fmt.Errorf("reading consumer %s: %w", name, err)
		}
		ci, err := cons.Info(ctx)
		if err != nil {
			return 0, fmt.Errorf("reading consumer %s: %w", name, err)
		}
		if ci.NumAckPending > 0 || ci.NumPending > 0 {
			floor = min(floor, ci.AckFloor.Stream)
		}
	}
	return floor + 1, nil
}

// oldPartitions lists the partition consumers on stream of the
// durables (a partition's consumers of one kind are "<durable>-<i>"), and
// the sequence the new ones resume from.
func (c *Coordinator) oldPartitions(ctx context.Context, stream string, durables ...string) ([]string, uint64, error) {
	names, err := c.consumersOf(ctx, stream, func(name string) bool {
		return slices.ContainsFunc(durables, func(d string) bool { return partitionIndex(d, name) >= 0 })
	})
	if err != nil {
		return nil, 0, err
	}
	from, err := resumePoint(ctx, c.js, stream, names)
	if err != nil {
		return nil, 0, err
	}
	return names, from, nil
}

// deleteConsumers deletes the named consumers of stream; one already gone
// is no error.
func (c *Coordinator) deleteConsumers(ctx context.Context, stream string, names []string) error {
	for _, name := range names {
		if err := c.js.DeleteConsumer(ctx, stream, name); err != nil && !errors.Is(err, jetstream.ErrConsumerNotFound) {
			return fmt.Errorf("deleting consumer %s: %w", name, err)
		}
	}
	return nil
}

// unconsumedFrom is where the events begin that no consumer of the old
// count may have delivered, 0 when there are none: an old partition
// whose progress or starts consumer was never made (its coordinators
// stopped before they took it) has passed nothing over, and its events
// are read again from where the old deployment started its consumers
// (the start recorded on partition 0's; the stream's start when none
// is). Without it the resume point, read from the consumers there are,
// would pass over every start of a partition whose starts consumer was
// not made yet (TestRepartitionWithLanesMissing).
func (c *Coordinator) unconsumedFrom(ctx context.Context, have int) (uint64, error) {
	if have == 0 {
		return 0, nil // made before the count was recorded, and before the split
	}
	stream := c.store.StreamName()
	var from uint64 = 1
	if rec, err := c.js.Consumer(ctx, stream, ConsumerName(c.opts.durable, 0)); err == nil {
		from, _ = recordedStarts(rec.CachedInfo().Config)
		from = max(from, 1)
	}
	for i := range have {
		cons, err := c.js.Consumer(ctx, stream, ConsumerName(c.opts.durable, i))
		if errors.Is(err, jetstream.ErrConsumerNotFound) {
			return from, nil
		} else if err != nil {
			return 0, err
		}
		if slices.Equal(filtersOf(cons.CachedInfo().Config), eventlog.PartitionFilters(i, have)) {
			continue // made before the split: it delivers the starts too
		}
		if _, err := c.js.Consumer(ctx, stream, StartsConsumerName(c.opts.durable, i)); errors.Is(err, jetstream.ErrConsumerNotFound) {
			return from, nil
		} else if err != nil {
			return 0, err
		}
	}
	return 0, nil
}
