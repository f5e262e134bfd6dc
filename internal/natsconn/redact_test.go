package natsconn_test

import (
	"errors"
	"strings"
	"testing"

	"github.com/weft-dev/weft/internal/natsconn"
)

// TestRedact checks the redaction itself on the URL forms NATS accepts.
func TestRedact(t *testing.T) {
	for _, tc := range []struct{ in, want string }{
		{"nats://u:p@127.0.0.1:4222", "nats://127.0.0.1:4222"},
		{"nats://token@host:4222", "nats://host:4222"},
		{"nats://u:p@a:1, nats://u:p@b:2", "nats://a:1,nats://b:2"},
		{"u:p@host:4222", "host:4222"},
		{"nats://u:p%zz@host:4222", "nats://host:4222"},
		{"tls://u:p@host:4222/x", "tls://host:4222/x"},
		{"nats://host:4222", "nats://host:4222"},
	} {
		if got := natsconn.Redact(tc.in); got != tc.want {
			t.Errorf("Redact(%q) = %q, want %q", tc.in, got, tc.want)
		}
	}
}

// TestConnectErrorRedacted: a failed connection names the server without
// its user information.
func TestConnectErrorRedacted(t *testing.T) {
	c := natsconn.Config{User: "u", Password: "s3cr3t-pw"}
	_, err := c.Connect("nats://u:s3cr3t-url@127.0.0.1:1")
	if err == nil {
		t.Fatal("connected to port 1")
	}
	if strings.Contains(err.Error(), "s3cr3t") || !strings.Contains(err.Error(), "nats://127.0.0.1:1") {
		t.Fatalf("error %q", err)
	}
	if errors.Unwrap(err) == nil {
		t.Fatal("the cause is lost")
	}
}

func TestValidateCredentials(t *testing.T) {
	for _, tc := range []struct {
		name string
		c    natsconn.Config
		want string
	}{
		{"password without user", natsconn.Config{Password: "p"}, "-password needs -user"},
		{"two ways", natsconn.Config{User: "u", Creds: "x.creds"}, "one way to authenticate"},
		{"bad prefix", natsconn.Config{InboxPrefix: "a.*"}, "-inbox-prefix"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			tc.c.Storage, tc.c.Replicas, tc.c.Stream = "file", 1, "WEFT"
			err := tc.c.Validate()
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("got %v, want %q", err, tc.want)
			}
		})
	}
}
