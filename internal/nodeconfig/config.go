package nodeconfig

import (
	"encoding/json"
	"fmt"
	"regexp"
	"slices"
	"strings"
	"time"
)

// ParseDuration reads a config duration: a Go duration string ("1.5s") or
// a number of milliseconds (1500), not negative.
func ParseDuration(b []byte) (time.Duration, error) {
	var v any
	if err := json.Unmarshal(b, &v); err != nil {
		return 0, err
	}
	var d time.Duration
	switch v := v.(type) {
	case string:
		x, err := time.ParseDuration(v)
		if err != nil {
			return 0, fmt.Errorf("%q is not a duration: write one like \"1.5s\" or \"2m\", or a number of milliseconds", v)
		}
		d = x
	case float64:
		d = time.Duration(v * float64(time.Millisecond))
	default:
		return 0, fmt.Errorf("want a duration like \"1.5s\" or a number of milliseconds, got %s", b)
	}
	if d < 0 {
		return 0, fmt.Errorf("must not be negative, got %s", b)
	}
	return d, nil
}

var (
	// SecretRef matches a secret reference, ${secret:NAME}, in a header
	// value; its group is the name.
	SecretRef = regexp.MustCompile(`\$\{secret:([^}]*)\}`)
	// SecretName is what a secret may be called: it becomes an
	// environment variable's suffix or a file name, so no path separators
	// and no dots.
	SecretName = regexp.MustCompile(`^[A-Za-z_][A-Za-z0-9_]{0,127}$`)
)

// SensitiveHeaders are the request headers whose values must be secret
// references: a literal value in the graph would be copied into every
// event of the run.
var SensitiveHeaders = []string{"Authorization", "Cookie", "Proxy-Authorization"}

// HasSecretRef reports whether a configuration value holds a secret
// reference.
func HasSecretRef(v string) bool { return strings.Contains(v, "${secret:") }

// CheckHeaders checks a node's request headers as a graph gives them
// (HeaderProblems for each). It returns one message per problem, each
// starting with the header's field, "headers.NAME: ", sorted.
func CheckHeaders(headers map[string]string, extra ...string) []string {
	var bad []string
	for k, v := range headers {
		for _, p := range HeaderProblems(k, v, extra) {
			bad = append(bad, "headers."+k+": "+p)
		}
	}
	slices.Sort(bad)
	return bad
}

// HeaderProblems says what is wrong with one request header as a graph
// gives it: a sensitive header (SensitiveHeaders, or one listed in extra)
// must take its value from a secret reference, and every reference must be
// well formed. Graph validation and the http executor both ask it.
func HeaderProblems(name, value string, extra []string) []string {
	if !HasSecretRef(value) {
		if value != "" && Sensitive(name, extra) {
			return []string{`a credential must not be written in the graph (events copy it); reference a secret configured on the worker: "${secret:NAME}" (e.g. "Bearer ${secret:API_TOKEN}")`}
		}
		return nil
	}
	var bad []string
	refs := SecretRef.FindAllStringSubmatch(value, -1)
	if len(refs) == 0 {
		bad = append(bad, "malformed secret reference: want ${secret:NAME}")
	}
	for _, r := range refs {
		if !SecretName.MatchString(r[1]) {
			bad = append(bad, fmt.Sprintf("secret reference %q: a name holds letters, digits and '_' (at most 128)", r[0]))
		}
	}
	return bad
}

// Sensitive reports whether a header is one of SensitiveHeaders or of extra.
func Sensitive(header string, extra []string) bool {
	same := func(s string) bool { return strings.EqualFold(s, header) }
	return slices.ContainsFunc(SensitiveHeaders, same) || slices.ContainsFunc(extra, same)
}
