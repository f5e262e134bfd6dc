// Package natsconn is the NATS connection configuration shared by Weft's
// daemons and CLI: server URL, credentials, TLS and the events stream's
// settings, from flags with environment-variable defaults.
//
// The stream settings (-storage, -replicas, -duplicates, -max-age) are those
// a process creates the stream with when it is missing. An existing stream
// is used as it is, whatever the flags say (see package events); 'weft
// admin apply' changes it on purpose.
package natsconn

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"log/slog"
	"os"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/weft-dev/weft/internal/setup"
	"github.com/weft-dev/weft/pkg/events"
)

// Config says how to reach NATS and how the events stream is stored.
type Config struct {
	URL      string // WEFT_NATS_URL; empty means an embedded server where the program offers one
	Creds    string // WEFT_NATS_CREDS: a credentials file
	TLSCA    string // WEFT_NATS_TLS_CA
	TLSCert  string // WEFT_NATS_TLS_CERT
	TLSKey   string // WEFT_NATS_TLS_KEY
	Stream   string // WEFT_STREAM
	Storage  string // WEFT_STORAGE: file or memory
	Replicas int    // WEFT_REPLICAS
	// Duplicates is the de-duplication window (WEFT_DUPLICATES); 0: the
	// default, 2 minutes.
	Duplicates time.Duration
	// MaxAge is how long events are kept; 0 forever (WEFT_MAX_AGE).
	MaxAge time.Duration
	Name   string // connection name
}

// EnvFlags maps the connection flags to their environment variables.
var EnvFlags = map[string]string{
	"nats":       "WEFT_NATS_URL",
	"creds":      "WEFT_NATS_CREDS",
	"tls-ca":     "WEFT_NATS_TLS_CA",
	"tls-cert":   "WEFT_NATS_TLS_CERT",
	"tls-key":    "WEFT_NATS_TLS_KEY",
	"stream":     "WEFT_STREAM",
	"storage":    "WEFT_STORAGE",
	"replicas":   "WEFT_REPLICAS",
	"duplicates": "WEFT_DUPLICATES",
	"max-age":    "WEFT_MAX_AGE",
}

// RegisterFlags adds the connection flags to fs. After parsing, ApplyEnv
// fills the ones the command line left unset from the environment.
func (c *Config) RegisterFlags(fs *flag.FlagSet) {
	fs.StringVar(&c.URL, "nats", "", "NATS server URL(s), comma separated (env WEFT_NATS_URL)")
	fs.StringVar(&c.Creds, "creds", "", "NATS credentials file (env WEFT_NATS_CREDS)")
	fs.StringVar(&c.TLSCA, "tls-ca", "", "CA certificate for TLS (env WEFT_NATS_TLS_CA)")
	fs.StringVar(&c.TLSCert, "tls-cert", "", "client certificate for TLS (env WEFT_NATS_TLS_CERT)")
	fs.StringVar(&c.TLSKey, "tls-key", "", "client key for TLS (env WEFT_NATS_TLS_KEY)")
	fs.StringVar(&c.Stream, "stream", "WEFT", "events stream name (env WEFT_STREAM)")
	fs.StringVar(&c.Storage, "storage", "file", "events stream storage: file or memory (env WEFT_STORAGE)")
	fs.IntVar(&c.Replicas, "replicas", 1, "events stream and KV bucket replicas, when created (env WEFT_REPLICAS)")
	fs.DurationVar(&c.Duplicates, "duplicates", 2*time.Minute, "events stream de-duplication window, when created (env WEFT_DUPLICATES)")
	fs.DurationVar(&c.MaxAge, "max-age", 0, "how long the events stream keeps events, when created; 0 forever (env WEFT_MAX_AGE)")
}

// Validate reports every problem with the configuration at once.
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
	for flagName, path := range map[string]string{"-creds": c.Creds, "-tls-ca": c.TLSCA, "-tls-cert": c.TLSCert, "-tls-key": c.TLSKey} {
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
	if c.Duplicates != 0 && c.Duplicates < events.MinDuplicates {
		errs = append(errs, fmt.Errorf("-duplicates: want at least %s, got %s", events.MinDuplicates, c.Duplicates))
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
	nc, err := nats.Connect(url, append(c.Options(), extra...)...)
	if err != nil {
		return nil, fmt.Errorf("connecting to NATS at %s: %w", url, err)
	}
	return nc, nil
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
// until ctx ends; a stream Weft cannot run with (events.ErrUnsafeSetting)
// or a permissions error ends it at once.
func (c *Config) OpenStore(ctx context.Context, nc *nats.Conn, log *slog.Logger) (events.Store, error) {
	js, err := jetstream.New(nc)
	if err != nil {
		return nil, err
	}
	opts := append(c.StoreOptions(), events.WithLogger(log))
	var st events.Store
	err = setup.Retry(ctx, log, "the events stream "+c.Stream, Fatal, func(ctx context.Context) error {
		if err := setup.Connected(nc); err != nil {
			return err
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
	if errors.Is(err, events.ErrUnsafeSetting) || errors.Is(err, events.ErrInvalidID) ||
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
