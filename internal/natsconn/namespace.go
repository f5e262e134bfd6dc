package natsconn

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/nats-io/nats.go"
	"sigs.k8s.io/yaml"

	"github.com/weft-dev/weft/internal/eventlog"
)

// Namespaces.
//
// A namespace is a unit of isolation: a set of runs, and the processes
// and people that start, decide, run and read them, that no other
// namespace can see or touch. Each namespace is a NATS account of its
// own. An account is NATS's own boundary: its subjects, streams,
// consumers and KV buckets are its own, a connection belongs to exactly
// one account, and nothing crosses between accounts unless an export and
// an import say so (Weft declares none). So the subject layout, the
// stream and bucket names and the roles are the same in every namespace,
// and a client of namespace A cannot read, signal, cancel, fork or list a
// run of namespace B, nor learn that it exists: its requests reach A's
// stream, where B's runs are not. The server enforces each account's
// JetStream limits (storage, streams, consumers, acks pending), which are
// the namespace's quota.
//
// The alternative, one account with per-namespace subjects and
// permissions, was not taken: a direct get, a purge or a consumer carries
// its subject filter in the request body, which permissions do not see
// (deploy/SECURITY.md, gap 5), so isolation within one account would rest
// on every read path; and JetStream limits are per account, not per
// subject, so one namespace could still fill the others' storage.
//
// In a deployment without namespaces (Deployment.Namespaces empty, 'weft
// roles' without -namespaces) the users live in the server's global
// account, as before: that is the default namespace, and no program needs
// a flag for it. With namespaces, every user name carries its namespace
// ("weft-client@a", NamespaceUser), since user names are unique across a
// server, and a process says which namespace it serves with -namespace
// (WEFT_NAMESPACE, which each role's .env file sets): the credentials
// select the account, and the namespace is checked against the account
// the server puts the connection in (VerifyNamespace), and labels logs
// and messages. A daemon serving several namespaces (-namespace a,b)
// opens one connection per namespace, with that namespace's credentials
// from -roles-dir (Targets).

// DefaultNamespace names the namespace of a deployment without
// namespaces, and the one a namespaced deployment may list under that
// name.
const DefaultNamespace = "default"

// MaxNamespaceLen is the longest namespace name.
const MaxNamespaceLen = 64

// ErrWrongNamespace says a connection's credentials are of another
// namespace than the one asked for.
var ErrWrongNamespace = errors.New("credentials of another namespace")

// CheckNamespaceName says why name cannot be a namespace: it must be a
// subject token and an account name, so letters, digits, '-' and '_',
// starting with a letter or a digit, at most MaxNamespaceLen.
func CheckNamespaceName(name string) error {
	switch {
	case name == "":
		return errors.New("namespace: the name is empty")
	case len(name) > MaxNamespaceLen:
		return fmt.Errorf("namespace %q: longer than %d characters", name, MaxNamespaceLen)
	case !eventlog.ValidToken(name):
		return fmt.Errorf("namespace %q: not a valid name (letters, digits, '-' and '_', starting with a letter or digit: it names a NATS account and is a subject token)", name)
	case strings.EqualFold(name, "SYS") || strings.EqualFold(name, "global"):
		return fmt.Errorf("namespace %q: reserved (NATS's system and global accounts)", name)
	}
	return nil
}

// NamespaceUser is the NATS user name of a role (and queue, for a worker)
// in namespace ns: UserName's, with "@<ns>" unless ns is empty (a
// deployment without namespaces).
func NamespaceUser(ns string, r Role, queue string) string {
	if ns == "" {
		return UserName(r, queue)
	}
	return UserName(r, queue) + "@" + ns
}

// Quota is what a namespace may use. The server enforces every part of
// it: the account's JetStream limits, the events stream's limits, and the
// admission tickets streams' limits (internal/admission).
type Quota struct {
	// MaxStorage is the account's file storage, every stream and bucket
	// of the namespace together (JetStream account limit max_file).
	MaxStorage Size `json:"maxStorage"`
	// MaxMemory is the account's memory storage (max_mem).
	MaxMemory Size `json:"maxMemory"`
	// MaxStreams counts streams and buckets (max_streams).
	MaxStreams int `json:"maxStreams"`
	// MaxConsumers bounds the consumers of each of the namespace's
	// streams (max_consumers, which nats-server applies per stream): a
	// reader that creates watchers on a bucket is stopped there.
	MaxConsumers int `json:"maxConsumers"`
	// MaxAckPending is the most any one consumer may have delivered and
	// not acknowledged (max_ack_pending).
	MaxAckPending int `json:"maxAckPending"`
	// StreamMaxBytes and StreamMaxMsgs bound the events stream (its
	// max_bytes and max_msgs, discarding new messages: a full stream
	// refuses appends, and never drops events). StreamMaxBytes is at most
	// MaxStorage, less what the buckets need; default three quarters of
	// MaxStorage.
	StreamMaxBytes Size  `json:"streamMaxBytes"`
	StreamMaxMsgs  int64 `json:"streamMaxMsgs"`
	// StartsPerSecond and SignalsPerSecond are the admission limits: run
	// starts (and forks), and signals and cancel requests, admitted per
	// second in the namespace (internal/admission).
	StartsPerSecond  int `json:"startsPerSecond"`
	SignalsPerSecond int `json:"signalsPerSecond"`
}

