package coordinator

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math/rand/v2"
	"os"
	"slices"
	"strconv"
	"sync"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/weft-dev/weft/internal/eventlog"
	"github.com/weft-dev/weft/internal/logattr"
	"github.com/weft-dev/weft/internal/setup"
)

// Partitions. Runs are split into a fixed number of partitions by their
// slot (eventlog.PartitionFilters, eventlog.PartitionOf); each partition is
// two durable consumers of the events stream filtered on its slots, one
// for the runs' starts ("<durable>-starts-<i>") and one for the rest
// ("<durable>-<i>"; lanes.go). A coordinator consumes a partition only while it holds the
// partition's lease: a key "lease.<i>" in the KV bucket LeasesBucket, whose
// keys expire leaseTTL after their last write. The holder renews it every
// renewEvery with a revision-checked update; when it dies, the key expires
// and a standby creates it (a create fails while the key exists), so a
// partition changes hands within leaseTTL plus one acquisition tick.
//
// Coordinators announce themselves under "member.<id>" in the same bucket,
// with the same expiry. Each one holds at most its share, ceil(partitions
// / live members): one that holds more releases the excess (it stops
// consuming, then deletes the lease), one that holds fewer takes free
// partitions. Starting or stopping coordinators thus rebalances the
// partitions with no manual step.
//
// Why it is safe: a lease is an efficiency, not a lock. Every decision is
// appended under per-run optimistic concurrency over the run's decision
// subjects (events.Store.Append), so two coordinators deciding the same
// run at once cannot both land a decision: one gets a conflict, reads the
// run again, and finds the decision made. No decision is written twice;
// the cost of an overlap is a conflict. What a lease must not allow is a
// holder that lost it without knowing (a pause longer than leaseTTL)
// handling events on a stale cache and acknowledging them undecided; so a
// holder hands events back while its lease was last renewed longer ago
// than leaseTTL, and a gap in its partition's deliveries (events that went
// to another holder) drops the partition's cached runs (dispatch), and an
// event whose partition was released or lost while it waited its turn is
// handed back, not handled (inflight.go). A new holder resumes from the
// partition consumer's acknowledged position: events the old holder held
// come again at once when it handed them back on a clean stop or release,
// after the consumer's ack wait when it was killed.
//
// The number of partitions is recorded in the partition consumers, and a
// coordinator told another refuses to start unless told to repartition
// (repartition.go).

// LeasesBucket is the KV bucket of partition leases and coordinator
// announcements.
const LeasesBucket = "weft-coordinators"

// Lease timing defaults.
const (
	defaultLeaseTTL = 5 * time.Second
	minLeaseTTL     = time.Second
)

// Holder is what a lease or an announcement in LeasesBucket says of the
// coordinator that wrote it: its random id, and the host and process id
// it runs as, so that an operator (`nats kv get weft-coordinators
// lease.3`) or a test can tell which process holds a partition.
type Holder struct {
	ID   string `json:"id"`
	Host string `json:"host,omitempty"`
	PID  int    `json:"pid"`
}

// ParseHolder decodes the value of a lease or an announcement.
func ParseHolder(b []byte) (Holder, error) {
	var h Holder
	if err := json.Unmarshal(b, &h); err != nil || h.ID == "" {
		return Holder{}, fmt.Errorf("not a coordinator's lease: %q", b)
	}
	return h, nil
}

// holderValue is the value this coordinator writes under its keys.
func (c *Coordinator) holderValue() []byte {
	host, _ := os.Hostname()
	b, _ := json.Marshal(Holder{ID: c.id, Host: host, PID: os.Getpid()})
	return b
}

// LeaseKey is the key of partition p's lease in LeasesBucket.
func LeaseKey(p int) string { return leaseKey(p) }

// partitionSet tracks the partitions this coordinator holds.
type partitionSet struct {
	mu   sync.Mutex
	held map[int]*heldPartition
}

type heldPartition struct {
	rev     uint64
	renewed time.Time // when the lease was last written
	cancel  context.CancelFunc
	done    chan struct{}
}

