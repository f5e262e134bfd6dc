package eventlog

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/weft-dev/weft/internal/setup"
)

// Large payloads beside the log.
//
// An event whose body (its JSON, or its sealed form: offloading comes
// after sealing, so what is kept beside the log is as sealed as the log)
// is larger than the store's threshold (DefaultOffloadAt, 256 KiB, by
// default; WithOffloadAt) is appended with its body in the JetStream
// Object Store bucket PayloadsBucket, under the name
// "<run>.<sha256 of the body>", and a reference in its place:
//
//	content-type: application/vnd.weft.ref.v1
//	body: {"bucket":"weft-payloads","object":"<run>.<hex>","size":N,
//	       "sha256":"<hex>","contentType":"<the body's own content type>"}
//
// (ce-weftkey stays as the body's: the reference is plain, the object is
// sealed). Decode resolves a reference transparently through the stores
// this process opened (Open registers each), checking the object's size
// and digest, so every reader (the fold, workers, the UI, replay, fork,
// archive and restore, which keep references as stored) sees the event as
// if it had been written whole. Objects are read with direct gets, never
// a consumer (the roles grant readers none). The body is
// content-addressed and deterministic, so a retried append writes the
// same object and the same reference. A reference that names another
// bucket, another run's object, an object that is missing or whose bytes
// are not the digest is ErrMalformedEvent (the event is refused, never
// read as data); one over MaxPayloadObject is ErrPayloadTooLarge, and so
// is an append of a body over it.
//
// Reads that bound their memory by a batch (Each, for long histories)
// cut a batch by the bytes it resolves, not the bytes of its references.
// Removing a run ('weft admin retention', 'weft admin delete') removes
// its objects, found through its log (payloadgc.go); archiving it first
// carries them into its archive, and a restore puts them back. The
// admin's set-up
// creates the bucket (EnsurePayloads); the roles grant each role the
// reads and writes of it that it needs (internal/natsconn).

// ContentRef is the datacontenttype of an event whose body is kept in the
// payloads bucket.
const ContentRef = "application/vnd.weft.ref.v1"

// PayloadsBucket is the Object Store bucket of large payloads.
const PayloadsBucket = "weft-payloads"

// DefaultOffloadAt is the body size above which an event's body is kept
// beside the log.
const DefaultOffloadAt = 256 << 10

// MaxPayloadObject is the largest body kept beside the log.
const MaxPayloadObject = 64 << 20

// payloadRef is the body of an event kept beside the log.
type payloadRef struct {
	Bucket      string `json:"bucket"`
	Object      string `json:"object"`
	Size        int64  `json:"size"`
	SHA256      string `json:"sha256"`
	ContentType string `json:"contentType"`
}

// WithOffloadAt sets the threshold: bodies over n bytes are kept in the
// payloads bucket (default DefaultOffloadAt); 0 or less keeps every body
// in the log, and an event that does not fit in a message is refused
// (ErrPayloadTooLarge).
func WithOffloadAt(n int) Option { return func(c *config) { c.offloadAt = n } }

// EnsurePayloads sets up the payloads bucket beside the events stream
// (creating it, stored and replicated like the live events stream, when
// it is missing): what the admin's set-up does (internal/provision), so
// that roles that may not create buckets write large payloads.
func EnsurePayloads(ctx context.Context, st Store) error {
	s, ok := find[*store](st)
	if !ok {
		return errNotJetStream(st)
	}
	ctx, cancel := withDefaultTimeout(ctx, 30*time.Second)
	defer cancel()
	_, err := s.payloads(ctx)
	return err
}

// payloadStores are the JetStream contexts of the stores this process
// opened, which Decode resolves references through.
var payloadStores struct {
	sync.Mutex
	js []jetstream.JetStream
}

func registerPayloads(js jetstream.JetStream) {
	payloadStores.Lock()
	defer payloadStores.Unlock()
	live := payloadStores.js[:0]
	for _, j := range payloadStores.js {
		if j.Conn() != js.Conn() && !j.Conn().IsClosed() {
			live = append(live, j)
		}
	}
	payloadStores.js = append(live, js)
}