// The default quota of a namespace.
const (
	DefaultMaxStorage       Size  = 10 << 30
	DefaultMaxMemory        Size  = 256 << 20
	DefaultMaxStreams             = 16
	DefaultMaxConsumers           = 512
	DefaultMaxAckPending          = 20000
	DefaultStreamMaxMsgs    int64 = 10_000_000
	DefaultStartsPerSecond        = 100
	DefaultSignalsPerSecond       = 100
)

// What the engine needs of a namespace's quota.
const (
	// EngineStreams are the streams and buckets of a namespace: the
	// events and timers streams, the tickets streams of starts and
	// signals, the buckets of workers, snapshots, leases and runs, and
	// the archive.
	EngineStreams = 9
	// CoordinatorAckPending is the acks pending a coordinator
	// partition's consumer may take (internal/coordinator): partition
	// consumers made now take at most 4,096, those made by earlier
	// versions 20,000, which a namespace still admits.
	CoordinatorAckPending = 20000
	// minStorage is the least storage a namespace can run in.
	minStorage Size = 1 << 20
)

// DefaultQuota is the quota of a namespace that says nothing else.
func DefaultQuota() Quota {
	return Quota{
		MaxStorage: DefaultMaxStorage, MaxMemory: DefaultMaxMemory,
		MaxStreams: DefaultMaxStreams, MaxConsumers: DefaultMaxConsumers, MaxAckPending: DefaultMaxAckPending,
		StreamMaxMsgs:   DefaultStreamMaxMsgs,
		StartsPerSecond: DefaultStartsPerSecond, SignalsPerSecond: DefaultSignalsPerSecond,
	}
}

// withDefaults fills what is derived: the events stream's bytes, three
// quarters of the storage, when not given.
func (q Quota) withDefaults() Quota {
	if q.StreamMaxBytes == 0 && q.MaxStorage > 0 {
		q.StreamMaxBytes = q.MaxStorage / 4 * 3
	}
	return q
}

// validate reports every problem with the quota of namespace ns in d.
func (q Quota) validate(ns string, d Deployment) []error {
	q = q.withDefaults()
	var errs []error
	bad := func(field, format string, args ...any) {
		errs = append(errs, fmt.Errorf("namespace %s: quota %s: %s", ns, field, fmt.Sprintf(format, args...)))
	}
	atLeast := func(field string, have, want int64, why string) {
		if have < want {
			bad(field, "want at least %d%s, got %d", want, why, have)
		}
	}
	if q.MaxStorage < minStorage {
		bad("max-storage", "want at least %s, got %s", minStorage, q.MaxStorage)
	}
	atLeast("max-memory", int64(q.MaxMemory), 1, "")
	atLeast("max-streams", int64(q.MaxStreams), EngineStreams, fmt.Sprintf(" (the engine's streams and buckets are %d)", EngineStreams))
	need := int64(2*d.Partitions + 1 + len(d.Queues))
	atLeast("max-consumers", int64(q.MaxConsumers), need, fmt.Sprintf(" (the coordinators' %d partitions take two each, and one per task queue)", d.Partitions))
	atLeast("max-ack-pending", int64(q.MaxAckPending), CoordinatorAckPending, " (a coordinator partition's consumer takes that many)")
	atLeast("stream-max-msgs", q.StreamMaxMsgs, 1, "")
	atLeast("starts-per-second", int64(q.StartsPerSecond), 1, "")
	atLeast("signals-per-second", int64(q.SignalsPerSecond), 1, "")
	if q.StreamMaxBytes < minStorage/2 {
		bad("stream-max-bytes", "want at least %s, got %s", minStorage/2, q.StreamMaxBytes)
	} else if q.MaxStorage >= minStorage && q.StreamMaxBytes >= q.MaxStorage {
		bad("stream-max-bytes", "%s leaves no room in max-storage %s for the buckets", q.StreamMaxBytes, q.MaxStorage)
	}
	return errs
}

