package cli_test

import (
	"bufio"
	"bytes"
	"errors"
	"io/fs"
	"os"
	"path"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats-server/v2/server"
	"github.com/nats-io/nats.go"
	"sigs.k8s.io/yaml"
)

const deployDir = "../../deploy"

// TestDeployConfigsRefuseAnonymousWrites: every NATS server configuration
// under deploy/ (every *.conf) starts with authorization on. As shipped,
// before 'weft roles' has generated the users, the server refuses to start
// (its include is missing); with them, a server started from it refuses an
// anonymous connection (so no anonymous publish, and no anonymous stream
// deletion) and takes the client role's. Every NATS server a compose file
// starts runs one of these configurations with the roles mounted next to
// it, and every Weft program there connects as a role; no Kubernetes
// manifest runs a NATS server, and every Weft pod takes its credentials
// from the roles' Secret.
func TestDeployConfigsRefuseAnonymousWrites(t *testing.T) {
	var confs, composes, manifests []string
	err := filepath.WalkDir(deployDir, func(p string, d fs.DirEntry, err error) error {
		switch {
		case err != nil || d.IsDir():
			return err
		case strings.HasSuffix(p, ".conf"):
			confs = append(confs, p)
		case strings.Contains(filepath.Base(p), "docker-compose"):
			composes = append(composes, p)
		case strings.Contains(p, string(filepath.Separator)+"k8s"+string(filepath.Separator)) && strings.HasSuffix(p, ".yaml"):
			manifests = append(manifests, p)
		}
		return nil
	})
	if err != nil || len(confs) < 5 || len(composes) < 2 || len(manifests) < 3 {
		t.Fatalf("deploy/: %d configs, %d compose files, %d manifests, %v", len(confs), len(composes), len(manifests), err)
	}
	t.Setenv("NATS_SERVER_NAME", "weft-test") // nats-compose.conf's
	bare, withRoles := t.TempDir(), t.TempDir()
	if r := weft(t, "roles", "-out", filepath.Join(withRoles, "nats", "auth"), "-queues", "default,cpu"); r.code != 0 {
		t.Fatalf("weft roles: exit %d\n%s", r.code, r.stderr)
	}
	for _, c := range confs {
		rel, _ := filepath.Rel(deployDir, c)
		copyTo(t, c, filepath.Join(bare, rel))
		if _, err := server.ProcessConfigFile(filepath.Join(bare, rel)); err == nil || !strings.Contains(err.Error(), "auth.conf") {
			t.Errorf("%s without the roles: %v, want a refusal naming auth.conf", rel, err)
		}
		copyTo(t, c, filepath.Join(withRoles, rel))
		refusesAnonymous(t, rel, filepath.Join(withRoles, rel), filepath.Join(withRoles, "nats", "auth", "weft-client.env"))
	}
	for _, f := range composes {
		checkCompose(t, f, confs)
	}
	checkManifests(t, manifests)
}

