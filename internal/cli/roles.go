package cli

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/weft-dev/weft/internal/natsconn"
	"github.com/weft-dev/weft/internal/provision"
)

var cmdRoles = &command{
	name:    "roles",
	summary: "generate NATS users and credentials for Weft's roles (-out DIR -queues Q,...)",
	help: `Writes a NATS authorization setup for Weft's roles into -out: auth.conf, the
server's authorization block (users with bcrypt-hashed passwords and
publish/subscribe allow-lists; include it from the server configuration, see
deploy/nats/auth/server.conf), and one <user>.env file per user, mode 0600,
with WEFT_NATS_USER and WEFT_NATS_PASSWORD for the processes of that role
(docker compose env_file, systemd EnvironmentFile, or 'set -a; . FILE').

Users: weft-client (start, signal, cancel and read runs), weft-coordinator,
weft-worker-<queue> for each of -queues (outcomes of its queue's work only),
weft-ui (read only) and weft-admin (everything, purging and deleting the
stream included). deploy/SECURITY.md says what each may do and which rights
are still broader than their role. Passwords are random and never printed.
Existing files are kept unless -force (which changes every password).

With -setup, writes nothing: connects with the connection flags (as
weft-admin: WEFT_NATS_USER and WEFT_NATS_PASSWORD from weft-admin.env) and
creates the events stream (-storage, -replicas), the timers stream and the
KV buckets weft-workers, weft-snapshots, weft-coordinators (its TTL,
-lease-ttl, is the coordinators' lease duration) and weft-runs, which no
other role may create, since a stream's configuration could capture or
republish any subject. Run it once before the coordinators and workers
start; they wait for the stream.`,
	run: func(e *env, c *command, args []string) error {
		fs, out := e.flagSet(c)
		dir := fs.String("out", "", "directory to write auth.conf and the <user>.env files to (required)")
		queues := fs.String("queues", "default", "task queues, comma separated: one worker user each")
		cfg := natsFlags(fs)
		setup := fs.Bool("setup", false, "create the stream and the KV buckets (as the admin) instead of writing files")
		durable := fs.String("durable", "coordinator", "the coordinators' consumers are <durable>-<partition>")
		partitions := fs.Int("partitions", 64, "coordinator partitions the coordinator role may consume (at most 64)")
		force := fs.Bool("force", false, "replace existing files (and every password)")
		leaseTTL := fs.Duration("lease-ttl", provision.DefaultLeaseTTL, "with -setup: the leases bucket's TTL, which the coordinators adopt as their lease duration")
		if _, err := e.parse(c, fs, args, 0, 0); err != nil {
			return err
		}
		if *setup {
			return e.setupDeployment(c, cfg, *leaseTTL)
		}
		if *dir == "" {
			return &usageError{cmd: c, msg: "-out: a directory is required"}
		}
		d := natsconn.Deployment{Stream: cfg.Stream, Durable: *durable, Partitions: *partitions}
		for q := range strings.SplitSeq(*queues, ",") {
			if q = strings.TrimSpace(q); q != "" {
				d.Queues = append(d.Queues, q)
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
		if *out == "json" {
			type file struct {
				Path string `json:"path"`
				User string `json:"user,omitempty"`
				Role string `json:"role,omitempty"`
			}
			var fl []file
			for _, f := range files {
				fl = append(fl, file{Path: f.Path, User: f.User, Role: string(f.Role)})
			}
			return e.writeJSON(fl)
		}
		tw := tabwriter.NewWriter(e.stdout, 0, 4, 2, ' ', 0)
		fmt.Fprintln(tw, "USER\tROLE\tFILE")
		for _, f := range files {
			if f.User == "" {
				fmt.Fprintf(tw, "(server)\t\t%s\n", f.Path)
				continue
			}
			fmt.Fprintf(tw, "%s\t%s\t%s\n", f.User, f.Role, f.Path)
		}
		return tw.Flush()
	},
}

// setupDeployment creates what only the admin may create: the events
// stream, and the timers stream and the KV buckets (package provision).
func (e *env) setupDeployment(c *command, cfg *natsconn.Config, leaseTTL time.Duration) error {
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
	names, err := provision.Run(ctx, store, provision.Options{Replicas: cfg.Replicas, LeaseTTL: leaseTTL})
	if err != nil {
		return err
	}
	fmt.Fprintf(e.stdout, "stream %s and KV buckets %s ready on %s\n", cfg.Stream, strings.Join(names, ", "), natsconn.ConnectedURL(nc))
	return nil
}