// offload keeps m's body in the payloads bucket when it is over the
// threshold, and puts the reference in its place.
func (s *store) offload(ctx context.Context, runID string, m *nats.Msg) error {
	at := s.cfg.offloadAt
	if at <= 0 || len(m.Data) <= at {
		return nil
	}
	if len(m.Data) > MaxPayloadObject {
		return fmt.Errorf("%w: %s event of run %q: a body of %d bytes, the limit beside the log is %d", ErrPayloadTooLarge, m.Header.Get(hdrType), runID, len(m.Data), MaxPayloadObject)
	}
	sum := sha256.Sum256(m.Data)
	digest := hex.EncodeToString(sum[:])
	ref := payloadRef{Bucket: PayloadsBucket, Object: runID + "." + digest, Size: int64(len(m.Data)), SHA256: digest, ContentType: m.Header.Get(hdrContentType)}
	obs, err := s.payloads(ctx)
	if err != nil {
		return err
	}
	if info, err := obs.GetInfo(ctx, ref.Object); err == nil && info.Size == uint64(ref.Size) {
		// Written by an earlier try of the same append (content-addressed).
	} else if _, err := obs.PutBytes(ctx, ref.Object, m.Data); err != nil {
		return fmt.Errorf("keeping the %d-byte body of a %s event of run %q beside the log: %w", len(m.Data), m.Header.Get(hdrType), runID, err)
	}
	b, err := json.Marshal(ref)
	if err != nil {
		return err
	}
	m.Header[hdrContentType] = []string{ContentRef}
	m.Data = b
	return nil
}

// payloads opens (creating it when it is missing) the payloads bucket.
func (s *store) payloads(ctx context.Context) (jetstream.ObjectStore, error) {
	obs, err := s.js.ObjectStore(ctx, PayloadsBucket)
	if errors.Is(err, jetstream.ErrBucketNotFound) {
		obs, err = setup.CreateObjectStore(ctx, s.js, jetstream.ObjectStoreConfig{
			Bucket: PayloadsBucket, Description: "Weft: event bodies over the offload threshold, beside the events stream",
			Storage: s.cfg.Storage, Replicas: s.cfg.Replicas,
		})
	}
	if err != nil {
		return nil, fmt.Errorf("the payloads bucket %s: %w", PayloadsBucket, err)
	}
	return obs, nil
}

// resolve returns the body and content type a reference (the body of an
// event of run on subject) stands for.
func resolve(subject, run string, body []byte) ([]byte, string, error) {
	ref, err := parseRef(subject, run, body)
	if err != nil {
		return nil, "", err
	}
	payloadStores.Lock()
	var stores []jetstream.JetStream
	for _, js := range payloadStores.js {
		if !js.Conn().IsClosed() {
			stores = append(stores, js)
		}
	}
	payloadStores.Unlock()
	if len(stores) == 0 {
		return nil, "", fmt.Errorf("%w: %s: payload object %s of bucket %s: this process opened no store to read it from", ErrMalformedEvent, subject, ref.Object, ref.Bucket)
	}
	var lastErr error
	for i := len(stores) - 1; i >= 0; i-- {
		b, err := getObject(stores[i], ref)
		if err == nil {
			return b, ref.ContentType, nil
		}
		lastErr = err
	}
	if errors.Is(lastErr, errObjectMissing) {
		return nil, "", fmt.Errorf("%w: %s: payload object %s of bucket %s is missing (deleted, or never written): the event cannot be read", ErrMalformedEvent, subject, ref.Object, ref.Bucket)
	}
	return nil, "", fmt.Errorf("%w: %s: payload object %s of bucket %s: %v", ErrMalformedEvent, subject, ref.Object, ref.Bucket, lastErr)
}

// parseRef reads and checks a reference (the body of an event of run on
// subject): to an object of run's in PayloadsBucket, of a size within
// the limit, to a body that is not itself a reference.
func parseRef(subject, run string, body []byte) (payloadRef, error) {
	var ref payloadRef
	dec := json.NewDecoder(bytes.NewReader(body))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&ref); err != nil {
		return ref, fmt.Errorf("%w: %s: a payload reference that does not decode: %v", ErrMalformedEvent, subject, err)
	}
	switch {
	case ref.Bucket != PayloadsBucket:
		return ref, fmt.Errorf("%w: %s: a payload reference to bucket %q (want %s)", ErrMalformedEvent, subject, ref.Bucket, PayloadsBucket)
	case !runObject(run, ref.Object) || ref.Object != run+"."+ref.SHA256:
		return ref, fmt.Errorf("%w: %s: a payload reference to object %q, not one of run %s", ErrMalformedEvent, subject, ref.Object, run)
	case ref.Size <= 0 || ref.Size > MaxPayloadObject:
		return ref, fmt.Errorf("%w: %s: a payload reference of %d bytes (the limit is %d)", ErrPayloadTooLarge, subject, ref.Size, MaxPayloadObject)
	case ref.ContentType == ContentRef:
		return ref, fmt.Errorf("%w: %s: a payload reference to a reference", ErrMalformedEvent, subject)
	}
	return ref, nil
}