func copyTo(t *testing.T, from, to string) {
	t.Helper()
	b, err := os.ReadFile(from)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.MkdirAll(filepath.Dir(to), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(to, b, 0o644); err != nil {
		t.Fatal(err)
	}
}

// refusesAnonymous starts a server from configuration conf (on free ports,
// alone, with its store in a temporary directory) and checks that an
// anonymous connection is refused and the client role's is taken.
func refusesAnonymous(t *testing.T, name, conf, clientEnv string) {
	t.Helper()
	opts, err := server.ProcessConfigFile(conf)
	if err != nil {
		t.Errorf("%s with the roles: %v", name, err)
		return
	}
	if opts.NoAuthUser != "" || len(opts.Users)+len(opts.Nkeys) == 0 {
		t.Errorf("%s: %d users, no_auth_user %q: want Weft's roles and no anonymous user", name, len(opts.Users)+len(opts.Nkeys), opts.NoAuthUser)
	}
	opts.Host, opts.Port, opts.HTTPPort = "127.0.0.1", -1, 0
	opts.Cluster = server.ClusterOpts{}
	opts.Routes = nil
	opts.StoreDir = t.TempDir()
	opts.NoLog, opts.NoSigs = true, true
	s, err := server.NewServer(opts)
	if err != nil {
		t.Errorf("%s: %v", name, err)
		return
	}
	go s.Start()
	defer s.Shutdown()
	if !s.ReadyForConnections(30 * time.Second) {
		t.Errorf("%s: the server did not start", name)
		return
	}
	if nc, err := nats.Connect(s.ClientURL(), nats.NoReconnect()); err == nil {
		nc.Close()
		t.Errorf("%s: an anonymous connection was accepted", name)
	} else if !errors.Is(err, nats.ErrAuthorization) {
		t.Errorf("%s: anonymous connection: %v, want an authorization violation", name, err)
	}
	vars := envFile(t, clientEnv)
	nc, err := nats.Connect(s.ClientURL(), nats.UserInfo(vars["WEFT_NATS_USER"], vars["WEFT_NATS_PASSWORD"]), nats.NoReconnect())
	if err != nil {
		t.Errorf("%s: the client role's connection: %v", name, err)
		return
	}
	nc.Close()
}

func envFile(t *testing.T, p string) map[string]string {
	t.Helper()
	b, err := os.ReadFile(p)
	if err != nil {
		t.Fatal(err)
	}
	vars := map[string]string{}
	sc := bufio.NewScanner(bytes.NewReader(b))
	for sc.Scan() {
		if k, v, ok := strings.Cut(sc.Text(), "="); ok && !strings.HasPrefix(k, "#") {
			vars[k] = v
		}
	}
	return vars
}

// composeService is what the check reads of a compose service.
type composeService struct {
	Image       string            `json:"image"`
	Build       any               `json:"build"`
	Command     []string          `json:"command"`
	Volumes     []string          `json:"volumes"`
	Environment map[string]string `json:"environment"`
}

// checkCompose: each NATS server of compose file f runs a configuration
// of confs with the roles mounted next to it; each Weft program finds its
// credentials in a mounted roles directory.
func checkCompose(t *testing.T, f string, confs []string) {
	t.Helper()
	b, err := os.ReadFile(f)
	if err != nil {
		t.Fatal(err)
	}
	var doc struct {
		Services map[string]composeService `json:"services"`
	}
	if err := yaml.Unmarshal(b, &doc); err != nil {
		t.Fatalf("%s: %v", f, err)
	}
	for name, s := range doc.Services {
		switch {
		case strings.HasPrefix(s.Image, "nats"):
			checkComposeNATS(t, f, name, s, confs)
		case strings.HasPrefix(s.Image, "weft") || s.Build != nil:
			dir := s.Environment["WEFT_ROLES_DIR"]
			if dir == "" || !mounts(s.Volumes, "./nats/auth", dir) {
				t.Errorf("%s: service %s connects without a role: want WEFT_ROLES_DIR and ./nats/auth mounted there (env %v, volumes %v)", f, name, s.Environment, s.Volumes)
			}
		}
	}
}

func checkComposeNATS(t *testing.T, f, name string, s composeService, confs []string) {
	t.Helper()
	var conf string
	for i, a := range s.Command {
		if a == "-c" && i+1 < len(s.Command) {
			conf = s.Command[i+1]
		}
	}
	if conf == "" {
		t.Errorf("%s: NATS service %s runs without a configuration (-c): anonymous", f, name)
		return
	}
	var host string
	for _, v := range s.Volumes {
		if parts := strings.Split(v, ":"); len(parts) >= 2 && parts[1] == conf {
			host = filepath.Join(filepath.Dir(f), parts[0])
		}
	}
	known := false
	for _, c := range confs {
		known = known || filepath.Clean(c) == filepath.Clean(host)
	}
	if !known {
		t.Errorf("%s: NATS service %s runs %s from %q, not one of deploy/'s configurations", f, name, conf, host)
	}
	if !mounts(s.Volumes, "./nats/auth", path.Join(path.Dir(conf), "auth")) {
		t.Errorf("%s: NATS service %s: the roles (./nats/auth) not mounted next to %s: %v", f, name, conf, s.Volumes)
	}
}

// mounts reports whether volumes mount host at target.
func mounts(volumes []string, host, target string) bool {
	for _, v := range volumes {
		if parts := strings.Split(v, ":"); len(parts) >= 2 && parts[0] == host && parts[1] == target {
			return true
		}
	}
	return false
}

// checkManifests: no manifest runs a NATS server; every Weft container
// mounts the Secret weft-roles (not optional) where config.yaml's
// WEFT_ROLES_DIR says.
func checkManifests(t *testing.T, manifests []string) {
	t.Helper()
	rolesDir := ""
	for _, m := range manifests {
		var doc struct {
			Kind string            `json:"kind"`
			Data map[string]string `json:"data"`
			Spec struct {
				Template struct {
					Spec podSpec `json:"spec"`
				} `json:"template"`
			} `json:"spec"`
		}
		b, err := os.ReadFile(m)
		if err != nil {
			t.Fatal(err)
		}
		if err := yaml.Unmarshal(b, &doc); err != nil {
			t.Fatalf("%s: %v", m, err)
		}
		if doc.Kind == "ConfigMap" {
			rolesDir = doc.Data["WEFT_ROLES_DIR"]
		}
		defer func(m string, p podSpec) { checkPod(t, m, p, rolesDir) }(m, doc.Spec.Template.Spec)
	}
	if rolesDir == "" {
		t.Errorf("deploy/k8s: no ConfigMap sets WEFT_ROLES_DIR")
	}
}

type podSpec struct {
	Volumes []struct {
		Name   string `json:"name"`
		Secret *struct {
			SecretName string `json:"secretName"`
			Optional   bool   `json:"optional"`
		} `json:"secret"`
	} `json:"volumes"`
	Containers []struct {
		Image        string `json:"image"`
		VolumeMounts []struct {
			Name      string `json:"name"`
			MountPath string `json:"mountPath"`
		} `json:"volumeMounts"`
	} `json:"containers"`
}

func checkPod(t *testing.T, m string, p podSpec, rolesDir string) {
	t.Helper()
	secret := map[string]bool{}
	for _, v := range p.Volumes {
		secret[v.Name] = v.Secret != nil && v.Secret.SecretName == "weft-roles" && !v.Secret.Optional
	}
	for _, c := range p.Containers {
		if strings.HasPrefix(c.Image, "nats") {
			t.Errorf("%s: runs a NATS server (%s), which no test holds to authorization", m, c.Image)
			continue
		}
		ok := false
		for _, vm := range c.VolumeMounts {
			ok = ok || secret[vm.Name] && vm.MountPath == rolesDir
		}
		if !ok {
			t.Errorf("%s: container %s does not mount the Secret weft-roles at %q: it would connect without a role", m, c.Image, rolesDir)
		}
	}
}
