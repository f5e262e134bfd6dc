package eventlog

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"slices"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
)

// A run's objects beside the log, as the run is removed, archived and
// restored.
//
// An object's name, "<run>.<sha256 of the body>", is its run's: a
// reference to another run's object is refused (resolve), so no two runs
// share an object, and removing one run never touches another's. The run's
// log is the index of its objects: RunPayloads reads the run's messages as
// stored (batched direct gets over the run's subjects, as many round
// trips as the run's log needs) and names the objects their references
// name, and DeletePayloadObjects deletes them one by one. Removing a run
// costs what the run holds, never what the bucket holds. An object whose
// event never landed (its append failed for good after the object was
// written) is in no log: it is not found this way.
//
// An archive carries a run's objects with its events (internal/readmodel:
// ArchivedPayload reads one as stored, sealed when the event is), so
// that the objects leave the bucket with the run; a restore puts them
// back (RestorePayload) before the events that refer to them, and a
// reader of the archive reads them from it (InlinePayload).

// ErrPayloadMissing is ArchivedPayload's error for a reference whose
// object is not in the bucket.
var ErrPayloadMissing = errors.New("payload object missing")

// RunPayloads names the objects that the messages of run in st's events
// stream refer to, each once, in the order of their first reference.
// References that are not well formed, or name another run's object, are
// passed over (they are refused when read, and are not the run's).
func RunPayloads(ctx context.Context, st Store, run string) ([]string, error) {
	s, ok := find[*store](st)
	if !ok {
		return nil, errNotJetStream(st)
	}
	if !ValidToken(run) {
		return nil, fmt.Errorf("the payloads of run %q: not a run id", run)
	}
	var names []string
	err := eachChunk(ctx, s.nc, s.cfg.Stream, RunFilter(run), func(m *nats.Msg) error {
		if name, ok := refObject(run, m); ok && !slices.Contains(names, name) {
			names = append(names, name)
		}
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("the payloads of run %s: %w", run, err)
	}
	return names, nil
}

// refObject is the object a message of run, got by a direct get, refers
// to (PayloadRef).
func refObject(run string, m *nats.Msg) (string, bool) {
	return PayloadRef(run, m.Header.Get("Nats-Subject"), m.Header, m.Data)
}

// PayloadRef names the object a stored message of run (on subject)
// refers to, if it is a well-formed reference to one of run's.
func PayloadRef(run, subject string, hdr nats.Header, body []byte) (string, bool) {
	if hdr.Get(hdrContentType) != ContentRef {
		return "", false
	}
	ref, err := parseRef(subject, run, body)
	if err != nil {
		return "", false
	}
	return ref.Object, true
}

// IsPayloadName reports whether name is the name of an object of run's:
// "<run>.<64 lowercase hex digits>".
func IsPayloadName(run, name string) bool { return runObject(run, name) }

// DeletePayloadObjects deletes the named objects of run from the payloads
// bucket. A name that is not one of run's objects is refused, and nothing
// is deleted; an object already gone is not an error.
func DeletePayloadObjects(ctx context.Context, js jetstream.JetStream, run string, names []string) error {
	for _, name := range names {
		if !runObject(run, name) {
			return fmt.Errorf("deleting the payloads of run %s: %q is not the name of one of its objects", run, name)
		}
	}
	if len(names) == 0 {
		return nil
	}
	obs, err := js.ObjectStore(ctx, PayloadsBucket)
	if errors.Is(err, jetstream.ErrBucketNotFound) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("deleting the payloads of run %s: %w", run, err)
	}
	var errs []error
	for _, name := range names {
		if err := obs.Delete(ctx, name); err != nil && !errors.Is(err, jetstream.ErrObjectNotFound) {
			errs = append(errs, fmt.Errorf("deleting payload object %s: %w", name, err))
		}
	}
	return errors.Join(errs...)
}

// DeletePayloads removes the objects a run's log refers to (RunPayloads,
// then DeletePayloadObjects). Call it before the run's events are purged,
// or collect the names first: once the log is gone, so is the index.
func DeletePayloads(ctx context.Context, st Store, run string) error {
	names, err := RunPayloads(ctx, st, run)
	if err != nil {
		return err
	}
	return DeletePayloadObjects(ctx, JetStream(st), run, names)
}

