package nodeconfig

import (
	"encoding/json"
	"fmt"
	"regexp"
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
