// Package natsconn is the NATS connection configuration shared by Weft's
// daemons and CLI: server URL, credentials, TLS and the events stream's
// settings, from flags with environment-variable defaults.
//
// The stream settings (-storage, -replicas, -duplicates, -max-age) are those
// a process creates the stream with when it is missing. An existing stream
// is used as it is, whatever the flags say (see package events); 'weft
// admin apply' changes it on purpose.
//
// Credentials are a user and password (-user, -password; or in the URL),
// an nkey seed file (-nkey) or a decentralized-auth credentials file
// (-creds). A connection made with a user name uses its own inbox prefix,
// "_INBOX_<user>", so that the roles of deploy/nats/auth (see roles.go)
// can each be allowed to subscribe to their own replies only. Secrets
// never reach a log: Redact strips the user information of URLs, and
// every URL this package puts in an error or a log line is redacted.
//
// The roles (roles.go: Deployment, its users and their permissions) and
// their credentials (authconf.go: WriteRoles, the servers' configuration,
// the <user>.env files) are generated here for 'weft roles'. Namespaces
// (namespace.go) are one NATS account each, with the same roles inside
// and a quota the servers enforce; -namespace and -roles-dir say which a
// process serves and with which credentials (Config.Targets,
// VerifyNamespace).
package natsconn

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"log/slog"
	"os"
	"strings"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/weft-dev/weft/internal/eventlog"
	"github.com/weft-dev/weft/internal/logattr"
	"github.com/weft-dev/weft/internal/setup"
	"github.com/weft-dev/weft/pkg/events"
)

// Config says how to reach NATS and how the events stream is stored.
type Config struct {
	URL      string // WEFT_NATS_URL; empty means an embedded server where the program offers one
	Creds    string // WEFT_NATS_CREDS: a credentials file
	User     string // WEFT_NATS_USER
	Password string // WEFT_NATS_PASSWORD
	NKey     string // WEFT_NATS_NKEY: an nkey seed file
	// InboxPrefix is where replies come (WEFT_NATS_INBOX_PREFIX); empty
	// means "_INBOX_<user>" with a user, NATS's "_INBOX" without.
	InboxPrefix string
	TLSCA       string // WEFT_NATS_TLS_CA
	TLSCert     string // WEFT_NATS_TLS_CERT
	TLSKey      string // WEFT_NATS_TLS_KEY
	Stream      string // WEFT_STREAM
	Storage     string // WEFT_STORAGE: file or memory
	Replicas    int    // WEFT_REPLICAS
	// Duplicates is the de-duplication window (WEFT_DUPLICATES); 0: the
	// default, 2 minutes.
	Duplicates time.Duration
	// MaxAge is how long events are kept; 0 forever (WEFT_MAX_AGE).
	MaxAge time.Duration
	Name   string // connection name
	// Namespace is the namespace the process serves (WEFT_NAMESPACE),
	// or several, comma separated, for a daemon with RolesDir; empty: a
	// deployment without namespaces, or whatever the credentials say
	// (namespace.go).
	Namespace string
	// RolesDir is where 'weft roles' wrote the credentials
	// (WEFT_ROLES_DIR): a process serving several namespaces reads each
	// one's credentials of its role there (Targets).
	RolesDir string
	// EncryptKeys is the key file the events' data is sealed with
	// (-encrypt-keys); without it, the key ring may come from
	// WEFT_ENCRYPT_KEYS itself (UseKeys).
	EncryptKeys string
}

// EnvFlags maps the connection flags to their environment variables.
var EnvFlags = map[string]string{
	"nats":         "WEFT_NATS_URL",
	"creds":        "WEFT_NATS_CREDS",
	"user":         "WEFT_NATS_USER",
	"password":     "WEFT_NATS_PASSWORD",
	"nkey":         "WEFT_NATS_NKEY",
	"inbox-prefix": "WEFT_NATS_INBOX_PREFIX",
	"tls-ca":       "WEFT_NATS_TLS_CA",
	"tls-cert":     "WEFT_NATS_TLS_CERT",
	"tls-key":      "WEFT_NATS_TLS_KEY",
	"stream":       "WEFT_STREAM",
	"storage":      "WEFT_STORAGE",
	"replicas":     "WEFT_REPLICAS",
	"duplicates":   "WEFT_DUPLICATES",
	"max-age":      "WEFT_MAX_AGE",
	"namespace":    "WEFT_NAMESPACE",
	"roles-dir":    "WEFT_ROLES_DIR",
}

// RegisterFlags adds the connection flags to fs. After parsing, ApplyEnv
// fills the ones the command line left unset from the environment.
func (c *Config) RegisterFlags(fs *flag.FlagSet) {
	c.RegisterConnFlags(fs)
	c.RegisterStreamFlags(fs)
}