// Namespace is one namespace of a deployment and its quota.
type Namespace struct {
	Name  string `json:"name"`
	Quota Quota  `json:"quota"`
}

// SplitNamespaces parses a comma-separated list of namespaces (a
// -namespace flag), dropping blanks.
func SplitNamespaces(list string) []string {
	var out []string
	for ns := range strings.SplitSeq(list, ",") {
		if ns = strings.TrimSpace(ns); ns != "" {
			out = append(out, ns)
		}
	}
	return out
}

// Namespace returns the deployment's namespace of that name.
func (d Deployment) Namespace(name string) (Namespace, bool) {
	i := slices.IndexFunc(d.Namespaces, func(n Namespace) bool { return n.Name == name })
	if i < 0 {
		return Namespace{}, false
	}
	n := d.Namespaces[i]
	n.Quota = n.Quota.withDefaults()
	return n, true
}

// NamespaceNames lists the deployment's namespaces; a deployment without
// namespaces has none.
func (d Deployment) NamespaceNames() []string {
	out := make([]string, len(d.Namespaces))
	for i, n := range d.Namespaces {
		out[i] = n.Name
	}
	return out
}

// DeploymentFile is where WriteRoles keeps a namespaced deployment (its
// namespaces and quotas, no secrets), for 'weft roles -setup' and the
// daemons that read credentials from the same directory.
const DeploymentFile = "deployment.json"

// ReadDeployment reads the deployment WriteRoles kept in dir.
func ReadDeployment(dir string) (Deployment, error) {
	var d Deployment
	b, err := os.ReadFile(filepath.Join(dir, DeploymentFile))
	if err != nil {
		return d, err
	}
	if err := json.Unmarshal(b, &d); err != nil {
		return d, fmt.Errorf("%s: %w", filepath.Join(dir, DeploymentFile), err)
	}
	return d, d.Validate()
}

// accountsConfig renders the accounts of a namespaced deployment: one per
// namespace, with its JetStream limits and its users.
func (d Deployment) accountsConfig(creds []Credential, cost int) ([]byte, error) {
	var b strings.Builder
	b.WriteString("# Weft namespaces and roles: generated by 'weft roles -namespaces'; see deploy/SECURITY.md.\n")
	b.WriteString("# One NATS account per namespace. Passwords are bcrypt hashes; the plain\n")
	b.WriteString("# passwords are in the <user>.env files.\n")
	b.WriteString("accounts {\n")
	for _, ns := range d.Namespaces {
		q := ns.Quota.withDefaults()
		fmt.Fprintf(&b, "  %s: {\n", strconv.Quote(ns.Name))
		fmt.Fprintf(&b, "    # namespace %s: its quota, enforced by the server\n", ns.Name)
		fmt.Fprintf(&b, "    jetstream: {\n      max_file: %d\n      max_mem: %d\n      max_streams: %d\n      max_consumers: %d\n      max_ack_pending: %d\n    }\n",
			int64(q.MaxStorage), int64(q.MaxMemory), q.MaxStreams, q.MaxConsumers, q.MaxAckPending)
		b.WriteString("    users: [\n")
		for _, c := range creds {
			if c.User.Namespace != ns.Name {
				continue
			}
			if err := writeUser(&b, c, cost, "      "); err != nil {
				return nil, err
			}
		}
		b.WriteString("    ]\n  }\n")
	}
	b.WriteString("}\n")
	return []byte(b.String()), nil
}

