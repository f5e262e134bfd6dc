package events

import (
	"crypto/rand"
	"crypto/sha256"
	"encoding/base32"
	"encoding/binary"
	"encoding/hex"
	"strings"
	"time"
)

var b32 = base32.NewEncoding("0123456789abcdefghijklmnopqrstuv").WithPadding(base32.NoPadding)

// NewRunID returns a new run id: 26 characters, sortable by creation time
// (48 bits of milliseconds, then 80 random bits), safe as a subject token.
func NewRunID() string {
	var b [16]byte
	binary.BigEndian.PutUint64(b[:8], uint64(time.Now().UnixMilli())<<16)
	_, _ = rand.Read(b[6:])
	return b32.EncodeToString(b[:])
}

// DecisionID derives a deterministic event id from the parts of what an
// event decides, so the same decision always gets the same de-duplication
// key, whichever process makes it.
func DecisionID(runID string, t Type, parts ...string) string {
	return runID + ":" + kinds[t] + ":" + strings.Join(parts, ":")
}

// IdempotencyKey is the key a node attempt's side effects are guarded by:
// stable across redeliveries of the same logical execution (run, node,
// activation, item, attempt), different for every other.
func IdempotencyKey(runID string, ref NodeRef, attempt int) string {
	h := sha256.Sum256([]byte(runID + "/" + ref.Key() + "/" + itoa(attempt)))
	return hex.EncodeToString(h[:16])
}

// RandomID returns a random id for events that state a one-off fact (a
// signal, a cancel request).
func RandomID() string {
	var b [10]byte
	_, _ = rand.Read(b[:])
	return b32.EncodeToString(b[:])
}
