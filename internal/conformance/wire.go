package conformance

import (
	"encoding/json"
	"fmt"
	"hash/fnv"
	"time"

	"github.com/nats-io/nats.go"

	"github.com/weft-dev/weft/internal/eventlog"
	"github.com/weft-dev/weft/pkg/events"
)

// slot is a run's slot token: FNV-1a 32-bit of the run id, modulo 64, as
// two lowercase hex digits (docs/worker-protocol.md, "Subjects").
func slot(run string) string {
	h := fnv.New32a()
	_, _ = h.Write([]byte(run))
	return fmt.Sprintf("%02x", h.Sum32()%64)
}

// runBase is "weft.r.<slot>.<run>.".
func runBase(run string) string { return "weft.r." + slot(run) + "." + run + "." }

// natsMsg is a message with an empty header, for the kit's publishes.
func natsMsg(subject string, data []byte) *nats.Msg {
	return &nats.Msg{Subject: subject, Header: nats.Header{}, Data: data}
}

// ceHeaders are the CloudEvents binary-mode headers of an event of type
// typ with id id for run, as a writer puts them.
func ceHeaders(run, typ, id string) map[string]string {
	return map[string]string{
		"ce-specversion": "1.0", "ce-id": id, "ce-source": "weft", "ce-type": typ,
		"ce-time": time.Now().UTC().Format(time.RFC3339Nano), "ce-runid": run,
		"content-type": "application/json", "Nats-Msg-Id": id,
	}
}

// encodeEvent encodes an event as the message a writer publishes.
func encodeEvent(ev *events.Event) (*nats.Msg, error) { return eventlog.Encode(ev) }

// jsonUnmarshal decodes raw into v; no value is an error.
func jsonUnmarshal(raw json.RawMessage, v any) error {
	if len(raw) == 0 {
		return fmt.Errorf("no value")
	}
	return json.Unmarshal(raw, v)
}