// Targets are the namespaces a process of role r (and queue q) serves,
// each with the connection settings of its user there:
//
//   - no -namespace: the configuration as it is (a deployment without
//     namespaces, or credentials that say which account);
//   - one namespace without -roles-dir: the configuration's credentials,
//     labelled with the namespace (and checked against it on connecting,
//     VerifyNamespace);
//   - with -roles-dir: the credentials of the role's user in each
//     namespace, read from the <user>.env files 'weft roles' wrote there.
//
// Several namespaces need -roles-dir: a connection has one account.
func (c *Config) Targets(r Role, q string) ([]Config, error) {
	names := SplitNamespaces(c.Namespace)
	if len(names) == 0 && c.RolesDir == "" {
		return []Config{*c}, nil
	}
	if c.RolesDir == "" {
		if len(names) > 1 {
			return nil, fmt.Errorf("-namespace %s: serving several namespaces takes -roles-dir (WEFT_ROLES_DIR), the directory 'weft roles' wrote their credentials to", c.Namespace)
		}
		one := *c
		one.Namespace = names[0]
		return []Config{one}, nil
	}
	if len(names) == 0 {
		names = []string{""}
	}
	var out []Config
	var errs []error
	for _, ns := range names {
		user := NamespaceUser(ns, r, q)
		path := filepath.Join(c.RolesDir, user+".env")
		vars, err := readEnvFile(path)
		if err != nil {
			if errors.Is(err, os.ErrNotExist) {
				err = fmt.Errorf("namespace %q: no credentials of %s in %s (is %q one of the namespaces 'weft roles -namespaces' generated there?)", ns, user, c.RolesDir, ns)
			}
			errs = append(errs, err)
			continue
		}
		if vars["WEFT_NATS_USER"] != user || vars["WEFT_NATS_PASSWORD"] == "" {
			errs = append(errs, fmt.Errorf("%s: not the credentials of %s", path, user))
			continue
		}
		one := *c
		one.Namespace, one.User, one.Password = ns, user, vars["WEFT_NATS_PASSWORD"]
		one.RolesDir = ""
		out = append(out, one)
	}
	return out, errors.Join(errs...)
}

// readEnvFile reads the variables of a <user>.env file.
func readEnvFile(path string) (map[string]string, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	vars := map[string]string{}
	for line := range strings.SplitSeq(string(b), "\n") {
		if k, v, ok := strings.Cut(strings.TrimSpace(line), "="); ok && !strings.HasPrefix(k, "#") {
			vars[k] = v
		}
	}
	return vars, nil
}

// userInfoSubject is the server's answer to "who am I": the connection's
// user and account (nats-server's $SYS.REQ.USER.INFO, which every account
// imports).
const userInfoSubject = "$SYS.REQ.USER.INFO"

// VerifyNamespace checks that nc's credentials put it in namespace ns's
// account: a process told -namespace a with namespace b's credentials
// would otherwise serve b. It wraps ErrWrongNamespace when the server
// says another account. When the server cannot say (an older server, or
// roles generated without the right to ask) it passes: the credentials
// decide, as without a namespace.
func VerifyNamespace(ctx context.Context, nc *nats.Conn, ns string) error {
	if ns == "" {
		return nil
	}
	ctx, cancel := context.WithTimeout(ctx, 2*time.Second)
	defer cancel()
	msg, err := nc.RequestWithContext(ctx, userInfoSubject, nil)
	if err != nil {
		return nil
	}
	var resp struct {
		Data *struct {
			User        string `json:"user"`
			Account     string `json:"account"`
			AccountName string `json:"account_name"`
		} `json:"data"`
	}
	if json.Unmarshal(msg.Data, &resp) != nil || resp.Data == nil {
		return nil
	}
	acc := resp.Data.AccountName
	if acc == "" {
		acc = resp.Data.Account
	}
	if acc == ns || acc == resp.Data.Account && resp.Data.Account == ns || ns == DefaultNamespace && acc == "$G" {
		return nil
	}
	return fmt.Errorf("%w: -namespace %s, but user %s is in NATS account %q: connect with namespace %s's credentials (the <role>@%s.env files 'weft roles' wrote)",
		ErrWrongNamespace, ns, resp.Data.User, acc, ns, ns)
}

// Size is a number of bytes. Flags and files take it as a number or with
// a unit: "512MiB", "10GiB", "1T" (K, M, G, T and their KiB… forms are
// powers of 1024).
type Size int64

// ParseSize parses a Size.
func ParseSize(s string) (Size, error) {
	t := strings.TrimSpace(s)
	mult := int64(1)
	for _, u := range []struct {
		suffix string
		mult   int64
	}{{"TiB", 1 << 40}, {"GiB", 1 << 30}, {"MiB", 1 << 20}, {"KiB", 1 << 10}, {"T", 1 << 40}, {"G", 1 << 30}, {"M", 1 << 20}, {"K", 1 << 10}, {"B", 1}} {
		if strings.HasSuffix(strings.ToUpper(t), strings.ToUpper(u.suffix)) {
			t, mult = strings.TrimSpace(t[:len(t)-len(u.suffix)]), u.mult
			break
		}
	}
	n, err := strconv.ParseInt(t, 10, 64)
	if err != nil || n < 0 || n > math.MaxInt64/mult {
		return 0, fmt.Errorf("%q is not a size (a number of bytes, or with a unit: 512MiB, 10GiB)", s)
	}
	return Size(n * mult), nil
}

