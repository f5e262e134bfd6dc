package builtin

import (
	"context"
	"fmt"
	"regexp"
	"strings"

	"github.com/weft-dev/weft/internal/expr"
	"github.com/weft-dev/weft/internal/worker"
)

// Guardrails (AgentOS's guardrailPolicy): declarative checks, on llm and
// agent nodes, of the text the node sends its model first (its rendered
// prompt: "input") and of its (final) answer ("output"). Each check is a CEL condition that must hold,
// a deny-list of regular expressions, or a length limit, and names its
// action: "block" (the default: the node fails, not retryable, with a
// GuardrailBlocked failure that names the node, the stage and the check),
// "redact" (matches of a deny-list are replaced by "[redacted]"; for a
// length limit the text is cut) or "warn" (the node goes on; the warning
// is in its output's "guardrails" list). The outcome is in the log either
// way: a failure event, or the node's output.
//
// A CEL condition sees the text under check as `output` (a string), the
// stage as `local.stage`, and the node's state and the run's invocation
// state as `state` and `invocation`; it must give a bool, true when the
// text passes.

// FailureGuardrail is the failure of a node a guardrail blocked.
const FailureGuardrail = "GuardrailBlocked"

// Guardrail actions.
const (
	GuardrailBlock  = "block"
	GuardrailRedact = "redact"
	GuardrailWarn   = "warn"
)

// GuardrailPolicy is the checks of a node's input and output.
type GuardrailPolicy struct {
	Input  []Guardrail `json:"input,omitempty"`
	Output []Guardrail `json:"output,omitempty"`

	warnings []string
}

// Guardrail is one check: one of CEL, Deny or MaxLength.
type Guardrail struct {
	// Name names the check in failures and warnings (default: its index).
	Name      string   `json:"name,omitempty"`
	CEL       string   `json:"cel,omitempty"`
	Deny      []string `json:"deny,omitempty"`
	MaxLength int      `json:"maxLength,omitempty"`
	// Action is block (default), redact or warn.
	Action string `json:"action,omitempty"`

	prog *expr.Program
	deny []*regexp.Regexp
}

// compile checks the policy and compiles its checks; it returns one
// message per problem, each naming its field.
func (p *GuardrailPolicy) compile() []string {
	var bad []string
	for stage, list := range map[string][]Guardrail{"input": p.Input, "output": p.Output} {
		for i := range list {
			g := &list[i]
			at := fmt.Sprintf("guardrails.%s[%d]", stage, i)
			if g.Name == "" {
				g.Name = fmt.Sprintf("%s[%d]", stage, i)
			}
			n := 0
			if g.CEL != "" {
				n++
				prog, err := expr.Compile(g.CEL, expr.Bool, 0)
				if err != nil {
					bad = append(bad, at+".cel: "+err.Error())
				}
				g.prog = prog
			}
			if len(g.Deny) > 0 {
				n++
				for j, d := range g.Deny {
					re, err := regexp.Compile(d)
					if err != nil {
						bad = append(bad, fmt.Sprintf("%s.deny[%d]: %v", at, j, err))
						continue
					}
					g.deny = append(g.deny, re)
				}
			}
			if g.MaxLength > 0 {
				n++
			}
			if n != 1 {
				bad = append(bad, at+": want exactly one of cel, deny, maxLength")
			}
			switch g.Action {
			case "":
				g.Action = GuardrailBlock
			case GuardrailBlock, GuardrailWarn:
			case GuardrailRedact:
				if g.prog != nil {
					bad = append(bad, at+".action: a CEL check cannot redact (block or warn)")
				}
			default:
				bad = append(bad, fmt.Sprintf("%s.action: %q is not one of block, redact, warn", at, g.Action))
			}
		}
	}
	return bad
}

// check runs the stage's checks over text and returns the text, redacted
// where a check says so.
func (p *GuardrailPolicy) check(ctx context.Context, in *worker.Input, stage, text string) (string, error) {
	list := p.Input
	if stage == "output" {
		list = p.Output
	}
	for _, g := range list {
		why, redacted, err := g.violation(ctx, in, stage, text)
		if err != nil {
			return "", err
		}
		text = redacted
		if why == "" {
			continue
		}
		msg := fmt.Sprintf("%s node %q: guardrails.%s %s: the %s %s", in.Type, in.NodeID, stage, g.Name, stage, why)
		switch g.Action {
		case GuardrailBlock:
			return "", worker.NonRetryable(FailureGuardrail, msg)
		case GuardrailWarn, GuardrailRedact:
			p.warnings = append(p.warnings, g.Action+": "+msg)
		}
	}
	return text, nil
}

// violation applies guardrail g to text at stage: why it does not hold
// ("" if it does), and the text, redacted if g redacts what it found. A
// CEL check that cannot be evaluated is a non-retryable failure.
func (g *Guardrail) violation(ctx context.Context, in *worker.Input, stage, text string) (why, redacted string, err error) {
	switch {
	case g.prog != nil:
		ok, err := g.prog.EvalBool(ctx, expr.Vars{State: in.State, Invocation: in.Invocation, Output: text, Local: map[string]any{"stage": stage}})
		if err != nil {
			return "", "", worker.NonRetryable(FailureGuardrail, fmt.Sprintf("%s node %q: guardrails.%s %s: CEL %q: %v", in.Type, in.NodeID, stage, g.Name, g.CEL, err))
		}
		if !ok {
			why = fmt.Sprintf("CEL %q is false", g.CEL)
		}
	case len(g.deny) > 0:
		for _, re := range g.deny {
			if re.MatchString(text) {
				why = fmt.Sprintf("matches deny pattern %q", re.String())
				if g.Action == GuardrailRedact {
					text = re.ReplaceAllString(text, "[redacted]")
				}
			}
		}
	case g.MaxLength > 0 && len(text) > g.MaxLength:
		why = fmt.Sprintf("%d bytes, more than maxLength %d", len(text), g.MaxLength)
		if g.Action == GuardrailRedact {
			text = strings.ToValidUTF8(text[:g.MaxLength], "")
		}
	}
	return why, text, nil
}