// RegisterConnFlags adds the flags that say where and as whom to connect
// (server, credentials, TLS, stream name, namespace), for a command that
// never creates the stream; the stream's creation settings keep their
// defaults.
func (c *Config) RegisterConnFlags(fs *flag.FlagSet) {
	c.Storage, c.Replicas, c.Duplicates = "file", 1, 2*time.Minute
	fs.StringVar(&c.URL, "nats", "", "NATS server URL(s), comma separated (env WEFT_NATS_URL)")
	fs.StringVar(&c.Creds, "creds", "", "NATS credentials file (env WEFT_NATS_CREDS)")
	fs.StringVar(&c.User, "user", "", "NATS user (env WEFT_NATS_USER)")
	fs.StringVar(&c.Password, "password", "", "NATS password; prefer the environment, which ps does not show (env WEFT_NATS_PASSWORD)")
	fs.StringVar(&c.NKey, "nkey", "", "NATS nkey seed file (env WEFT_NATS_NKEY)")
	fs.StringVar(&c.InboxPrefix, "inbox-prefix", "", "subject prefix of reply inboxes; default _INBOX_<user> with -user (env WEFT_NATS_INBOX_PREFIX)")
	fs.StringVar(&c.TLSCA, "tls-ca", "", "CA certificate for TLS (env WEFT_NATS_TLS_CA)")
	fs.StringVar(&c.TLSCert, "tls-cert", "", "client certificate for TLS (env WEFT_NATS_TLS_CERT)")
	fs.StringVar(&c.TLSKey, "tls-key", "", "client key for TLS (env WEFT_NATS_TLS_KEY)")
	fs.StringVar(&c.Stream, "stream", "WEFT", "events stream name (env WEFT_STREAM)")
	fs.StringVar(&c.Namespace, "namespace", "", "the namespace (a NATS account of its own) to serve; daemons take several, comma separated, with -roles-dir; default: the deployment's only one (env WEFT_NAMESPACE)")
	fs.StringVar(&c.RolesDir, "roles-dir", "", "the directory 'weft roles' wrote the credentials to: the role's credentials in each -namespace are read there (env WEFT_ROLES_DIR)")
	fs.StringVar(&c.EncryptKeys, "encrypt-keys", "", "key ring file ('weft keys new -out FILE'): events' data is sealed with AES-256-GCM under its first key and read under any of its keys (env WEFT_ENCRYPT_KEYS: the ring itself, '<id>:<base64 key>,…')")
}

// RegisterStreamFlags adds the settings of an events stream a command
// creates: storage, replicas, de-duplication window, maximum age.
func (c *Config) RegisterStreamFlags(fs *flag.FlagSet) {
	fs.StringVar(&c.Storage, "storage", "file", "events stream storage: file or memory (env WEFT_STORAGE)")
	fs.IntVar(&c.Replicas, "replicas", 1, "events stream and KV bucket replicas, when created (env WEFT_REPLICAS)")
	fs.DurationVar(&c.Duplicates, "duplicates", 2*time.Minute, "events stream de-duplication window, when created (env WEFT_DUPLICATES)")
	fs.DurationVar(&c.MaxAge, "max-age", 0, "how long the events stream keeps events, when created; 0 forever (env WEFT_MAX_AGE)")
}

// UseKeys loads the key ring of -encrypt-keys or WEFT_ENCRYPT_KEYS and
// makes the process seal and open events' data with it
// (events.UseKeys); with neither, it changes nothing (a Go caller may
// have set a ring of its own). log, if not nil, is told the key ids.
func (c *Config) UseKeys(log *slog.Logger) error {
	ring, err := events.LoadKeys(c.EncryptKeys)
	if err != nil {
		return fmt.Errorf("-encrypt-keys: %w", err)
	}
	if ring == nil {
		return nil
	}
	if err := events.UseKeys(ring); err != nil {
		return fmt.Errorf("-encrypt-keys: %w", err)
	}
	if log != nil {
		cur, _ := ring.Current()
		log.Info("sealing events' data", logattr.KeyID, cur.ID, logattr.Keys, len(ring))
	}
	return nil
}

