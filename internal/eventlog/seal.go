package eventlog

import (
	"bytes"
	"crypto/aes"
	"crypto/cipher"
	"crypto/hmac"
	"crypto/rand"
	"crypto/sha256"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"

	"github.com/nats-io/nats.go"
)

// Sealing: the data of events encrypted at rest.
//
// With a key ring in use (UseKeys), every event's data (the input and
// invocation state of a run-started, a node's output and state updates,
// signal and update data, fork state, failures: the whole JSON body) is
// written sealed with AES-256-GCM under the ring's current key, and read
// back under whichever key of the ring it names. The envelope stays
// plain: the "ce-*" attributes, the subject, the Nats-Msg-Id and the trace
// context, so that routing, NATS permissions, per-run optimistic
// concurrency, de-duplication and a stock CloudEvents reader keep working
// on a sealed log. On the wire a sealed event has
//
//	content-type: application/vnd.weft.sealed.v1   (its datacontenttype)
//	ce-weftkey:   <key id>                          (a CloudEvents extension)
//	body:         nonce (12 bytes) ‖ AES-256-GCM ciphertext and tag
//
// The additional data authenticated with it is the run id and the event
// type, so sealed data cannot be moved to another run or passed off as
// another type's. The nonce is synthetic (an HMAC-SHA256, under a key
// derived from the data key, of the event's id, run, type and data): the
// same event sealed twice under one key is the same message, so that a
// retried append is recognised as the same event by JetStream's
// de-duplication check (store.confirm), as it is for plain events. It
// reveals only that two messages carry the same event.
//
// Reading is lenient, writing is not: a process with a key ring reads
// plain events too (a log written before sealing was turned on), and a
// process without one reads plain events only. Sealed data whose key the
// process does not hold is ErrKeyMissing, naming the key id; sealed data
// that does not authenticate (truncated, tampered with, moved) is
// ErrMalformedEvent. Either way the event is refused (DecodeStored), never
// read as data. The coordinator hands such an event back rather than
// pass it over (deciding without it would decide wrong) and fails its run
// once it has tried maxDeliveries times; a worker hands the work item
// back to a worker that holds the key; a client's fold refuses the run.
//
// What stays plain: the envelope, and what the engine derives from the
// plain data it holds, into buckets beside the log: the read model's
// search attributes (declared by the graph: see internal/readmodel) and its
// run summaries (status, times, error types). Snapshots of runs are
// sealed like events (they are written as the data of an event-shaped
// message only when they are; see internal/coordinator).

// Codec names on the wire.
const (
	// ContentSealed is the datacontenttype of an event whose data is
	// sealed with AES-256-GCM.
	ContentSealed = "application/vnd.weft.sealed.v1"
	// ExtKeyID is the CloudEvents extension naming the key a sealed
	// event's data was sealed with.
	ExtKeyID = "weftkey"
	// contentVendor prefixes Weft's own content types: one this version
	// does not know is an unknown codec, not data.
	contentVendor = "application/vnd.weft."
	hdrKeyID      = headerPrefix + ExtKeyID
)

// KeySize is the size of a data key: AES-256.
const KeySize = 32

const nonceSize = 12

var (
	// ErrKeyMissing is wrapped by the error about sealed data whose key
	// this process does not hold (or when it holds no key ring at all):
	// the error names the key id. The event is refused, not corrupted: a
	// process that holds the key reads it.
	ErrKeyMissing = errors.New("sealed data's key not held")
	// ErrBadKey is wrapped by errors about a key ring: a key of the wrong
	// size, a missing or repeated id, an unreadable key file.
	ErrBadKey = errors.New("bad key")
)

// Keys is where the keys that seal events' data come from: a KeyRing
// read from a key file or the environment, or a user's own (backed by a
// KMS, say). A key id names one key for ever: sealers cache the cipher of
// every id they have used.
type Keys interface {
	// Current is the key new data is sealed with.
	Current() (Key, error)
	// Lookup returns the key named id, for reading; an error wrapping
	// ErrKeyMissing if there is none.
	Lookup(id string) (Key, error)
}

