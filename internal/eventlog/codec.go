package eventlog

import (
	"fmt"
	"net/url"
	"strconv"
	"strings"
	"time"

	"github.com/cloudevents/sdk-go/v2/types"
	"github.com/nats-io/nats.go"
)

// The hot path's codec. Every hop of a run encodes and decodes events
// twice; going through the CloudEvents SDK's binding objects cost about
// 35 µs of each hop. encodeFast and decodeFast read and write the same
// "ce-*" headers directly: the wire format is unchanged CloudEvents 1.0
// binary mode (a stock SDK still reads every message: see the tests), and
// the tests hold both to the SDK's path (encodeSDK, decodeSDK), which
// decodeFast also hands every message it does not know to: another spec
// version, an attribute or extension Weft does not write, mixed-case
// header names.

// Header names the fast codec writes and reads.
const (
	hdrSpecVersion = headerPrefix + "specversion"
	hdrID          = headerPrefix + "id"
	hdrSource      = headerPrefix + "source"
	hdrType        = headerPrefix + "type"
	hdrTime        = headerPrefix + "time"
	hdrSubject     = headerPrefix + "subject"
	hdrRunID       = headerPrefix + ExtRunID
	hdrNodeID      = headerPrefix + ExtNodeID
	hdrAttempt     = headerPrefix + ExtAttempt
	hdrTraceParent = headerPrefix + ExtTraceParent
	hdrTraceState  = headerPrefix + ExtTraceState
	hdrContentType = "content-type"
	contentJSON    = "application/json"
)

// knownCE are the "ce-*" headers decodeFast reads; any other sends the
// message to the SDK's decoder.
var knownCE = map[string]bool{
	hdrSpecVersion: true, hdrID: true, hdrSource: true, hdrType: true, hdrTime: true, hdrSubject: true,
	hdrRunID: true, hdrNodeID: true, hdrAttempt: true, hdrTraceParent: true, hdrTraceState: true,
	hdrKeyID: true,
}

// encodeFast encodes e, its data sealed by s unless s is nil (seal.go).
func encodeFast(e *Event, s *sealer) (*nats.Msg, error) {
	switch {
	case e.ID == "":
		return nil, fmt.Errorf("%w: id: REQUIRED", ErrMalformedEvent)
	case e.Source == "":
		return nil, fmt.Errorf("%w: source: REQUIRED", ErrMalformedEvent)
	case e.Type == "":
		return nil, fmt.Errorf("%w: type: REQUIRED", ErrMalformedEvent)
	}
	subject, err := e.subjectOf()
	if err == nil {
		err = startPlaced(e)
	}
	if err != nil {
		return nil, fmt.Errorf("encoding %s event of run %q: %w", e.Type, e.RunID, err)
	}
	h := headersOf(e)
	var data []byte
	if len(e.Data) > 0 {
		data = e.Data
		if s != nil {
			id, sealed, err := s.seal(e)
			if err != nil {
				return nil, err
			}
			h[hdrContentType] = []string{ContentSealed}
			h[hdrKeyID] = []string{id}
			data = sealed
		}
	}
	return &nats.Msg{Subject: subject, Header: h, Data: data}, nil
}

// headersOf is the CloudEvents headers of e, and its Nats-Msg-Id. One
// array backs every header's value (a slice of one each, capped so that
// an append copies): one allocation where one per header was.
func headersOf(e *Event) nats.Header {
	vals := make([]string, 0, 16)
	one := func(v string) []string {
		vals = append(vals, v)
		return vals[len(vals)-1 : len(vals) : len(vals)]
	}
	h := make(nats.Header, 14)
	h[hdrSpecVersion] = one("1.0")
	h[hdrID] = one(e.ID)
	h[hdrSource] = one(e.Source)
	h[hdrType] = one(string(e.Type))
	h[hdrTime] = one(e.Time.UTC().Format(time.RFC3339Nano))
	h[hdrContentType] = one(contentJSON)
	h[hdrRunID] = one(e.RunID)
	if e.NodeID != "" {
		h[hdrSubject] = one(e.NodeID)
		h[hdrNodeID] = one(e.NodeID)
	}
	if e.Attempt > 0 {
		h[hdrAttempt] = one(strconv.Itoa(e.Attempt))
	}
	if e.TraceParent != "" {
		h[hdrTraceParent] = one(e.TraceParent)
		h["traceparent"] = one(e.TraceParent)
		if e.TraceState != "" {
			h[hdrTraceState] = one(e.TraceState)
			h["tracestate"] = one(e.TraceState)
		}
	}
	if e.Checkpoint != "" && e.decision {
		h[HdrCheckpoint] = one(e.Checkpoint)
	}
	h[nats.MsgIdHdr] = one(e.ID)
	return h
}

