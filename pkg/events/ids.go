package events

import (
	"crypto/rand"
	"encoding/binary"
	"time"

	"github.com/weft-dev/weft/internal/eventlog"
)

// NewRunID returns a new run id: 26 characters, sortable by creation time
// (48 bits of milliseconds, then 80 random bits), safe as a subject token.
func NewRunID() string {
	var b [16]byte
	binary.BigEndian.PutUint64(b[:8], uint64(time.Now().UnixMilli())<<16)
	_, _ = rand.Read(b[6:])
	return eventlog.B32.EncodeToString(b[:])
}

// NewNonce returns a random nonce for a run's start (RunStartedData.Nonce):
// 26 characters, 128 random bits.
func NewNonce() string {
	var b [16]byte
	_, _ = rand.Read(b[:])
	return eventlog.B32.EncodeToString(b[:])
}