// ArchivedPayload reads, for an archive, the object a stored message of
// run refers to, as stored: its name and bytes. A message that is not a
// reference gives no name and no error; a reference whose object is gone
// is ErrPayloadMissing; a malformed one, or one whose object is not the
// bytes it names, ErrMalformedEvent or ErrPayloadTooLarge (as reading it
// would be): the event is refused when read, and archived as it is.
func ArchivedPayload(ctx context.Context, js jetstream.JetStream, run, subject string, hdr nats.Header, body []byte) (string, []byte, error) {
	if hdr.Get(hdrContentType) != ContentRef {
		return "", nil, nil
	}
	ref, err := parseRef(subject, run, body)
	if err != nil {
		return "", nil, err
	}
	b, err := getObject(js, ref)
	if errors.Is(err, errObjectMissing) {
		return ref.Object, nil, fmt.Errorf("%w: %s: object %s of bucket %s", ErrPayloadMissing, subject, ref.Object, ref.Bucket)
	}
	if errors.Is(err, errObjectCorrupt) {
		return ref.Object, nil, fmt.Errorf("%w: %s: payload object %s of bucket %s: %v", ErrMalformedEvent, subject, ref.Object, ref.Bucket, err)
	}
	if err != nil {
		return ref.Object, nil, fmt.Errorf("%s: payload object %s of bucket %s: %w", subject, ref.Object, ref.Bucket, err)
	}
	return ref.Object, b, nil
}

// CheckPayload checks that data, carried beside a run's events (in an
// archive), is the object of run named name: the name is one of run's
// and data's digest is the name's.
func CheckPayload(run, name string, data []byte) error {
	if !runObject(run, name) {
		return fmt.Errorf("payload object %q: not the name of one of run %s's objects", name, run)
	}
	if len(data) == 0 || len(data) > MaxPayloadObject {
		return fmt.Errorf("payload object %s: %d bytes (the limit is %d)", name, len(data), MaxPayloadObject)
	}
	if sum := sha256.Sum256(data); run+"."+hex.EncodeToString(sum[:]) != name {
		return fmt.Errorf("payload object %s: its %d bytes are not its digest", name, len(data))
	}
	return nil
}

// RestorePayload puts an object of run back into the payloads bucket
// (creating the bucket when it is missing), as a restore does before the
// events that refer to it: name and data are checked (CheckPayload); an
// object of that name and size already there is kept.
func RestorePayload(ctx context.Context, st Store, run, name string, data []byte) error {
	if err := CheckPayload(run, name, data); err != nil {
		return err
	}
	s, ok := find[*store](st)
	if !ok {
		return errNotJetStream(st)
	}
	ctx, cancel := withDefaultTimeout(ctx, 2*time.Minute)
	defer cancel()
	obs, err := s.payloads(ctx)
	if err != nil {
		return err
	}
	if info, err := obs.GetInfo(ctx, name); err == nil && info.Size == uint64(len(data)) {
		return nil
	}
	if _, err := obs.PutBytes(ctx, name, data); err != nil {
		return fmt.Errorf("restoring payload object %s: %w", name, err)
	}
	return nil
}

// InlinePayload returns a stored message of run (on subject) with the
// body its reference stands for, taken from objects (name to bytes,
// each checked with CheckPayload by whoever collected them), and the
// body's own content type: what the message would have been, written
// whole. A message that is not a reference, or whose object is not in
// objects, comes back as it is (a reader resolves it from the bucket).
func InlinePayload(run, subject string, hdr nats.Header, body []byte, objects map[string][]byte) (nats.Header, []byte) {
	if len(objects) == 0 || hdr.Get(hdrContentType) != ContentRef {
		return hdr, body
	}
	ref, err := parseRef(subject, run, body)
	if err != nil {
		return hdr, body
	}
	b, ok := objects[ref.Object]
	if !ok || int64(len(b)) != ref.Size {
		return hdr, body
	}
	h := make(nats.Header, len(hdr))
	for k, v := range hdr {
		h[k] = v
	}
	h[hdrContentType] = []string{ref.ContentType}
	if ref.ContentType == "" {
		delete(h, hdrContentType)
	}
	return h, b
}
