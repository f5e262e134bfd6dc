package cli

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io/fs"
	"os"
	"strings"
	"time"

	"github.com/weft-dev/weft/internal/natsconn"
	"github.com/weft-dev/weft/internal/provision"
)

var cmdRoles = &command{
	name:    "roles",
	summary: "generate NATS users and credentials for Weft's roles (-out DIR -queues Q,... [-namespaces A,B])",
	help: `Writes a NATS authorization setup for Weft's roles into -out: auth.conf, the
server's authorization block (users with bcrypt-hashed passwords and
publish/subscribe allow-lists; include it from the server configuration, see
deploy/nats/auth/server.conf), and one <user>.env file per user, mode 0600,
with WEFT_NATS_USER and WEFT_NATS_PASSWORD for the processes of that role
(docker compose env_file, systemd EnvironmentFile, or 'set -a; . FILE').

Users: weft-client (start, signal, cancel and read runs), weft-coordinator,
weft-worker-<queue> for each of -queues (outcomes of its queue's work only),
weft-ui (read only), weft-trigger (schedules and triggers), weft-serve
('weft serve': starts runs and signals, and publishes its webhooks on
-webhook-subjects) and weft-admin (everything, purging and deleting the
stream included). deploy/SECURITY.md says what each may do and which rights
are still broader than their role. Passwords are random and never printed.
Existing files are kept unless -force (which changes every password).

Namespaces: with -namespaces a,b (or -namespaces-file FILE, YAML or JSON,
each namespace with its own quota), auth.conf holds one NATS account per
namespace instead, with the namespace's JetStream limits (-max-storage,
-max-memory, -max-streams, -max-consumers, -max-ack-pending), and every role
has a user in each: weft-client@a, weft-coordinator@a, ... Their .env files
also set WEFT_NAMESPACE. Nothing crosses between accounts: a namespace's
clients cannot see another's runs. deployment.json keeps the namespaces and
their quotas for -setup. A quota of zero is refused.

With -setup, writes nothing: connects with the connection flags (as
weft-admin: WEFT_NATS_USER and WEFT_NATS_PASSWORD from weft-admin.env) and
creates the events stream (-storage, -replicas), the timers stream and the
KV buckets weft-workers, weft-snapshots, weft-coordinators (its TTL,
-lease-ttl, is the coordinators' lease duration) and weft-runs, which no
other role may create, since a stream's configuration could capture or
republish any subject. Run it once before the coordinators and workers
start; they wait for the stream. With -setup -out DIR of namespaces, it sets
up every namespace (or those of -namespace) as that namespace's admin, with
the credentials and quotas in DIR: the events stream limited to
-stream-max-bytes and -stream-max-msgs (discarding new messages), and
admission (-starts-per-second, -signals-per-second: internal/admission).`,
	flags: func(fs *flag.FlagSet) action {
		dir := fs.String("out", "", "directory to write auth.conf and the <user>.env files to (required); with -setup, the directory of a namespaced deployment")
		queues := fs.String("queues", "default", "task queues, comma separated: one worker user each")
		cfg := natsStreamFlags(fs)
		setup := fs.Bool("setup", false, "create the stream and the KV buckets (as the admin) instead of writing files")
		durable := fs.String("durable", "coordinator", "the coordinators' consumers are <durable>-<partition>")
		partitions := fs.Int("partitions", 64, "coordinator partitions the coordinator role may consume (at most 64)")
		force := fs.Bool("force", false, "replace existing files (and every password)")
		triggerStreams := fs.String("trigger-streams", "", "your streams event triggers may read, comma separated (the coordinator consumes them)")
		webhookSubjects := fs.String("webhook-subjects", "", "the subjects 'weft serve' publishes its webhooks on, comma separated (weft-serve may publish there)")
		leaseTTL := fs.Duration("lease-ttl", provision.DefaultLeaseTTL, "with -setup: the leases bucket's TTL, which the coordinators adopt as their lease duration")
		namespaces := fs.String("namespaces", "", "namespaces, comma separated: one NATS account each, with every role's users and the quota below")
		nsFile := fs.String("namespaces-file", "", "a YAML or JSON file of namespaces, each with its quota (see deploy/SECURITY.md); the quota flags are the defaults")
		quota := natsconn.DefaultQuota()
		fs.Var(&quota.MaxStorage, "max-storage", "each namespace's file storage, every stream and bucket together (JetStream account max_file)")
		fs.Var(&quota.MaxMemory, "max-memory", "each namespace's memory storage (max_mem)")
		fs.IntVar(&quota.MaxStreams, "max-streams", quota.MaxStreams, "each namespace's streams and buckets (max_streams)")
		fs.IntVar(&quota.MaxConsumers, "max-consumers", quota.MaxConsumers, "each namespace's consumers (max_consumers)")
		fs.IntVar(&quota.MaxAckPending, "max-ack-pending", quota.MaxAckPending, "the most acks pending of any one consumer (max_ack_pending; the coordinators' take 20000)")
		fs.Var(&quota.StreamMaxBytes, "stream-max-bytes", "each namespace's events stream, bytes (default three quarters of -max-storage)")
		fs.Int64Var(&quota.StreamMaxMsgs, "stream-max-msgs", quota.StreamMaxMsgs, "each namespace's events stream, messages")
		fs.IntVar(&quota.StartsPerSecond, "starts-per-second", quota.StartsPerSecond, "runs each namespace's clients may start (or fork) per second")
		fs.IntVar(&quota.SignalsPerSecond, "signals-per-second", quota.SignalsPerSecond, "signals and cancel requests each namespace's clients may send per second")
		return action{do: func(e *env, x *call) error {
			c := x.cmd
			var zero []string
			fs.Visit(func(f *flag.Flag) {
				switch f.Name {
				case "max-storage", "max-memory", "max-streams", "max-consumers", "max-ack-pending", "stream-max-bytes", "stream-max-msgs", "starts-per-second", "signals-per-second":
					if v := f.Value.String(); v == "0" || v == "0B" {
						zero = append(zero, "-"+f.Name)
					}
				}
			})
			if len(zero) > 0 {
				return &usageError{cmd: c, msg: fmt.Sprintf("%s: a quota of zero (want at least 1; a namespace that may do nothing needs no credentials)", strings.Join(zero, ", "))}
			}
			if *setup {
				if *dir != "" {
					return e.setupNamespaces(c, cfg, *dir, *leaseTTL)
				}
				return e.setupDeployment(c, cfg, *leaseTTL)
			}
			if *dir == "" {
				return &usageError{cmd: c, msg: "-out: a directory is required"}
			}
			d := natsconn.Deployment{Stream: cfg.Stream, Durable: *durable, Partitions: *partitions}
			for ts := range strings.SplitSeq(*triggerStreams, ",") {
				if ts = strings.TrimSpace(ts); ts != "" {
					d.TriggerStreams = append(d.TriggerStreams, ts)
				}
			}
			for ws := range strings.SplitSeq(*webhookSubjects, ",") {
				if ws = strings.TrimSpace(ws); ws != "" {
					d.WebhookSubjects = append(d.WebhookSubjects, ws)
				}
			}
			for q := range strings.SplitSeq(*queues, ",") {
				if q = strings.TrimSpace(q); q != "" {
					d.Queues = append(d.Queues, q)
				}
			}
			switch {
			case *namespaces != "" && *nsFile != "":
				return &usageError{cmd: c, msg: "-namespaces and -namespaces-file: give one"}
			case *nsFile != "":
				b, err := os.ReadFile(*nsFile)
				if err != nil {
					return &usageError{cmd: c, msg: fmt.Sprintf("-namespaces-file: %v", err)}
				}
				if d.Namespaces, err = natsconn.ParseNamespaces(b, quota); err != nil {
					return &usageError{cmd: c, msg: fmt.Sprintf("-namespaces-file %s: %v", *nsFile, err)}
				}
			case *namespaces != "":
				names := natsconn.SplitNamespaces(*namespaces)
				if len(names) == 0 {
					return &usageError{cmd: c, msg: fmt.Sprintf("-namespaces %q: no namespace named", *namespaces)}
				}
				for _, n := range names {
					d.Namespaces = append(d.Namespaces, natsconn.Namespace{Name: n, Quota: quota})
				}
			}
			if err := d.Validate(); err != nil {
				return &usageError{cmd: c, msg: err.Error()}
			}
			files, err := natsconn.WriteRoles(*dir, d, 0, *force)
			if errors.Is(err, natsconn.ErrExists) {
				return err
			}
			if err != nil {
				return fmt.Errorf("writing roles to %s: %w", *dir, err)
			}
			if x.out == "json" {
				type file struct {
					Path      string `json:"path"`
					User      string `json:"user,omitempty"`
					Role      string `json:"role,omitempty"`
					Namespace string `json:"namespace,omitempty"`
				}
				var fl []file
				for _, f := range files {
					_, ns, _ := strings.Cut(f.User, "@")
					fl = append(fl, file{Path: f.Path, User: f.User, Role: string(f.Role), Namespace: ns})
				}
				return e.writeJSON(fl)
			}
			tw := table(e.stdout)
			fmt.Fprintln(tw, "USER\tROLE\tFILE")
			for _, f := range files {
				if f.User == "" {
					fmt.Fprintf(tw, "(server)\t\t%s\n", f.Path)
					continue
				}
				fmt.Fprintf(tw, "%s\t%s\t%s\n", f.User, f.Role, f.Path)
			}
			return tw.Flush()
		}}
	},
}