// Validate reports every problem with the configuration at once.
//
// Size: a flat list of independent flag checks, each a line or three; all
// errors are collected.
func (c *Config) Validate() error {
	var errs []error
	if c.Storage != "file" && c.Storage != "memory" {
		errs = append(errs, fmt.Errorf("-storage: want file or memory, got %q", c.Storage))
	}
	if c.Replicas < 1 || c.Replicas > 5 {
		errs = append(errs, fmt.Errorf("-replicas: want 1 to 5, got %d", c.Replicas))
	}
	if (c.TLSCert == "") != (c.TLSKey == "") {
		errs = append(errs, errors.New("-tls-cert and -tls-key go together"))
	}
	if c.Password != "" && c.User == "" {
		errs = append(errs, errors.New("-password needs -user"))
	}
	if n := countSet(c.User, c.Creds, c.NKey, c.RolesDir); n > 1 {
		errs = append(errs, errors.New("-user, -creds, -nkey and -roles-dir: give one way to authenticate"))
	}
	for _, ns := range SplitNamespaces(c.Namespace) {
		if err := CheckNamespaceName(ns); err != nil {
			errs = append(errs, fmt.Errorf("-namespace: %w", err))
		}
	}
	if c.Namespace != "" && len(SplitNamespaces(c.Namespace)) == 0 {
		errs = append(errs, fmt.Errorf("-namespace %q: no namespace named", c.Namespace))
	}
	if c.RolesDir != "" {
		if fi, err := os.Stat(c.RolesDir); err != nil {
			errs = append(errs, fmt.Errorf("-roles-dir: %v", err))
		} else if !fi.IsDir() {
			errs = append(errs, fmt.Errorf("-roles-dir: %s is not a directory", c.RolesDir))
		}
	}
	if c.InboxPrefix != "" && !validPrefix(c.InboxPrefix) {
		errs = append(errs, fmt.Errorf("-inbox-prefix: %q is not a subject prefix (no wildcards, spaces or empty tokens)", c.InboxPrefix))
	}
	for flagName, path := range map[string]string{"-creds": c.Creds, "-nkey": c.NKey, "-tls-ca": c.TLSCA, "-tls-cert": c.TLSCert, "-tls-key": c.TLSKey} {
		if path == "" {
			continue
		}
		if _, err := os.Stat(path); err != nil {
			errs = append(errs, fmt.Errorf("%s: %v", flagName, err))
		}
	}
	if c.Stream == "" {
		errs = append(errs, errors.New("-stream: must not be empty"))
	}
	if c.Duplicates != 0 && c.Duplicates < eventlog.MinDuplicates {
		errs = append(errs, fmt.Errorf("-duplicates: want at least %s, got %s", eventlog.MinDuplicates, c.Duplicates))
	}
	if c.MaxAge < 0 {
		errs = append(errs, fmt.Errorf("-max-age: want 0 (forever) or a positive duration, got %s", c.MaxAge))
	}
	return errors.Join(errs...)
}

// Options returns the NATS connection options of the configuration.
func (c *Config) Options() []nats.Option {
	opts := []nats.Option{
		nats.Name(c.Name),
		nats.MaxReconnects(-1),
		nats.ReconnectWait(250 * time.Millisecond),
	}
	if c.Creds != "" {
		opts = append(opts, nats.UserCredentials(c.Creds))
	}
	if c.User != "" {
		opts = append(opts, nats.UserInfo(c.User, c.Password))
	}
	if c.NKey != "" {
		// Validate checked the file exists; a bad seed fails Connect.
		if o, err := nats.NkeyOptionFromSeed(c.NKey); err == nil {
			opts = append(opts, o)
		} else {
			opts = append(opts, func(*nats.Options) error { return fmt.Errorf("-nkey: %w", err) })
		}
	}
	if p := c.inboxPrefix(); p != "" {
		opts = append(opts, nats.CustomInboxPrefix(p))
	}
	if c.TLSCA != "" {
		opts = append(opts, nats.RootCAs(c.TLSCA))
	}
	if c.TLSCert != "" {
		opts = append(opts, nats.ClientCert(c.TLSCert, c.TLSKey))
	}
	return opts
}

// Connect connects to url (the configuration's URL when url is empty),
// with the configuration's options and then extra.
func (c *Config) Connect(url string, extra ...nats.Option) (*nats.Conn, error) {
	if url == "" {
		url = c.URL
	}
	if url == "" {
		url = nats.DefaultURL
	}
	opts := append(c.Options(), extra...)
	if c.InboxPrefix == "" && c.User == "" {
		// A user given in the URL gets its own inbox prefix as well.
		if u := urlUser(url); u != "" {
			opts = append(opts, nats.CustomInboxPrefix(InboxPrefixFor(u)))
		}
	}
	nc, err := nats.Connect(url, opts...)
	if err != nil {
		return nil, fmt.Errorf("connecting to NATS at %s: %w", Redact(url), redactErr(err, c.Password))
	}
	return nc, nil
}

// ConnectedURL is the URL nc is connected to, for logs: without user
// information.
func ConnectedURL(nc *nats.Conn) string { return Redact(nc.ConnectedUrl()) }