// ConsumerName is the name of partition p's durable consumer.
func ConsumerName(durable string, p int) string { return durable + "-" + strconv.Itoa(p) }

// leaseKey and memberKey name the bucket's keys.
func leaseKey(p int) string      { return "lease." + strconv.Itoa(p) }
func memberKey(id string) string { return "member." + id }

// leases runs the lease loop until ctx ends: it announces the coordinator,
// renews what it holds, releases what exceeds its share and takes free
// partitions, starting consume for each partition it takes and stopping it
// for each it loses or releases.
func (c *Coordinator) leases(ctx context.Context, kv jetstream.KeyValue, consume func(context.Context, int)) {
	ttl := c.opts.leaseTTL
	tick := time.NewTicker(ttl / 5)
	defer tick.Stop()
	ps := &c.parts
	defer c.releaseAll(kv)
	for {
		c.leaseRound(ctx, kv, ps, consume)
		select {
		case <-ctx.Done():
			return
		case <-tick.C:
		}
	}
}

// leaseRound is one tick of the lease loop.
func (c *Coordinator) leaseRound(ctx context.Context, kv jetstream.KeyValue, ps *partitionSet, consume func(context.Context, int)) {
	rctx, cancel := context.WithTimeout(ctx, c.opts.leaseTTL/2)
	defer cancel()
	if _, err := kv.Put(rctx, memberKey(c.id), c.holder); err != nil {
		c.leaseWarn("announcing the coordinator", err)
		return
	}
	c.announced.Store(time.Now().UnixNano())
	members, err := c.members(rctx, kv)
	if err != nil {
		c.leaseWarn("counting coordinators", err)
		return
	}
	share := (c.opts.partitions + members - 1) / max(members, 1)
	c.renewLeases(rctx, kv, ps)
	c.releaseExcess(rctx, kv, ps, share, members)
	c.takeFree(ctx, rctx, kv, ps, share, members, consume)
}

// renewLeases renews the leases held; one that cannot be renewed is lost.
func (c *Coordinator) renewLeases(ctx context.Context, kv jetstream.KeyValue, ps *partitionSet) {
	ps.mu.Lock()
	held := make([]int, 0, len(ps.held))
	for p := range ps.held {
		held = append(held, p)
	}
	ps.mu.Unlock()
	for _, p := range held {
		h := ps.get(p)
		rev, err := kv.Update(ctx, leaseKey(p), c.holder, h.rev)
		if err != nil {
			c.log.Warn("lost a partition lease", logattr.Partition, p, logattr.Error, err)
			c.drop(p)
			continue
		}
		ps.setRev(p, rev)
	}
}

// releaseExcess releases the partitions held past the share, highest
// first.
func (c *Coordinator) releaseExcess(ctx context.Context, kv jetstream.KeyValue, ps *partitionSet, share, members int) {
	for len(ps.ids()) > share {
		ids := ps.ids()
		p := ids[len(ids)-1]
		rev := ps.get(p).rev
		c.drop(p)
		if err := kv.Delete(ctx, leaseKey(p), jetstream.LastRevision(rev)); err != nil {
			c.leaseWarn("releasing a partition lease", err)
		}
		c.log.Info("released a partition", logattr.Partition, p, logattr.Share, share, logattr.Members, members)
	}
}

// takeFree takes free partitions up to the share, starting at a random one
// so that coordinators starting together spread out, and consumes each
// until ctx ends or it is dropped; rctx bounds the lease round.
func (c *Coordinator) takeFree(ctx, rctx context.Context, kv jetstream.KeyValue, ps *partitionSet, share, members int, consume func(context.Context, int)) {
	n := c.opts.partitions
	start := rand.IntN(n)
	for k := 0; k < n && len(ps.ids()) < share; k++ {
		p := (start + k) % n
		if ps.get(p) != nil {
			continue
		}
		rev, err := kv.Create(rctx, leaseKey(p), c.holder)
		if err != nil {
			continue // held by another, or the bucket is away
		}
		pctx, pcancel := context.WithCancel(ctx)
		h := &heldPartition{rev: rev, renewed: time.Now(), cancel: pcancel, done: make(chan struct{})}
		ps.put(p, h)
		c.forgetPartition(p)
		c.log.Info("took a partition", logattr.Partition, p, logattr.Share, share, logattr.Members, members, logattr.Holder, c.id)
		go func() {
			defer close(h.done)
			consume(pctx, p)
		}()
	}
}

