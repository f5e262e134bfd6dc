package coordinator

import "time"

// WithAckWait sets the ack wait of the partition consumers the coordinator
// creates (default 10s), for tests that outlast it.
func WithAckWait(d time.Duration) Option { return func(o *options) { o.ackWait = d } }