// inboxPrefix is the configured prefix, or the user's.
func (c *Config) inboxPrefix() string {
	if c.InboxPrefix != "" {
		return c.InboxPrefix
	}
	if c.User != "" {
		return InboxPrefixFor(c.User)
	}
	return ""
}

// InboxPrefixFor is the inbox prefix of a NATS user: "_INBOX_<user>".
// The roles' permissions (see roles.go) let each user subscribe to its own
// prefix only, so no role reads another's replies.
func InboxPrefixFor(user string) string { return "_INBOX_" + user }

func countSet(ss ...string) int {
	n := 0
	for _, s := range ss {
		if s != "" {
			n++
		}
	}
	return n
}

func validPrefix(p string) bool {
	for tok := range strings.SplitSeq(p, ".") {
		if tok == "" || tok == "*" || tok == ">" || strings.ContainsAny(tok, " \t\r\n") {
			return false
		}
	}
	return true
}

// StoreOptions are the events store options of the configuration.
func (c *Config) StoreOptions() []events.Option {
	storage := jetstream.FileStorage
	if c.Storage == "memory" {
		storage = jetstream.MemoryStorage
	}
	opts := []events.Option{events.WithStream(c.Stream), events.WithStorage(storage), events.WithReplicas(c.Replicas), events.WithMaxAge(c.MaxAge)}
	if c.Duplicates > 0 {
		opts = append(opts, events.WithDuplicates(c.Duplicates))
	}
	return opts
}

// OpenStore opens the events store over nc with the stream settings (see
// events.Open: an existing stream is used as it is, differences logged to
// log). While JetStream is not ready (a server still starting, a cluster
// electing its leaders, a lost server) it tries again with capped back-off
// until ctx ends; a stream Weft cannot run with (eventlog.ErrUnsafeSetting)
// or a permissions error ends it at once.
func (c *Config) OpenStore(ctx context.Context, nc *nats.Conn, log *slog.Logger) (events.Store, error) {
	js, err := jetstream.New(nc)
	if err != nil {
		return nil, err
	}
	opts := append(c.StoreOptions(), events.WithLogger(log))
	var st events.Store
	verified := false
	err = setup.Retry(ctx, log, "the events stream "+c.Stream, Fatal, func(ctx context.Context) error {
		if err := setup.Connected(nc); err != nil {
			return err
		}
		if !verified {
			if err := VerifyNamespace(ctx, nc, c.Namespace); err != nil {
				return err
			}
			verified = true
		}
		attempt, cancel := context.WithTimeout(ctx, 10*time.Second)
		defer cancel()
		st, err = events.Open(attempt, js, opts...)
		return err
	})
	return st, err
}

// Fatal reports whether a setup error is one that waiting cannot fix: an
// unsafe live setting, an invalid name, a permissions or authorization
// error. Every other error (timeouts, no responders, JetStream not ready
// or temporarily unavailable) may pass.
func Fatal(err error) bool {
	if errors.Is(err, eventlog.ErrUnsafeSetting) || errors.Is(err, events.ErrInvalidID) || errors.Is(err, ErrWrongNamespace) ||
		errors.Is(err, nats.ErrAuthorization) || errors.Is(err, nats.ErrPermissionViolation) ||
		errors.Is(err, nats.ErrAuthExpired) || errors.Is(err, nats.ErrAuthRevoked) {
		return true
	}
	var apiErr *jetstream.APIError
	if errors.As(err, &apiErr) {
		// 10052: invalid stream config; 10058: stream name in use with
		// another config; 10074: replicas > 1 on a server without a
		// cluster.
		switch apiErr.ErrorCode {
		case 10052, 10058, 10074:
			return true
		}
	}
	return false
}

// ApplyEnv sets every flag of fs that the command line left unset from its
// environment variable, in EnvFlags (the connection flags) and in envs
// (flag name → variable), and reports each variable whose value the flag
// does not take, by name. Flags fs does not define are passed over.
func ApplyEnv(fs *flag.FlagSet, envs ...map[string]string) error {
	set := map[string]bool{}
	fs.Visit(func(f *flag.Flag) { set[f.Name] = true })
	var errs []error
	for _, m := range append([]map[string]string{EnvFlags}, envs...) {
		for name, env := range m {
			v, ok := os.LookupEnv(env)
			if !ok || set[name] || fs.Lookup(name) == nil {
				continue
			}
			if err := fs.Set(name, v); err != nil {
				errs = append(errs, fmt.Errorf("env %s=%q: not a valid -%s", env, v, name))
			}
		}
	}
	return errors.Join(errs...)
}
