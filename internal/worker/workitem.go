package worker

import (
	"errors"
	"fmt"
	"strconv"
	"strings"

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

// readyTypePrefix is the type of node-ready events without its version.
const readyTypePrefix = "dev.weft.node.ready.v"

// newerWorkItem reports whether a work item that did not decode is a
// node-ready of a newer version than this worker's (its type
// "dev.weft.node.ready.v<N>", N above 1): not malformed, only not for
// this worker (docs/worker-protocol.md, "Version").
func newerWorkItem(hdr nats.Header, err error) (string, bool) {
	if err == nil || !errors.Is(err, events.ErrUnknownType) {
		return "", false
	}
	t := hdr.Get("ce-type")
	v, ok := strings.CutPrefix(t, readyTypePrefix)
	if !ok {
		return "", false
	}
	n, perr := strconv.Atoi(v)
	return t, perr == nil && n > 1
}