// String shows the size with the largest unit that divides it.
func (s Size) String() string {
	for _, u := range []struct {
		name string
		mult Size
	}{{"TiB", 1 << 40}, {"GiB", 1 << 30}, {"MiB", 1 << 20}, {"KiB", 1 << 10}} {
		if s != 0 && s%u.mult == 0 {
			return strconv.FormatInt(int64(s/u.mult), 10) + u.name
		}
	}
	return strconv.FormatInt(int64(s), 10) + "B"
}

// Set makes a Size a flag.Value.
func (s *Size) Set(v string) error {
	n, err := ParseSize(v)
	if err != nil {
		return err
	}
	*s = n
	return nil
}

// MarshalJSON writes the size with its unit.
func (s Size) MarshalJSON() ([]byte, error) { return json.Marshal(s.String()) }

// UnmarshalJSON takes a number of bytes or a string with a unit.
func (s *Size) UnmarshalJSON(b []byte) error {
	var n int64
	if err := json.Unmarshal(b, &n); err == nil {
		*s = Size(n)
		return nil
	}
	var str string
	if err := json.Unmarshal(b, &str); err != nil {
		return fmt.Errorf("a size: a number of bytes, or a string with a unit (\"10GiB\"), got %s", b)
	}
	return s.Set(str)
}

// NamespacesFile is the file 'weft roles -namespaces-file' reads: the
// namespaces and, for each, what its quota says other than the defaults
// (YAML or JSON):
//
//	namespaces:
//	  - name: team-a
//	    quota: {maxStorage: 50GiB, startsPerSecond: 500}
//	  - name: team-b
type NamespacesFile struct {
	Namespaces []struct {
		Name  string    `json:"name"`
		Quota quotaFile `json:"quota"`
	} `json:"namespaces"`
}

// quotaFile is a quota as a file gives it: what is absent takes the
// default.
type quotaFile struct {
	MaxStorage       *Size  `json:"maxStorage"`
	MaxMemory        *Size  `json:"maxMemory"`
	MaxStreams       *int   `json:"maxStreams"`
	MaxConsumers     *int   `json:"maxConsumers"`
	MaxAckPending    *int   `json:"maxAckPending"`
	StreamMaxBytes   *Size  `json:"streamMaxBytes"`
	StreamMaxMsgs    *int64 `json:"streamMaxMsgs"`
	StartsPerSecond  *int   `json:"startsPerSecond"`
	SignalsPerSecond *int   `json:"signalsPerSecond"`
}

// ParseNamespaces reads a namespaces file (YAML or JSON) over base, the
// quota of what each namespace does not say. A field given as zero is an
// error, as is a field the file format does not have.
func ParseNamespaces(data []byte, base Quota) ([]Namespace, error) {
	var f NamespacesFile
	if err := yaml.UnmarshalStrict(data, &f); err != nil {
		return nil, err
	}
	if len(f.Namespaces) == 0 {
		return nil, errors.New("no namespaces")
	}
	var out []Namespace
	var errs []error
	for _, n := range f.Namespaces {
		q := base
		var zero []string
		setSize := func(dst *Size, v *Size, name string) {
			if v != nil {
				if *v == 0 {
					zero = append(zero, name)
				}
				*dst = *v
			}
		}
		setInt := func(dst *int, v *int, name string) {
			if v != nil {
				if *v == 0 {
					zero = append(zero, name)
				}
				*dst = *v
			}
		}
		setSize(&q.MaxStorage, n.Quota.MaxStorage, "maxStorage")
		setSize(&q.MaxMemory, n.Quota.MaxMemory, "maxMemory")
		setSize(&q.StreamMaxBytes, n.Quota.StreamMaxBytes, "streamMaxBytes")
		setInt(&q.MaxStreams, n.Quota.MaxStreams, "maxStreams")
		setInt(&q.MaxConsumers, n.Quota.MaxConsumers, "maxConsumers")
		setInt(&q.MaxAckPending, n.Quota.MaxAckPending, "maxAckPending")
		setInt(&q.StartsPerSecond, n.Quota.StartsPerSecond, "startsPerSecond")
		setInt(&q.SignalsPerSecond, n.Quota.SignalsPerSecond, "signalsPerSecond")
		if v := n.Quota.StreamMaxMsgs; v != nil {
			if *v == 0 {
				zero = append(zero, "streamMaxMsgs")
			}
			q.StreamMaxMsgs = *v
		}
		for _, z := range zero {
			errs = append(errs, fmt.Errorf("namespace %s: quota %s: a quota of zero (want at least 1; a namespace that may do nothing needs no credentials)", n.Name, z))
		}
		out = append(out, Namespace{Name: n.Name, Quota: q})
	}
	return out, errors.Join(errs...)
}
