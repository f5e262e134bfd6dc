package eventlog

import (
	"encoding/json"
	"fmt"
	"strconv"

	cloudevents "github.com/cloudevents/sdk-go/v2/event"
	"github.com/cloudevents/sdk-go/v2/types"
)

// Extensions of the JSON form only: where the event stands in the stream.
const (
	extSeq      = "seq"
	extDecision = "decision"
	extQueue    = "queue"
)

// MarshalJSON writes the event in CloudEvents structured JSON, through the
// SDK, with two more extensions: "seq" (the stream sequence, as a string,
// since CloudEvents integers are 32-bit) and "decision". It is the form of
// `weft events -o json` and of recorded histories.
func (e *Event) MarshalJSON() ([]byte, error) {
	ce := e.CloudEvent()
	if e.Seq != 0 {
		ce.SetExtension(extSeq, strconv.FormatUint(e.Seq, 10))
	}
	if e.decision {
		ce.SetExtension(extDecision, true)
	}
	if e.Queue != "" && e.Type != NodeReady {
		ce.SetExtension(extQueue, e.Queue)
	}
	return json.Marshal(ce)
}

// UnmarshalJSON reads what MarshalJSON wrote, with the same checks as
// Decode: a valid CloudEvent of a known type whose data is its payload.
func (e *Event) UnmarshalJSON(b []byte) error {
	var ce cloudevents.Event
	if err := json.Unmarshal(b, &ce); err != nil {
		return fmt.Errorf("%w: %v", ErrMalformedEvent, err)
	}
	if err := ce.Validate(); err != nil {
		return fmt.Errorf("%w: %v", ErrMalformedEvent, err)
	}
	out, err := fromCloudEvent(&ce)
	if err != nil {
		return err
	}
	ext := ce.Extensions()
	if v, ok := ext[extSeq]; ok {
		s, _ := types.ToString(v)
		if out.Seq, err = strconv.ParseUint(s, 10, 64); err != nil {
			return fmt.Errorf("%w: extension %q: %v", ErrMalformedEvent, extSeq, err)
		}
	}
	if v, ok := ext[extDecision]; ok {
		out.decision, _ = types.ToBool(v)
	}
	if v, ok := ext[extQueue]; ok {
		out.Queue, _ = types.ToString(v)
	}
	if !out.Type.Known() {
		return fmt.Errorf("%w: %q", ErrUnknownType, out.Type)
	}
	if _, err := out.Payload(); err != nil {
		return err
	}
	*e = *out
	return nil
}