// members counts the live coordinators (their unexpired announcements).
func (c *Coordinator) members(ctx context.Context, kv jetstream.KeyValue) (int, error) {
	lister, err := kv.ListKeysFiltered(ctx, "member.>")
	if err != nil {
		if errors.Is(err, jetstream.ErrNoKeysFound) {
			return 1, nil
		}
		return 0, err
	}
	n := 0
	for range lister.Keys() {
		n++
	}
	return max(n, 1), nil
}

// drop stops consuming a partition (its buffered events are handed back)
// and forgets it.
func (c *Coordinator) drop(p int) {
	ps := &c.parts
	ps.mu.Lock()
	h := ps.held[p]
	delete(ps.held, p)
	ps.mu.Unlock()
	if h != nil {
		h.cancel()
		<-h.done
		c.forgetPartition(p) // another may decide its runs meanwhile
	}
}

// releaseAll stops every partition and deletes the leases and the
// announcement, so that standbys take over at once on a clean stop.
func (c *Coordinator) releaseAll(kv jetstream.KeyValue) {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	for _, p := range c.parts.ids() {
		rev := c.parts.get(p).rev
		c.drop(p)
		_ = kv.Delete(ctx, leaseKey(p), jetstream.LastRevision(rev))
	}
	_ = kv.Delete(ctx, memberKey(c.id))
}

// forgetPartition drops the cached runs of a partition just taken: while
// another coordinator held it, they may have moved on.
func (c *Coordinator) forgetPartition(p int) {
	c.cache.dropIf(func(run string) bool { return eventlog.PartitionOf(run, c.opts.partitions) == p })
}

func (c *Coordinator) leaseWarn(what string, err error) {
	c.log.Warn(what, logattr.Error, err)
}

func (ps *partitionSet) get(p int) *heldPartition {
	ps.mu.Lock()
	defer ps.mu.Unlock()
	return ps.held[p]
}

func (ps *partitionSet) put(p int, h *heldPartition) {
	ps.mu.Lock()
	defer ps.mu.Unlock()
	if ps.held == nil {
		ps.held = map[int]*heldPartition{}
	}
	ps.held[p] = h
}

func (ps *partitionSet) setRev(p int, rev uint64) {
	ps.mu.Lock()
	defer ps.mu.Unlock()
	if h := ps.held[p]; h != nil {
		h.rev, h.renewed = rev, time.Now()
	}
}

// current reports whether partition p is held and its lease was renewed
// within ttl: past that, another coordinator may hold it.
func (ps *partitionSet) current(p int, ttl time.Duration) bool {
	ps.mu.Lock()
	defer ps.mu.Unlock()
	h := ps.held[p]
	return h != nil && time.Since(h.renewed) < ttl
}

// ids lists the held partitions in order.
func (ps *partitionSet) ids() []int {
	ps.mu.Lock()
	defer ps.mu.Unlock()
	out := make([]int, 0, len(ps.held))
	for p := range ps.held {
		out = append(out, p)
	}
	for i := 1; i < len(out); i++ {
		for j := i; j > 0 && out[j] < out[j-1]; j-- {
			out[j], out[j-1] = out[j-1], out[j]
		}
	}
	return out
}

// Partitions returns the partitions this coordinator holds now.
func (c *Coordinator) Partitions() []int { return c.parts.ids() }

// LeasesKVConfig is the leases bucket as a coordinator, or the admin's
// set-up (internal/provision), creates it.
func LeasesKVConfig(ttl time.Duration, replicas int) jetstream.KeyValueConfig {
	return jetstream.KeyValueConfig{
		Bucket:      LeasesBucket,
		Description: "Weft coordinator partition leases and announcements",
		History:     1,
		TTL:         ttl,
		Replicas:    replicas,
	}
}

