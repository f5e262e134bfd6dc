package builtin

import (
	"bytes"
	"encoding/json"
	"fmt"
	"time"

	"github.com/weft-dev/weft/internal/nodeconfig"
	"github.com/weft-dev/weft/internal/worker"
	"github.com/weft-dev/weft/pkg/events"
)

// decodeConfig decodes a node's configuration strictly into cfg. An absent
// configuration leaves cfg as it is.
func decodeConfig(in *worker.Input, cfg any) error {
	raw := bytes.TrimSpace(in.Config)
	if len(raw) == 0 || bytes.Equal(raw, []byte("null")) {
		return nil
	}
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.DisallowUnknownFields()
	if err := dec.Decode(cfg); err != nil {
		return worker.NonRetryable(events.FailureValidation, fmt.Sprintf("%s node %q: config: %v", in.Type, in.NodeID, err))
	}
	return nil
}

// Duration is a configuration duration: a Go duration string or a number of
// milliseconds.
type Duration time.Duration

// UnmarshalJSON reads "1.5s" or 1500 (nodeconfig.ParseDuration, the rule
// graph validation applies too).
func (d *Duration) UnmarshalJSON(b []byte) error {
	x, err := nodeconfig.ParseDuration(b)
	if err != nil {
		return err
	}
	*d = Duration(x)
	return nil
}

// MarshalJSON writes the duration as a Go duration string.
func (d Duration) MarshalJSON() ([]byte, error) { return json.Marshal(time.Duration(d).String()) }

// configError is a non-retryable validation failure about a node's
// configuration.
func configError(in *worker.Input, msg string) error {
	return worker.NonRetryable(events.FailureValidation, fmt.Sprintf("%s node %q: config: %s", in.Type, in.NodeID, msg))
}
