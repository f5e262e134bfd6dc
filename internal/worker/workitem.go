package worker

import (
	"fmt"

	"github.com/nats-io/nats.go"

	"github.com/weft-dev/weft/pkg/events"
)

// decodeWorkItem decodes a message of a task queue: a node-ready event
// that names its node and type. Anything else is ErrMalformedEvent, with
// the subject it came on.
func decodeWorkItem(subject string, hdr nats.Header, data []byte) (*events.Event, *events.NodeReadyData, error) {
	ev, err := events.Decode(subject, hdr, data)
	if err != nil {
		return nil, nil, err
	}
	if ev.Type != events.NodeReady {
		return nil, nil, fmt.Errorf("%w: %s: a %s event on a task queue", events.ErrMalformedEvent, subject, ev.Type)
	}
	p, err := ev.Payload()
	if err != nil {
		return nil, nil, fmt.Errorf("%w: %s: %v", events.ErrMalformedEvent, subject, err)
	}
	ready, ok := p.(*events.NodeReadyData)
	if !ok || ready.Node == "" || ready.Type == "" {
		return nil, nil, fmt.Errorf("%w: %s: node-ready event without node or type", events.ErrMalformedEvent, subject)
	}
	return ev, ready, nil
}