// setupDeployment creates what only the admin may create: the events
// stream, and the timers stream and the KV buckets (package provision).
func (e *env) setupDeployment(c *command, cfg *natsconn.Config, leaseTTL time.Duration) error {
	if cfg.RolesDir != "" { // the admin's credentials from -roles-dir (docker-compose.yml's setup)
		targets, err := cfg.Targets(natsconn.RoleAdmin, "")
		if err != nil {
			return &usageError{cmd: c, msg: err.Error()}
		}
		*cfg = targets[0]
	}
	return e.setupOne(c, cfg, leaseTTL, nil)
}

// setupOne sets up one namespace's stream and buckets (ns nil: a
// deployment without namespaces).
func (e *env) setupOne(c *command, cfg *natsconn.Config, leaseTTL time.Duration, ns *natsconn.Namespace) error {
	if err := cfg.Validate(); err != nil {
		return &usageError{cmd: c, msg: err.Error()}
	}
	if leaseTTL < time.Second {
		return &usageError{cmd: c, msg: fmt.Sprintf("-lease-ttl: want at least 1s, got %s", leaseTTL)}
	}
	cfg.Name = "weft roles -setup"
	nc, err := cfg.Connect("")
	if err != nil {
		return err
	}
	defer nc.Close()
	ctx, cancel := context.WithTimeout(e.ctx, time.Minute)
	defer cancel()
	store, err := cfg.OpenStore(ctx, nc, nil)
	if err != nil {
		return fmt.Errorf("setting up stream %s: %w", cfg.Stream, err)
	}
	opts := provision.Options{Replicas: cfg.Replicas, LeaseTTL: leaseTTL}
	if ns != nil {
		q := ns.Quota
		opts.Namespace = &provision.Namespace{Name: ns.Name, StreamMaxBytes: int64(q.StreamMaxBytes), StreamMaxMsgs: q.StreamMaxMsgs,
			StartsPerSecond: q.StartsPerSecond, SignalsPerSecond: q.SignalsPerSecond}
	}
	names, err := provision.Run(ctx, store, opts)
	if err != nil {
		return err
	}
	if ns != nil {
		q := ns.Quota
		fmt.Fprintf(e.stdout, "namespace %s: stream %s (at most %s, %d messages) and KV buckets %s ready on %s; admission: %d starts and %d signals per second\n",
			ns.Name, cfg.Stream, q.StreamMaxBytes, q.StreamMaxMsgs, strings.Join(names, ", "), natsconn.ConnectedURL(nc), q.StartsPerSecond, q.SignalsPerSecond)
		return nil
	}
	fmt.Fprintf(e.stdout, "stream %s and KV buckets %s ready on %s\n", cfg.Stream, strings.Join(names, ", "), natsconn.ConnectedURL(nc))
	return nil
}

