package builtin

import (
	"context"
	"encoding/json"

	"github.com/weft-dev/weft/internal/worker"
)

// EchoConfig configures echo. Without "output" the output is the node's
// input state.
type EchoConfig struct {
	Output  json.RawMessage   `json:"output,omitempty"`
	Updates map[string]any    `json:"updates,omitempty"`
	Actions []json.RawMessage `json:"actions,omitempty"` // "name" or {"name": ..., "data": ...}
}

// Echo outputs its input state, or its configured output, and the updates
// and actions its configuration lists. It is handy in tests and demos.
type Echo struct{}

// Execute implements worker.Node.
func (Echo) Execute(_ context.Context, in *worker.Input) (*worker.Result, error) {
	var cfg EchoConfig
	if err := decodeConfig(in, &cfg); err != nil {
		return nil, err
	}
	res := &worker.Result{Output: in.State, Updates: cfg.Updates}
	if len(cfg.Output) > 0 {
		res.Output = cfg.Output
	}
	for _, raw := range cfg.Actions {
		var name string
		if json.Unmarshal(raw, &name) == nil {
			res.Actions = append(res.Actions, worker.Action{Name: name})
			continue
		}
		var a struct {
			Name string          `json:"name"`
			Data json.RawMessage `json:"data,omitempty"`
		}
		if err := json.Unmarshal(raw, &a); err != nil || a.Name == "" {
			return nil, configError(in, "actions: want a name or {\"name\": ..., \"data\": ...}, got "+string(raw))
		}
		act := worker.Action{Name: a.Name}
		if len(a.Data) > 0 {
			act.Data = a.Data
		}
		res.Actions = append(res.Actions, act)
	}
	return res, nil
}

// Noop does nothing and outputs nothing.
type Noop struct{}

// Execute implements worker.Node.
func (Noop) Execute(context.Context, *worker.Input) (*worker.Result, error) {
	return &worker.Result{}, nil
}
