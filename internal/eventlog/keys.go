package eventlog

import (
	"crypto/rand"
	"encoding/base64"
	"fmt"
	"log/slog"
	"os"
	"strconv"
	"strings"
)

// Key rings: the keys events' data is sealed with (seal.go).
//
// A key ring's text form, in a key file (-encrypt-keys FILE) or in the
// variable WEFT_ENCRYPT_KEYS, is one key per line (or per comma):
//
//	<id>:<the 32-byte key in standard base64>
//
// blank lines and lines starting with "#" aside. The first key is the
// current one, which new data is sealed with; the others are read only.
// Rotation (weft keys rotate FILE) puts a new key first; a key is
// retired by deleting its line once no event that needs it is kept
// (after the retention period, or once its runs are archived and purged).

// EnvEncryptKeys is the variable a key ring may come from.
const EnvEncryptKeys = "WEFT_ENCRYPT_KEYS"

// Key is one data key: an id, which sealed events name (ExtKeyID), and
// 32 secret bytes. It never prints its secret.
type Key struct {
	ID     string
	Secret []byte
}

// String names the key without its secret.
func (k Key) String() string { return "key " + strconv.Quote(k.ID) }

// LogValue logs the key's id only.
func (k Key) LogValue() slog.Value { return slog.StringValue(k.ID) }

func (k Key) check() error {
	switch {
	case !validKeyID(k.ID):
		return fmt.Errorf("%w: key id %q: want 1 to 32 letters, digits, '-' or '_'", ErrBadKey, k.ID)
	case len(k.Secret) != KeySize:
		return fmt.Errorf("%w: key %q is %d bytes, want %d (AES-256)", ErrBadKey, k.ID, len(k.Secret), KeySize)
	}
	return nil
}

func validKeyID(id string) bool {
	if id == "" || len(id) > 32 {
		return false
	}
	for _, r := range id {
		if !(r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' || r == '-' || r == '_') {
			return false
		}
	}
	return true
}

// NewKey makes a random key named id.
func NewKey(id string) (Key, error) {
	k := Key{ID: id, Secret: make([]byte, KeySize)}
	if _, err := rand.Read(k.Secret); err != nil {
		return Key{}, err
	}
	return k, k.check()
}

// KeyRing is a list of keys, the current one first: the Keys of a key
// file or of WEFT_ENCRYPT_KEYS.
type KeyRing []Key

// Current returns the first key.
func (r KeyRing) Current() (Key, error) {
	if len(r) == 0 {
		return Key{}, fmt.Errorf("%w: an empty key ring", ErrBadKey)
	}
	return r[0], nil
}

// Lookup returns the key named id.
func (r KeyRing) Lookup(id string) (Key, error) {
	for _, k := range r {
		if k.ID == id {
			return k, nil
		}
	}
	return Key{}, fmt.Errorf("%w: key %q", ErrKeyMissing, id)
}

// Rotate returns the ring with a new random key first, named after the
// number of keys the ring has had ("k1", "k2", … the first unused).
func (r KeyRing) Rotate() (KeyRing, error) {
	n := len(r) + 1
	for ; ; n++ {
		if _, err := r.Lookup("k" + strconv.Itoa(n)); err != nil {
			break
		}
	}
	k, err := NewKey("k" + strconv.Itoa(n))
	if err != nil {
		return nil, err
	}
	return append(KeyRing{k}, r...), nil
}

// Text is the ring in its text form, for a key file.
func (r KeyRing) Text() string {
	var b strings.Builder
	b.WriteString("# Weft key ring: <id>:<base64 key>, the current key first. Keep this file secret.\n")
	for _, k := range r {
		b.WriteString(k.ID + ":" + base64.StdEncoding.EncodeToString(k.Secret) + "\n")
	}
	return b.String()
}

// String names the ring's keys without their secrets.
func (r KeyRing) String() string {
	ids := make([]string, len(r))
	for i, k := range r {
		ids[i] = k.ID
	}
	return "key ring [" + strings.Join(ids, " ") + "]"
}

// ParseKeyRing reads a ring's text form; where names it in errors
// (never the text, which is secret).
func ParseKeyRing(where, text string) (KeyRing, error) {
	var r KeyRing
	var entries []string
	for _, line := range strings.Split(text, "\n") {
		if strings.HasPrefix(strings.TrimSpace(line), "#") {
			continue
		}
		for _, e := range strings.Split(line, ",") {
			if e = strings.TrimSpace(e); e != "" {
				entries = append(entries, e)
			}
		}
	}
	for i, line := range entries {
		id, b64, ok := strings.Cut(line, ":")
		if !ok {
			return nil, fmt.Errorf("%w: %s: entry %d: want <id>:<base64 key>", ErrBadKey, where, i+1)
		}
		secret, err := base64.StdEncoding.DecodeString(strings.TrimSpace(b64))
		if err != nil {
			return nil, fmt.Errorf("%w: %s: key %q: not standard base64", ErrBadKey, where, id)
		}
		k := Key{ID: strings.TrimSpace(id), Secret: secret}
		if err := k.check(); err != nil {
			return nil, fmt.Errorf("%s: %w", where, err)
		}
		if _, err := r.Lookup(k.ID); err == nil {
			return nil, fmt.Errorf("%w: %s: key id %q given twice", ErrBadKey, where, k.ID)
		}
		r = append(r, k)
	}
	if len(r) == 0 {
		return nil, fmt.Errorf("%w: %s: no keys", ErrBadKey, where)
	}
	return r, nil
}

// LoadKeys reads the key ring a daemon is configured with: the key file
// path when it is not empty, else the variable WEFT_ENCRYPT_KEYS (its
// text form) when it is set; nil, nil when neither is.
func LoadKeys(path string) (KeyRing, error) {
	if path != "" {
		b, err := os.ReadFile(path)
		if err != nil {
			return nil, fmt.Errorf("%w: reading the key file: %v", ErrBadKey, err)
		}
		return ParseKeyRing(path, string(b))
	}
	if v, ok := os.LookupEnv(EnvEncryptKeys); ok && strings.TrimSpace(v) != "" {
		return ParseKeyRing(EnvEncryptKeys, v)
	}
	return nil, nil
}
