// Package natsconn is the NATS connection configuration shared by Weft's
// daemons and CLI: server URL, credentials, TLS and the events stream's
// storage, from flags with environment-variable defaults.
package natsconn

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"os"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

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
	Name     string // connection name
}

// EnvFlags maps the connection flags to their environment variables.
var EnvFlags = map[string]string{
	"nats":     "WEFT_NATS_URL",
	"creds":    "WEFT_NATS_CREDS",
	"tls-ca":   "WEFT_NATS_TLS_CA",
	"tls-cert": "WEFT_NATS_TLS_CERT",
	"tls-key":  "WEFT_NATS_TLS_KEY",
	"stream":   "WEFT_STREAM",
	"storage":  "WEFT_STORAGE",
	"replicas": "WEFT_REPLICAS",
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
	fs.IntVar(&c.Replicas, "replicas", 1, "events stream replicas (env WEFT_REPLICAS)")
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

// Connect connects to url (the configuration's URL when url is empty).
func (c *Config) Connect(url string) (*nats.Conn, error) {
	if url == "" {
		url = c.URL
	}
	if url == "" {
		url = nats.DefaultURL
	}
	nc, err := nats.Connect(url, c.Options()...)
	if err != nil {
		return nil, fmt.Errorf("connecting to NATS at %s: %w", url, err)
	}
	return nc, nil
}

// OpenStore opens the events store over nc with the stream settings. While
// JetStream is not ready (a cluster still electing its leaders, a server
// still starting) it tries again, for up to SetupTimeout or until ctx ends.
func (c *Config) OpenStore(ctx context.Context, nc *nats.Conn) (events.Store, error) {
	js, err := jetstream.New(nc)
	if err != nil {
		return nil, err
	}
	storage := jetstream.FileStorage
	if c.Storage == "memory" {
		storage = jetstream.MemoryStorage
	}
	deadline := time.Now().Add(SetupTimeout)
	wait := 250 * time.Millisecond
	for {
		attempt, cancel := context.WithTimeout(ctx, 10*time.Second)
		st, err := events.Open(attempt, js, events.WithStream(c.Stream), events.WithStorage(storage), events.WithReplicas(c.Replicas))
		cancel()
		if err == nil || !transient(err) || time.Now().After(deadline) {
			return st, err
		}
		select {
		case <-ctx.Done():
			return nil, err
		case <-time.After(wait):
		}
		wait = min(2*wait, 5*time.Second)
	}
}

// SetupTimeout bounds how long OpenStore waits for JetStream to be ready.
const SetupTimeout = 2 * time.Minute

// transient reports whether a stream set-up error may pass by itself.
func transient(err error) bool {
	if errors.Is(err, context.DeadlineExceeded) || errors.Is(err, nats.ErrNoResponders) ||
		errors.Is(err, jetstream.ErrJetStreamNotEnabled) || errors.Is(err, nats.ErrTimeout) {
		return true
	}
	var apiErr *jetstream.APIError
	if errors.As(err, &apiErr) {
		// 10008: cluster temporarily unavailable; 10005: no suitable peers;
		// 10023: insufficient resources while peers join.
		switch apiErr.ErrorCode {
		case 10008, 10005, 10023:
			return true
		}
		return apiErr.Code == 503
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
