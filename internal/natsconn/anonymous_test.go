package natsconn_test

import (
	"context"
	"strings"
	"testing"

	"github.com/nats-io/nats-server/v2/server"

	"github.com/weft-dev/weft/internal/embedded"
	"github.com/weft-dev/weft/internal/natsconn"
	"github.com/weft-dev/weft/internal/testkit"
)

// TestAnonymousAccess: a server that lets anonymous connections reach the
// events stream is found out; one with users (Weft's roles) is not, and
// neither is a stream an anonymous connection cannot see.
func TestAnonymousAccess(t *testing.T) {
	open, _ := testkit.Store(t)
	cfg := natsconn.Config{Stream: "WEFT"}
	if w := cfg.AnonymousAccess(context.Background(), open.ClientURL()); !strings.Contains(w, "anonymous connections") || !strings.Contains(w, "delete the stream") {
		t.Errorf("open server: %q, want a warning", w)
	}
	other := natsconn.Config{Stream: "NOT-THERE"}
	if w := other.AnonymousAccess(context.Background(), open.ClientURL()); w != "" {
		t.Errorf("a stream it cannot see: %q, want none", w)
	}
	closed := testkit.ServerWith(t, embedded.Config{Users: []*server.User{{Username: "admin", Password: "s3cret"}}})
	if w := cfg.AnonymousAccess(context.Background(), closed.ClientURL()); w != "" {
		t.Errorf("server with users: %q, want none", w)
	}
	if w := cfg.AnonymousAccess(context.Background(), "nats://admin:s3cret@"+strings.TrimPrefix(closed.ClientURL(), "nats://")); w != "" {
		t.Errorf("a URL's user is not anonymous, and is not used: %q", w)
	}
}