// sealer seals and opens events' data under a Keys.
type sealer struct {
	keys    Keys
	ciphers sync.Map // key id → *dataKey
}

// dataKey is a key's cipher and its nonce key.
type dataKey struct {
	aead     cipher.AEAD
	nonceKey []byte
}

// active is the process's sealer; nil when events are written plain.
var active atomic.Pointer[sealer]

// UseKeys makes this process seal the data of every event it encodes
// with keys, and open sealed data with them; nil turns sealing off (and
// reading sealed data then fails with ErrKeyMissing). It is process-wide,
// like the process's NATS credentials: a client, a coordinator, a worker
// and the UI server in one process share one key ring. The current key is
// checked now.
func UseKeys(keys Keys) error {
	if keys == nil {
		active.Store(nil)
		return nil
	}
	s := &sealer{keys: keys}
	k, err := keys.Current()
	if err != nil {
		return fmt.Errorf("the current key: %w", err)
	}
	if _, err := s.cipher(k); err != nil {
		return err
	}
	active.Store(s)
	return nil
}

// Sealing reports whether this process seals the events it writes.
func Sealing() bool { return active.Load() != nil }

// newSealer is a sealer over keys, beside the process's.
func newSealer(keys Keys) *sealer { return &sealer{keys: keys} }

// EncodeSealed is Encode with e's data sealed under keys' current key,
// whatever the process's ring (UseKeys): for tools and tests that hold
// keys of their own.
func EncodeSealed(e *Event, keys Keys) (*nats.Msg, error) { return encodeFast(e, newSealer(keys)) }

// EncodePlain is Encode with e's data left plain, whatever the process's
// ring: for tools that rewrite an encoded event's envelope (a sealed
// body is bound to its run and type).
func EncodePlain(e *Event) (*nats.Msg, error) { return encodeFast(e, nil) }

// DecodeSealed is Decode with sealed data opened under keys (nil: none),
// whatever the process's ring.
func DecodeSealed(subject string, hdr nats.Header, data []byte, keys Keys) (*Event, error) {
	if err := checkServerHeaders(subject, hdr); err != nil {
		return nil, err
	}
	var s *sealer
	if keys != nil {
		s = newSealer(keys)
	}
	if e, ok, err := decodeFast(subject, hdr, data, s); ok {
		return e, err
	}
	return decodeSDK(subject, hdr, data, s)
}

func (s *sealer) cipher(k Key) (*dataKey, error) {
	if v, ok := s.ciphers.Load(k.ID); ok {
		return v.(*dataKey), nil
	}
	if err := k.check(); err != nil {
		return nil, err
	}
	block, err := aes.NewCipher(k.Secret)
	if err != nil {
		return nil, fmt.Errorf("%w: key %q: %v", ErrBadKey, k.ID, err)
	}
	aead, err := cipher.NewGCM(block)
	if err != nil {
		return nil, fmt.Errorf("%w: key %q: %v", ErrBadKey, k.ID, err)
	}
	m := hmac.New(sha256.New, k.Secret)
	m.Write([]byte("weft sealed.v1 nonce key"))
	dk := &dataKey{aead: aead, nonceKey: m.Sum(nil)}
	v, _ := s.ciphers.LoadOrStore(k.ID, dk)
	return v.(*dataKey), nil
}

// sealAAD is the data authenticated with an event's sealed data.
func sealAAD(e *Event) []byte {
	aad := make([]byte, 0, 24+len(e.RunID)+len(e.Type))
	aad = append(aad, "weft sealed.v1\x00"...)
	aad = append(aad, e.RunID...)
	aad = append(aad, 0)
	return append(aad, e.Type...)
}