// decodeFast decodes a message whose headers are all of the kinds Weft
// writes, opening sealed data with s; ok is false when the SDK's decoder
// must look at it.
func decodeFast(subject string, hdr nats.Header, data []byte, s *sealer) (e *Event, ok bool, err error) {
	if !fastHeaders(hdr) {
		return nil, false, nil
	}
	switch header(hdr, hdrSpecVersion) {
	case "":
		return nil, true, fmt.Errorf("%w: %s: not a CloudEvent in binary mode (no %s header)", ErrMalformedEvent, subject, hdrSpecVersion)
	case "1.0":
	default:
		return nil, false, nil
	}
	e = &Event{ID: header(hdr, hdrID), Source: header(hdr, hdrSource), Type: Type(header(hdr, hdrType)), RunID: header(hdr, hdrRunID),
		NodeID: header(hdr, hdrNodeID), TraceParent: header(hdr, hdrTraceParent), TraceState: header(hdr, hdrTraceState), Data: data}
	if e.ID == "" || e.Source == "" || e.Type == "" {
		return nil, true, fmt.Errorf("%w: %s: id, source and type are required", ErrMalformedEvent, subject)
	}
	if u, perr := url.Parse(e.Source); perr != nil || u.String() != e.Source {
		return nil, false, nil // let the SDK judge the URI
	}
	if ok, err := fastTimeAndAttempt(subject, hdr, e); !ok || err != nil {
		return nil, ok, err
	}
	if len(e.Data) == 0 {
		e.Data = nil
	}
	if err := unseal(subject, e, header(hdr, hdrContentType), header(hdr, hdrKeyID), s); err != nil {
		return nil, true, err
	}
	e, err = placed(subject, e)
	return e, true, err
}

// fastHeaders reports whether every header is one decodeFast reads, with
// a value, in the case Weft writes, and the content type one it knows.
func fastHeaders(hdr nats.Header) bool {
	for k, vs := range hdr {
		lk := strings.ToLower(k)
		if lk != k && (strings.HasPrefix(lk, headerPrefix) || lk == hdrContentType) {
			return false
		}
		if strings.HasPrefix(k, headerPrefix) && (!knownCE[k] || len(vs) == 0 || vs[0] == "") {
			return false
		}
	}
	v, has := hdr[hdrContentType]
	return !has || len(v) > 0 && (v[0] == contentJSON || v[0] == ContentSealed || v[0] == ContentRef)
}

// header is the first value of header k, or "".
func header(hdr nats.Header, k string) string {
	if v := hdr[k]; len(v) > 0 {
		return v[0]
	}
	return ""
}

// fastTimeAndAttempt sets e's time and attempt from their headers and
// checks that e has a run id (after the time: a bad time is the error
// said first); ok is false when the attempt is in a form only the SDK's
// decoder may read.
func fastTimeAndAttempt(subject string, hdr nats.Header, e *Event) (ok bool, err error) {
	if v := header(hdr, hdrTime); v != "" {
		t, terr := types.ParseTime(v)
		if terr != nil {
			return true, fmt.Errorf("%w: %s: time %q: %v", ErrMalformedEvent, subject, v, terr)
		}
		e.Time = t.UTC()
	}
	if e.RunID == "" {
		return true, fmt.Errorf("%w: %s: missing extension %q", ErrMalformedEvent, subject, ExtRunID)
	}
	v := header(hdr, hdrAttempt)
	if v == "" {
		return true, nil
	}
	n, aerr := strconv.ParseInt(v, 10, 32)
	if aerr != nil {
		return false, nil // a form the SDK may still read as an integer
	}
	if n < 0 {
		return true, fmt.Errorf("%w: %s: extension %q: %v", ErrMalformedEvent, subject, ExtAttempt, v)
	}
	e.Attempt = int(n)
	return true, nil
}