// leasesKV opens (creating if missing) the leases bucket.
func (c *Coordinator) leasesKV(ctx context.Context) (jetstream.KeyValue, error) {
	kv, _, err := setup.CreateKV(ctx, c.js, LeasesKVConfig(c.opts.leaseTTL, c.replicas(ctx)))
	if err != nil {
		return nil, fmt.Errorf("opening the leases bucket %s: %w", LeasesBucket, err)
	}
	if st, serr := kv.Status(ctx); serr == nil && st.TTL() != c.opts.leaseTTL {
		c.log.Warn("the leases bucket has another lease duration; using it as it is", logattr.Have, st.TTL(), logattr.Want, c.opts.leaseTTL)
		c.opts.leaseTTL = max(st.TTL(), minLeaseTTL)
	}
	return kv, nil
}

// replicas is the events stream's replica count, for the buckets Weft
// creates beside it.
func (c *Coordinator) replicas(ctx context.Context) int {
	s, err := c.js.Stream(ctx, c.store.StreamName())
	if err != nil {
		return 1
	}
	return max(s.CachedInfo().Config.Replicas, 1)
}

// partitionConsumer returns the progress consumer of partition p
// (lanes.go), creating it when missing, splitting one made before the
// starts had their own; an existing one is used as it is.
func (c *Coordinator) partitionConsumer(ctx context.Context, p int) (jetstream.Consumer, error) {
	name := ConsumerName(c.opts.durable, p)
	cons, err := c.js.Consumer(ctx, c.store.StreamName(), name)
	startAt := c.startAt
	if err == nil {
		have := cons.CachedInfo().Config
		want := eventlog.ProgressFilters(p, c.opts.partitions)
		switch {
		case slices.Equal(filtersOf(have), want):
			return cons, nil
		case slices.Equal(filtersOf(have), eventlog.PartitionFilters(p, c.opts.partitions)):
			// Made for this count before the starts had a consumer of
			// their own (lanes.go).
			return c.splitPartition(ctx, p, cons)
		}
		if p == 0 {
			// Partition 0's consumer records the deployment's count:
			// checkPartitions refuses a mismatch.
			c.log.Warn("a partition consumer has other filters (another partition count?); using it as it is",
				logattr.Consumer, name, logattr.Have, filtersOf(have), logattr.Want, want)
			return cons, nil
		}
		// Partition 0's agrees with this coordinator: this one is left
		// from a repartition that was interrupted. Replace it, from where
		// the repartition started the new consumers.
		rec, err := c.js.Consumer(ctx, c.store.StreamName(), ConsumerName(c.opts.durable, 0))
		if err != nil {
			return nil, err
		}
		startAt, _ = recordedStarts(rec.CachedInfo().Config)
		c.log.Warn("replacing a partition consumer left from another partition count", logattr.Consumer, name, logattr.FromSeq, startAt)
		if err := c.js.DeleteConsumer(ctx, c.store.StreamName(), name); err != nil && !errors.Is(err, jetstream.ErrConsumerNotFound) {
			return nil, err
		}
	} else if !errors.Is(err, jetstream.ErrConsumerNotFound) {
		return nil, err
	}
	return setup.CreateConsumer(ctx, c.js, c.store.StreamName(), c.partitionConfig(p, startAt))
}

// partitionConfig is partition p's progress consumer, delivering from startAt (0:
// from the start); partition 0's records the partition count and where a
// repartition started the timer consumers.
func (c *Coordinator) partitionConfig(p int, startAt uint64) jetstream.ConsumerConfig {
	cfg := c.laneConfig(p, startAt, progressLane)
	if p == 0 && c.timersStartAt > 0 {
		cfg.Metadata[timersStartMeta] = strconv.FormatUint(c.timersStartAt, 10)
	}
	return cfg
}

func filtersOf(cfg jetstream.ConsumerConfig) []string {
	if cfg.FilterSubject != "" {
		return []string{cfg.FilterSubject}
	}
	return cfg.FilterSubjects
}