// seal returns e's data sealed under the current key, and the key's id.
func (s *sealer) seal(e *Event) (string, []byte, error) {
	k, err := s.keys.Current()
	if err != nil {
		return "", nil, fmt.Errorf("sealing %s event of run %q: the current key: %w", e.Type, e.RunID, err)
	}
	dk, err := s.cipher(k)
	if err != nil {
		return "", nil, fmt.Errorf("sealing %s event of run %q: %w", e.Type, e.RunID, err)
	}
	aad := sealAAD(e)
	m := hmac.New(sha256.New, dk.nonceKey)
	m.Write([]byte(e.ID))
	m.Write([]byte{0})
	m.Write(aad)
	m.Write([]byte{0})
	m.Write(e.Data)
	out := make([]byte, nonceSize, nonceSize+len(e.Data)+dk.aead.Overhead())
	copy(out, m.Sum(nil))
	return k.ID, dk.aead.Seal(out, out[:nonceSize], e.Data, aad), nil
}

// open returns the data of e (read from subject) sealed under key id.
func (s *sealer) open(subject string, e *Event, id string, body []byte) ([]byte, error) {
	if s == nil {
		return nil, fmt.Errorf("%w: %s: data sealed with key %q, and this process holds no key ring (-encrypt-keys, WEFT_ENCRYPT_KEYS)", ErrKeyMissing, subject, id)
	}
	k, err := s.keys.Lookup(id)
	if err != nil {
		if errors.Is(err, ErrKeyMissing) {
			return nil, fmt.Errorf("%w: %s: data sealed with key %q, which this process's key ring does not hold", ErrKeyMissing, subject, id)
		}
		return nil, fmt.Errorf("%s: key %q: %w", subject, id, err)
	}
	dk, err := s.cipher(k)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", subject, err)
	}
	if len(body) < nonceSize+dk.aead.Overhead() {
		return nil, fmt.Errorf("%w: %s: sealed data of %d bytes is truncated", ErrMalformedEvent, subject, len(body))
	}
	plain, err := dk.aead.Open(nil, body[:nonceSize], body[nonceSize:], sealAAD(e))
	if err != nil {
		return nil, fmt.Errorf("%w: %s: sealed data does not authenticate under key %q (tampered with, truncated, or sealed for another run or type)", ErrMalformedEvent, subject, id)
	}
	return plain, nil
}

// unseal turns a decoded envelope's data, of content type ct (sealed
// under key id), into its plain JSON, recording the key in e.KeyID.
func unseal(subject string, e *Event, ct, id string, s *sealer) error {
	if ct == ContentRef {
		// Kept beside the log (offload.go): the body and its own type.
		body, bct, err := resolve(subject, e.RunID, e.Data)
		if err != nil {
			return err
		}
		e.Data, ct = body, bct
	}
	switch {
	case ct == ContentSealed:
		if id == "" {
			return fmt.Errorf("%w: %s: sealed data without the %q extension naming its key", ErrMalformedEvent, subject, ExtKeyID)
		}
		plain, err := s.open(subject, e, id, e.Data)
		if err != nil {
			return err
		}
		e.Data, e.KeyID = plain, id
	case id != "":
		return fmt.Errorf("%w: %s: extension %q on data that is not sealed (content type %q)", ErrMalformedEvent, subject, ExtKeyID, ct)
	case len(ct) >= len(contentVendor) && ct[:len(contentVendor)] == contentVendor:
		return fmt.Errorf("%w: %s: unknown codec: content type %q", ErrMalformedEvent, subject, ct)
	}
	return nil
}

// sameData reports whether two stored bodies (with their headers) carry
// the same event data: the same bytes, or the same plain data sealed
// under two keys (a retried append across a key rotation).
func sameData(subject string, e *Event, ah, bh map[string][]string, a, b []byte) bool {
	if string(a) == string(b) {
		return true
	}
	s := active.Load()
	pa, erra := plainOf(subject, e, ah, a, s)
	pb, errb := plainOf(subject, e, bh, b, s)
	return erra == nil && errb == nil && string(pa) == string(pb)
}

