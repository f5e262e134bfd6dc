package gateway_test

import (
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/weft-dev/weft/internal/gateway"
)

func TestVerify(t *testing.T) {
	secret, body := []byte("whsec-0123456789abcdef"), []byte(`{"a":1}`)
	now := time.Unix(1_800_000_000, 0)
	good := func(at time.Time) string {
		return fmt.Sprintf("t=%d,v1=%s", at.Unix(), gateway.Sign(secret, at.Unix(), body))
	}
	for _, c := range []struct {
		name, header string
		body         []byte
		ok           bool
	}{
		{"good", good(now), body, true},
		{"two signatures, one good (secret rotation)", good(now) + ",v1=00", body, true},
		{"tampered body", good(now), []byte(`{"a":2}`), false},
		{"old", good(now.Add(-6 * time.Minute)), body, false},
		{"future", good(now.Add(6 * time.Minute)), body, false},
		{"no timestamp", "v1=" + gateway.Sign(secret, now.Unix(), body), body, false},
		{"empty", "", body, false},
		{"garbage", "t=x,v1=y", body, false},
	} {
		err := gateway.Verify(c.header, c.body, secret, now, 5*time.Minute)
		if c.ok != (err == nil) || (err != nil && !errors.Is(err, gateway.ErrSignature)) {
			t.Errorf("%s: %v", c.name, err)
		}
	}
}

// FuzzVerify: no header or body panics the verifier, and nothing but the
// real signature passes.
func FuzzVerify(f *testing.F) {
	secret := []byte("whsec-0123456789abcdef")
	f.Add("t=1800000000,v1=abc", []byte("{}"))
	f.Add(",,,=,t=,v1=", []byte(""))
	f.Fuzz(func(t *testing.T, header string, body []byte) {
		now := time.Unix(1_800_000_000, 0)
		if gateway.Verify(header, body, secret, now, 5*time.Minute) == nil {
			// Only a header carrying the true signature of some
			// timestamp within the tolerance verifies.
			ok := false
			for d := int64(-300); d <= 300 && !ok; d++ {
				ok = containsSig(header, gateway.Sign(secret, now.Unix()+d, body))
			}
			if !ok {
				t.Fatalf("verified without the signature: %q", header)
			}
		}
	})
}

func containsSig(header, sig string) bool {
	for i := 0; i+len(sig) <= len(header); i++ {
		if header[i:i+len(sig)] == sig {
			return true
		}
	}
	return false
}
