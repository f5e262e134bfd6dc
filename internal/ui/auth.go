package ui

import (
	"bufio"
	"bytes"
	"crypto/sha256"
	"crypto/subtle"
	"encoding/binary"
	"errors"
	"fmt"
	"os"
	"strings"
	"sync"
	"unicode"
	"unicode/utf8"

	"golang.org/x/crypto/bcrypt"
)

// Password rules.
const (
	// MinPasswordLength is the fewest characters a UI password may have:
	// a plain one (-ui-password) is refused at start-up, and so is one
	// given to HashPassword.
	MinPasswordLength = 12
	// MaxPasswordLength is the most bcrypt takes (bytes): it ignores
	// anything longer, so HashPassword refuses it.
	MaxPasswordLength = 72
	// MinHashCost is the lowest bcrypt cost a password file may use
	// (htpasswd -B defaults to 5: give it -C 10 or more);
	// DefaultHashCost is what HashPassword uses when given 0.
	MinHashCost     = 10
	DefaultHashCost = 12
)

// ErrWeakPassword is wrapped by the errors about a password that is too
// short or too long.
var ErrWeakPassword = errors.New("password refused")

// minHashCost is MinHashCost; the package's tests lower it, so that they
// do not spend seconds in bcrypt.
var minHashCost = MinHashCost

// CheckPassword says why password may not be the UI's, or nil.
func CheckPassword(password string) error {
	if n := utf8.RuneCountInString(password); n < MinPasswordLength {
		return fmt.Errorf("%w: %d characters, want at least %d (a passphrase of a few words will do)", ErrWeakPassword, n, MinPasswordLength)
	}
	if len(password) > MaxPasswordLength {
		return fmt.Errorf("%w: %d bytes, bcrypt takes at most %d", ErrWeakPassword, len(password), MaxPasswordLength)
	}
	return nil
}

// checkUser says why user may not be the UI's, or nil: HTTP basic auth
// cannot carry a ':' in it, and a password file has one line per user.
func checkUser(user string) error {
	if strings.ContainsFunc(user, func(r rune) bool { return r == ':' || unicode.IsControl(r) || unicode.IsSpace(r) }) {
		return fmt.Errorf("ui: user %q: no ':', spaces or control characters", user)
	}
	return nil
}

// HashPassword returns the password file's line for user and password:
// "USER:BCRYPT-HASH" (the format of htpasswd -B, which ReadPasswordFile
// reads), at cost (0: DefaultHashCost). The password must pass
// CheckPassword.
func HashPassword(user, password string, cost int) (string, error) {
	if user == "" {
		return "", errors.New("ui: a user is required")
	}
	if err := checkUser(user); err != nil {
		return "", err
	}
	if err := CheckPassword(password); err != nil {
		return "", err
	}
	if cost == 0 {
		cost = DefaultHashCost
	}
	if cost < minHashCost || cost > bcrypt.MaxCost {
		return "", fmt.Errorf("ui: bcrypt cost %d: want %d to %d", cost, minHashCost, bcrypt.MaxCost)
	}
	h, err := bcrypt.GenerateFromPassword([]byte(password), cost)
	if err != nil {
		return "", fmt.Errorf("ui: hashing the password: %w", err)
	}
	return user + ":" + string(h), nil
}

// ReadPasswordFile reads a UI password file: one line "USER:BCRYPT-HASH"
// (as 'weft ui hash-password' and htpasswd -B -C 10 write it); blank
// lines and lines starting with '#' are skipped. The errors name the
// file and the line.
func ReadPasswordFile(path string) (user, hash string, err error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return "", "", fmt.Errorf("ui: password file: %w", err)
	}
	sc := bufio.NewScanner(bytes.NewReader(b))
	for n := 1; sc.Scan(); n++ {
		line := strings.TrimSpace(sc.Text())
		if line == "" || strings.HasPrefix(line, "#") {
			continue
		}
		if user != "" {
			return "", "", fmt.Errorf("ui: password file %s:%d: a second user; the UI has one", path, n)
		}
		u, h, ok := strings.Cut(line, ":")
		if !ok || u == "" {
			return "", "", fmt.Errorf("ui: password file %s:%d: want USER:BCRYPT-HASH, as 'weft ui hash-password' writes", path, n)
		}
		if err := checkHash(h); err != nil {
			return "", "", fmt.Errorf("ui: password file %s:%d: %w", path, n, err)
		}
		user, hash = u, h
	}
	if err := sc.Err(); err != nil {
		return "", "", fmt.Errorf("ui: password file %s: %w", path, err)
	}
	if user == "" {
		return "", "", fmt.Errorf("ui: password file %s: no USER:BCRYPT-HASH line", path)
	}
	return user, hash, nil
}

// checkHash says why h is not a bcrypt hash the UI takes, or nil. The
// hash itself is never in the message: it is a secret's digest.
func checkHash(h string) error {
	cost, err := bcrypt.Cost([]byte(h))
	switch {
	case err != nil:
		return errors.New("not a bcrypt hash ($2a$, $2b$ or $2y$…): write it with 'weft ui hash-password', or htpasswd -B -C 10")
	case cost < minHashCost:
		return fmt.Errorf("bcrypt cost %d: want at least %d (htpasswd -B -C %d, or 'weft ui hash-password')", cost, minHashCost, MinHashCost)
	}
	return nil
}

// credentials checks a request's user and password, in constant time
// whatever is wrong with them.
type credentials struct {
	user string
	// want is credDigest(user, password) for a plain password; hash
	// the bcrypt hash instead.
	want [32]byte
	hash []byte

	// verified is the digest of the user and password bcrypt last
	// accepted: every request carries them (basic auth), and bcrypt is
	// slow by design. Only credentials that passed are kept.
	mu       sync.Mutex
	verified *[32]byte
}

func newCredentials(cfg *Config) *credentials {
	c := &credentials{user: cfg.User}
	if cfg.PasswordHash != "" {
		c.hash = []byte(cfg.PasswordHash)
	} else {
		c.want = credDigest(cfg.User, cfg.Password)
	}
	return c
}

// credDigest digests a user and a password together, the user's length
// first, so that no other split of the same bytes digests alike.
func credDigest(user, password string) [32]byte {
	h := sha256.New()
	var n [8]byte
	binary.BigEndian.PutUint64(n[:], uint64(len(user)))
	h.Write(n[:])
	h.Write([]byte(user))
	h.Write([]byte(password))
	var d [32]byte
	h.Sum(d[:0])
	return d
}

// check says whether user and password are the UI's, and whether the
// user is (for the log line). Nothing is compared in variable time.
func (c *credentials) check(user, password string) (ok, knownUser bool) {
	hu, wu := sha256.Sum256([]byte(user)), sha256.Sum256([]byte(c.user))
	knownUser = subtle.ConstantTimeCompare(hu[:], wu[:]) == 1
	got := credDigest(user, password)
	if c.hash == nil {
		return subtle.ConstantTimeCompare(got[:], c.want[:]) == 1, knownUser
	}
	c.mu.Lock()
	v := c.verified
	c.mu.Unlock()
	if v != nil && subtle.ConstantTimeCompare(got[:], v[:]) == 1 {
		return true, true
	}
	// bcrypt runs whether the user is right or not: the time taken does
	// not say which of the two was wrong.
	passOK := bcrypt.CompareHashAndPassword(c.hash, []byte(password)) == nil
	if !knownUser || !passOK {
		return false, knownUser
	}
	c.mu.Lock()
	c.verified = &got
	c.mu.Unlock()
	return true, true
}