func plainOf(subject string, e *Event, h map[string][]string, data []byte, s *sealer) ([]byte, error) {
	first := func(k string) string {
		if v := h[k]; len(v) > 0 {
			return v[0]
		}
		return ""
	}
	c := &Event{RunID: e.RunID, Type: e.Type, Data: data}
	if err := unseal(subject, c, first(hdrContentType), first(hdrKeyID), s); err != nil {
		return nil, err
	}
	return c.Data, nil
}

// msgEnvelope is what sealing authenticates of an encoded message: its
// run and type.
func msgEnvelope(m *nats.Msg) *Event {
	return &Event{RunID: m.Header.Get(hdrRunID), Type: Type(m.Header.Get(hdrType))}
}

// Sealed values: what the engine keeps beside the log that holds events'
// data (a run's snapshot), sealed like events when a key ring is in use.
// A sealed value is
//
//	"WSV1" ‖ len(key id) (1 byte) ‖ key id ‖ nonce (12) ‖ ciphertext ‖ tag
//
// authenticated with "weft sealed value.v1" 0x00 purpose 0x00 name, so
// that a value cannot be passed off as another (another run's snapshot).
// Its nonce is random: nothing de-duplicates values.
var valueMagic = []byte("WSV1")

func valueAAD(purpose, name string) []byte {
	return []byte("weft sealed value.v1\x00" + purpose + "\x00" + name)
}

// SealValue seals b, the value named name kept for purpose, under the
// process's current key; without a key ring it returns b as it is.
func SealValue(purpose, name string, b []byte) ([]byte, error) {
	s := active.Load()
	if s == nil {
		return b, nil
	}
	k, err := s.keys.Current()
	if err != nil {
		return nil, fmt.Errorf("sealing %s %q: the current key: %w", purpose, name, err)
	}
	dk, err := s.cipher(k)
	if err != nil {
		return nil, fmt.Errorf("sealing %s %q: %w", purpose, name, err)
	}
	out := make([]byte, 0, len(valueMagic)+1+len(k.ID)+nonceSize+len(b)+dk.aead.Overhead())
	out = append(out, valueMagic...)
	out = append(out, byte(len(k.ID)))
	out = append(out, k.ID...)
	nonce := make([]byte, nonceSize)
	if _, err := rand.Read(nonce); err != nil {
		return nil, err
	}
	out = append(out, nonce...)
	return dk.aead.Seal(out, nonce, b, valueAAD(purpose, name)), nil
}

// OpenValue returns the plain bytes of a value SealValue wrote (a plain
// value as it is): ErrKeyMissing when the process does not hold its key,
// ErrMalformedEvent when it does not authenticate.
func OpenValue(purpose, name string, b []byte) ([]byte, error) {
	if !bytes.HasPrefix(b, valueMagic) {
		return b, nil
	}
	rest := b[len(valueMagic):]
	if len(rest) < 1 || len(rest) < 1+int(rest[0]) {
		return nil, fmt.Errorf("%w: %s %q: sealed value truncated", ErrMalformedEvent, purpose, name)
	}
	id := string(rest[1 : 1+int(rest[0])])
	body := rest[1+int(rest[0]):]
	s := active.Load()
	if s == nil {
		return nil, fmt.Errorf("%w: %s %q: sealed with key %q, and this process holds no key ring", ErrKeyMissing, purpose, name, id)
	}
	k, err := s.keys.Lookup(id)
	if err != nil {
		return nil, fmt.Errorf("%w: %s %q: sealed with key %q, which this process's key ring does not hold", ErrKeyMissing, purpose, name, id)
	}
	dk, err := s.cipher(k)
	if err != nil {
		return nil, err
	}
	if len(body) < nonceSize+dk.aead.Overhead() {
		return nil, fmt.Errorf("%w: %s %q: sealed value truncated", ErrMalformedEvent, purpose, name)
	}
	plain, err := dk.aead.Open(nil, body[:nonceSize], body[nonceSize:], valueAAD(purpose, name))
	if err != nil {
		return nil, fmt.Errorf("%w: %s %q: sealed value does not authenticate under key %q", ErrMalformedEvent, purpose, name, id)
	}
	return plain, nil
}
