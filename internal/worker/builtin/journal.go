package builtin

import (
	"context"

	"github.com/weft-dev/weft/internal/worker"
)

// defaultJournal is the journal of an Agent that names none.
var defaultJournal Journal = nopJournal{}

// nopJournal records nothing: the loop starts over when the node runs
// again.
type nopJournal struct{}

func (nopJournal) Last(context.Context, *worker.Input) (*AgentStep, error) { return nil, nil }
func (nopJournal) Record(context.Context, *worker.Input, *AgentStep) error { return nil }
