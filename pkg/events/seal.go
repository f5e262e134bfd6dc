package events

import "github.com/weft-dev/weft/internal/eventlog"

// Encryption at rest (internal/eventlog/seal.go and keys.go say how):
// with a key ring in use, every event's data is sealed with AES-256-GCM
// under the ring's current key; the envelope stays plain.

// Keys is where the keys that seal events' data come from: a KeyRing, or
// a user's own (backed by a KMS, say).
type Keys = eventlog.Keys

// Key is one data key: an id, which sealed events name, and 32 secret
// bytes (it never prints them).
type Key = eventlog.Key

// KeyRing is a list of keys, the current one first.
type KeyRing = eventlog.KeyRing

// The wire names of sealed events.
const (
	// ContentSealed is a sealed event's datacontenttype.
	ContentSealed = eventlog.ContentSealed
	// ExtKeyID is the CloudEvents extension naming its key.
	ExtKeyID = eventlog.ExtKeyID
	// EnvEncryptKeys is the variable a key ring may come from.
	EnvEncryptKeys = eventlog.EnvEncryptKeys
)

// ErrKeyMissing is wrapped by the error about sealed data whose key this
// process does not hold; ErrBadKey by errors about a key ring.
var (
	ErrKeyMissing = eventlog.ErrKeyMissing
	ErrBadKey     = eventlog.ErrBadKey
)

// UseKeys makes this process seal the data of the events it writes with
// keys and open sealed data with them (process-wide); nil turns sealing
// off.
func UseKeys(keys Keys) error { return eventlog.UseKeys(keys) }

// Sealing reports whether this process seals the events it writes.
func Sealing() bool { return eventlog.Sealing() }

// NewKey makes a random key named id.
func NewKey(id string) (Key, error) { return eventlog.NewKey(id) }

// ParseKeyRing reads a key ring's text form ("<id>:<base64 key>" per line
// or comma, the current key first); where names it in errors.
func ParseKeyRing(where, text string) (KeyRing, error) { return eventlog.ParseKeyRing(where, text) }

// LoadKeys reads the key file at path, or else WEFT_ENCRYPT_KEYS; nil when
// neither is given.
func LoadKeys(path string) (KeyRing, error) { return eventlog.LoadKeys(path) }

// Large payloads beside the log (internal/eventlog/offload.go).
const (
	// ContentRef is the datacontenttype of an event whose body is kept
	// in the payloads bucket.
	ContentRef = eventlog.ContentRef
	// PayloadsBucket is the Object Store bucket of large payloads.
	PayloadsBucket = eventlog.PayloadsBucket
	// DefaultOffloadAt is the threshold bodies are offloaded at by
	// default (256 KiB).
	DefaultOffloadAt = eventlog.DefaultOffloadAt
	// MaxPayloadObject is the largest body kept beside the log.
	MaxPayloadObject = eventlog.MaxPayloadObject
)

// WithOffloadAt sets the threshold of a store Open opens: bodies over n
// bytes are kept in the payloads bucket (default DefaultOffloadAt, on by
// default); 0 or less keeps every body in the log.
func WithOffloadAt(n int) Option { return eventlog.WithOffloadAt(n) }
