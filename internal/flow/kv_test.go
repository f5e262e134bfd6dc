package flow

import (
	"fmt"
	"testing"

	"github.com/nats-io/nats.go/jetstream"
)

// A lost compare-and-set is a conflict whichever way the server says it:
// a single server's "wrong last sequence" (10071), a replicated bucket's
// (10164, "key revision mismatch"), a Create of a key that exists.
func TestConflictCodes(t *testing.T) {
	for _, tc := range []struct {
		name string
		err  error
		want bool
	}{
		{"key exists", jetstream.ErrKeyExists, true},
		{"revision mismatch", fmt.Errorf("updating: %w", jetstream.ErrKeyRevisionMismatch), true},
		{"R1 code", &jetstream.APIError{Code: 400, ErrorCode: jetstream.JSErrCodeStreamWrongLastSequence}, true},
		{"R3 code", fmt.Errorf("nats: %w", &jetstream.APIError{Code: 400, ErrorCode: jetstream.JSErrCodeStreamWrongLastSequenceConstant}), true},
		{"no responders", jetstream.ErrNoStreamResponse, false},
		{"nil", nil, false},
	} {
		if got := conflict(tc.err); got != tc.want {
			t.Errorf("%s: conflict(%v) = %v, want %v", tc.name, tc.err, got, tc.want)
		}
	}
}
