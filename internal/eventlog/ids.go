package eventlog

import (
	"crypto/rand"
	"encoding/base32"
	"encoding/binary"
	"strings"
	"time"
)

// B32 is the alphabet of Weft's generated ids: lowercase, sortable, safe
// as a subject token.
var B32 = base32.NewEncoding("0123456789abcdefghijklmnopqrstuv").WithPadding(base32.NoPadding)

// DecisionID derives a deterministic event id from the parts of what an
// event decides, so the same decision always gets the same de-duplication
// key, whichever process makes it.
func DecisionID[T ~string](runID string, t T, parts ...string) string {
	return runID + ":" + kind(string(t)) + ":" + strings.Join(parts, ":")
}

// RandomID returns a random id for events that state a one-off fact (a
// signal, a cancel request).
func RandomID() string {
	var b [10]byte
	_, _ = rand.Read(b[:])
	return B32.EncodeToString(b[:])
}

// NewRunID returns a new run id: 26 characters, sortable by creation time
// (48 bits of milliseconds, then 80 random bits), safe as a subject token.
func NewRunID() string {
	var b [16]byte
	binary.BigEndian.PutUint64(b[:8], uint64(time.Now().UnixMilli())<<16)
	_, _ = rand.Read(b[6:])
	return B32.EncodeToString(b[:])
}

// NewNonce returns a random nonce for a run's start (RunStartedData.Nonce):
// 26 characters, 128 random bits.
func NewNonce() string {
	var b [16]byte
	_, _ = rand.Read(b[:])
	return B32.EncodeToString(b[:])
}

// UpdateEventID is the event id of update updateID of run runID (a
// signal with SignalReceivedData.Update set): "<run>:signal:u:<update>".
// A signal id is a token, with no ':', so no signal's id is an update's.
func UpdateEventID(runID, updateID string) string {
	return DecisionID(runID, SignalReceived, "u", updateID)
}