// setupNamespaces sets up each namespace of the deployment 'weft roles
// -namespaces' wrote to dir (or those -namespace names), as that
// namespace's admin: what setupDeployment makes, and the namespace's
// limits and admission (package provision).
func (e *env) setupNamespaces(c *command, cfg *natsconn.Config, dir string, leaseTTL time.Duration) error {
	d, err := natsconn.ReadDeployment(dir)
	if errors.Is(err, fs.ErrNotExist) {
		return &usageError{cmd: c, msg: fmt.Sprintf("-out %s: no %s there: -setup -out takes the directory of a namespaced deployment ('weft roles -namespaces'); without namespaces, connect as the admin and leave -out out", dir, natsconn.DeploymentFile)}
	}
	if err != nil {
		return err
	}
	if len(d.Namespaces) == 0 {
		return &usageError{cmd: c, msg: fmt.Sprintf("-out %s: a deployment without namespaces", dir)}
	}
	names := natsconn.SplitNamespaces(cfg.Namespace)
	if len(names) == 0 {
		names = d.NamespaceNames()
	}
	for _, name := range names {
		ns, ok := d.Namespace(name)
		if !ok {
			return &usageError{cmd: c, msg: fmt.Sprintf("-namespace %s: not a namespace of the deployment in %s (%s)", name, dir, strings.Join(d.NamespaceNames(), ", "))}
		}
		admin := *cfg
		admin.Namespace, admin.RolesDir, admin.User, admin.Password = name, dir, "", ""
		targets, err := admin.Targets(natsconn.RoleAdmin, "")
		if err != nil {
			return err
		}
		one := targets[0]
		if err := e.setupOne(c, &one, leaseTTL, &ns); err != nil {
			return fmt.Errorf("namespace %s: %w", name, err)
		}
	}
	return nil
}
