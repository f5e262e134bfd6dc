package workqueue

import (
	"time"

	"github.com/nats-io/nats.go/jetstream"
)

// Worker announcements: a running worker keeps an entry in the KV bucket
// WorkersBucket (pkg/worker, announce.go).

// Announcement defaults.
const (
	// WorkersBucket is the KV bucket of worker announcements.
	WorkersBucket = "weft-workers"
	// DefaultAnnounceInterval is how often a worker refreshes its entry.
	DefaultAnnounceInterval = 10 * time.Second
	// AnnounceTTL is how long an entry lives without a refresh (the
	// bucket's max age, set when the bucket is created).
	AnnounceTTL = 3 * DefaultAnnounceInterval
)

// WorkersKVConfig is the announcements bucket as workers create it.
func WorkersKVConfig(replicas int) jetstream.KeyValueConfig {
	return jetstream.KeyValueConfig{
		Bucket:      WorkersBucket,
		Description: "Weft workers: the queues and node types each live worker serves",
		TTL:         AnnounceTTL,
		History:     1,
		Replicas:    replicas,
	}
}
