package builtin

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"

	"github.com/weft-dev/weft/internal/nodeconfig"
)

// Secrets resolve the secret references of node configurations. A graph
// never holds a secret: it holds a reference, ${secret:NAME}, in a header
// value ("Authorization": "Bearer ${secret:API_TOKEN}"), which the worker
// replaces when it sends the request. Events, which copy the graph, hold
// only the reference.
//
// A Secrets returns the value of the named secret and whether it exists.
// SecretsFromEnv and SecretsFromDir are the worker daemon's sources; Or
// chains them.
type Secrets func(name string) (value string, ok bool)

// SecretEnvPrefix prefixes the environment variables SecretsFromEnv reads:
// ${secret:API_TOKEN} is WEFT_SECRET_API_TOKEN.
const SecretEnvPrefix = "WEFT_SECRET_"

// secretName is what a secret may be called, and secretRef matches a
// reference in a header value (graph validation applies the same rules).
var (
	secretName = nodeconfig.SecretName
	secretRef  = nodeconfig.SecretRef
)

// SecretsFromEnv reads secret NAME from the variable WEFT_SECRET_NAME
// through lookup (os.LookupEnv when nil).
func SecretsFromEnv(lookup func(string) (string, bool)) Secrets {
	if lookup == nil {
		lookup = os.LookupEnv
	}
	return func(name string) (string, bool) {
		if !secretName.MatchString(name) {
			return "", false
		}
		return lookup(SecretEnvPrefix + name)
	}
}

// SecretsFromDir reads secret NAME from the file dir/NAME (a Kubernetes
// Secret mounted as a volume, say), without a trailing newline. Files are
// read on every use, so a rotated secret is picked up.
func SecretsFromDir(dir string) Secrets {
	return func(name string) (string, bool) {
		if dir == "" || !secretName.MatchString(name) {
			return "", false
		}
		b, err := os.ReadFile(filepath.Join(dir, name))
		if err != nil {
			return "", false
		}
		return strings.TrimRight(string(b), "\r\n"), true
	}
}

// Or looks a secret up in s, then in next.
func (s Secrets) Or(next Secrets) Secrets {
	return func(name string) (string, bool) {
		if s != nil {
			if v, ok := s(name); ok {
				return v, true
			}
		}
		if next != nil {
			return next(name)
		}
		return "", false
	}
}

// expandSecrets replaces the references in v with their values and
// returns the values used.
func expandSecrets(v string, secrets Secrets) (string, []string, error) {
	var used []string
	var err error
	out := secretRef.ReplaceAllStringFunc(v, func(m string) string {
		name := secretRef.FindStringSubmatch(m)[1]
		if !secretName.MatchString(name) {
			err = fmt.Errorf("secret reference %q: a name holds letters, digits and '_' (at most 128)", m)
			return ""
		}
		val, ok := "", false
		if secrets != nil {
			val, ok = secrets(name)
		}
		if !ok {
			err = fmt.Errorf("secret %s is not configured on this worker (set %s%s, or a file %s in its -secrets-dir)", name, SecretEnvPrefix, name, name)
			return ""
		}
		used = append(used, val)
		return val
	})
	if err == nil && nodeconfig.HasSecretRef(out) && len(used) == 0 {
		err = fmt.Errorf("malformed secret reference in %q: want ${secret:NAME}", v)
	}
	return out, used, err
}

// SensitiveHeaders are the request headers whose values must be secret
// references and are never shown: a literal value in the graph would be
// copied into every event of the run.
var SensitiveHeaders = nodeconfig.SensitiveHeaders

// scrub replaces every secret value in s.
func scrub(s string, values []string) string {
	for _, v := range values {
		if len(v) >= 4 {
			s = strings.ReplaceAll(s, v, "[redacted]")
		}
	}
	return s
}
