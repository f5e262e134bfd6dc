package coordinator

import "time"

// WithAckWait sets the ack wait of the partition consumers the coordinator
// creates (default 10s), for tests that outlast it.
func WithAckWait(d time.Duration) Option { return func(o *options) { o.ackWait = d } }

// DefaultLocalTypes are the types a coordinator runs itself unless told
// otherwise (defaultLocal), sorted.
func DefaultLocalTypes() []string {
	return (&Coordinator{opts: options{local: defaultLocal()}}).localTypes()
}
