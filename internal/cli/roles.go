package cli

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/weft-dev/weft/internal/coordinator"
	"github.com/weft-dev/weft/internal/natsconn"
	"github.com/weft-dev/weft/pkg/events"
	"github.com/weft-dev/weft/pkg/runs"
	"github.com/weft-dev/weft/pkg/worker"
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
creates the events stream (-storage, -replicas) and the KV buckets
weft-workers, weft-snapshots and weft-coordinators, which no other role may
create, since a
stream's configuration could capture or republish any subject. Run it once
before the coordinators and workers start; they wait for the stream.`,
	run: func(e *env, c *command, args []string) error {
		fs, out := e.flagSet(c)
		dir := fs.String("out", "", "directory to write auth.conf and the <user>.env files to (required)")
		queues := fs.String("queues", "default", "task queues, comma separated: one worker user each")
		cfg := natsFlags(fs)
		setup := fs.Bool("setup", false, "create the stream and the KV buckets (as the admin) instead of writing files")
		durable := fs.String("durable", "coordinator", "the coordinators' consumers are <durable>-<partition>")
		partitions := fs.Int("partitions", 64, "coordinator partitions the coordinator role may consume (at most 64)")
		force := fs.Bool("force", false, "replace existing files (and every password)")
		if _, err := e.parse(c, fs, args, 0, 0); err != nil {
			return err
		}
		if *setup {
			return e.setupDeployment(c, cfg)
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
// stream and the KV buckets, with the settings their users would create
// them with (pkg/worker's announcements, internal/coordinator's
// snapshots).
func (e *env) setupDeployment(c *command, cfg *natsconn.Config) error {
	if err := cfg.Validate(); err != nil {
		return &usageError{cmd: c, msg: err.Error()}
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
	if err := events.EnsureTimers(ctx, store); err != nil {
		return err
	}
	js := store.JetStream()
	buckets := []jetstream.KeyValueConfig{
		{
			Bucket:      worker.WorkersBucket,
			Description: "Weft workers: the queues and node types each live worker serves",
			TTL:         worker.AnnounceTTL,
			History:     1,
			Replicas:    cfg.Replicas,
		},
		{
			Bucket:      coordinator.SnapshotsBucket,
			Description: "Weft run snapshots: the latest checkpoint of each run's projection",
			History:     1,
			Replicas:    cfg.Replicas,
		},
		{
			// The coordinators adopt the bucket's TTL as their lease
			// duration; 5s is their default (coordinator.WithLeaseTTL).
			Bucket:      coordinator.LeasesBucket,
			Description: "Weft coordinator partition leases and announcements",
			History:     1,
			TTL:         5 * time.Second,
			Replicas:    cfg.Replicas,
		},
		runs.KVConfig(cfg.Replicas),
	}
	for _, b := range buckets {
		if _, err := js.CreateKeyValue(ctx, b); err != nil && !errors.Is(err, jetstream.ErrBucketExists) {
			return fmt.Errorf("creating KV bucket %s: %w", b.Bucket, err)
		}
	}
	names := make([]string, len(buckets))
	for i, b := range buckets {
		names[i] = b.Bucket
	}
	fmt.Fprintf(e.stdout, "stream %s and KV buckets %s ready on %s\n", cfg.Stream, strings.Join(names, ", "), natsconn.ConnectedURL(nc))
	return nil
}