// runObject reports whether name is the name of an object of run's:
// "<run>.<64 hex digits>".
func runObject(run, name string) bool {
	digest, ok := strings.CutPrefix(name, run+".")
	if !ok || run == "" || len(digest) != 64 {
		return false
	}
	_, err := hex.DecodeString(digest)
	return err == nil && strings.ToLower(digest) == digest
}

// errObjectMissing is getObject's error for an object (or bucket) that
// is not there; errObjectCorrupt for one that is not the reference's.
var (
	errObjectMissing = errors.New("object missing")
	errObjectCorrupt = errors.New("not the referenced object")
)

// getObject reads a reference's object with direct gets: its meta (the
// last message on its meta subject), then its chunks by their subject,
// in batches of bounded bytes. An Object Store get would create an
// ordered consumer, which readers may not (deploy/SECURITY.md); the
// digest is the reference's, checked over the whole body.
func getObject(js jetstream.JetStream, ref payloadRef) ([]byte, error) {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	obs, err := js.ObjectStore(ctx, ref.Bucket)
	if errors.Is(err, jetstream.ErrBucketNotFound) {
		return nil, errObjectMissing
	}
	if err != nil {
		return nil, err
	}
	info, err := obs.GetInfo(ctx, ref.Object)
	if errors.Is(err, jetstream.ErrObjectNotFound) {
		return nil, errObjectMissing
	}
	if err != nil {
		return nil, err
	}
	if info.NUID == "" || info.Opts != nil && info.Opts.Link != nil || info.Size != uint64(ref.Size) {
		return nil, fmt.Errorf("%w: the object's meta says %d bytes (a link: %t), not the reference's %d", errObjectCorrupt, info.Size, info.Opts != nil && info.Opts.Link != nil, ref.Size)
	}
	b := make([]byte, 0, ref.Size)
	err = eachChunk(ctx, js.Conn(), "OBJ_"+ref.Bucket, "$O."+ref.Bucket+".C."+info.NUID, func(m *nats.Msg) error {
		chunk := m.Data
		if int64(len(b)+len(chunk)) > ref.Size {
			return fmt.Errorf("%w: the object's chunks hold more than the reference's %d bytes", errObjectCorrupt, ref.Size)
		}
		b = append(b, chunk...)
		return nil
	})
	if err != nil {
		return nil, err
	}
	if sum := sha256.Sum256(b); int64(len(b)) != ref.Size || hex.EncodeToString(sum[:]) != ref.SHA256 {
		return nil, fmt.Errorf("%w: the object's %d bytes are not the reference's %d bytes of digest %s", errObjectCorrupt, len(b), ref.Size, ref.SHA256)
	}
	return b, nil
}

// eachChunk calls fn with every message of stream on subject, in order, with batched direct gets of at most readBatchBytes
// each (the server's max_pending is not reached however large the
// object).
func eachChunk(ctx context.Context, nc *nats.Conn, stream, subject string, fn func(*nats.Msg) error) error {
	for from := uint64(1); ; {
		last, pending, err := chunkBatch(ctx, nc, stream, subject, from, fn)
		if err != nil || pending == 0 || last == 0 {
			return err
		}
		from = last + 1
	}
}

// chunkBatch is one batched direct get of eachChunk: the sequence of the
// last message it got, and how many the server says are left.
func chunkBatch(ctx context.Context, nc *nats.Conn, stream, subject string, from uint64, fn func(*nats.Msg) error) (last, pending uint64, err error) {
	req, _ := json.Marshal(map[string]any{"seq": from, "next_by_subj": subject, "batch": maxBatch, "max_bytes": readBatchBytes})
	inbox := nc.NewRespInbox()
	ch := make(chan *nats.Msg, maxBatch+2)
	sub, err := nc.ChanSubscribe(inbox, ch)
	if err != nil {
		return 0, 0, err
	}
	defer func() { _ = sub.Unsubscribe() }()
	if err := nc.PublishRequest("$JS.API.DIRECT.GET."+stream, inbox, req); err != nil {
		return 0, 0, err
	}
	for {
		var m *nats.Msg
		select {
		case m = <-ch:
		case <-ctx.Done():
			return 0, 0, fmt.Errorf("reading %s: %w", subject, ctx.Err())
		}
		switch m.Header.Get("Status") {
		case "":
		case "404", "408":
			return last, 0, nil
		case "204": // end of the batch
			pending, _ = strconv.ParseUint(m.Header.Get("Nats-Num-Pending"), 10, 64)
			return last, pending, nil
		default:
			return 0, 0, fmt.Errorf("reading %s: status %s %s", subject, m.Header.Get("Status"), m.Header.Get("Description"))
		}
		last, _ = strconv.ParseUint(m.Header.Get("Nats-Sequence"), 10, 64)
		if err := fn(m); err != nil {
			return 0, 0, err
		}
	}
}
