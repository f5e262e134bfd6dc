package readmodel

import (
	"bufio"
	"bytes"
	"compress/gzip"
	"context"
	"crypto/sha256"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/weft-dev/weft/internal/eventlog"
	"github.com/weft-dev/weft/internal/setup"
	"github.com/weft-dev/weft/pkg/events"
)

// ArchiveBucket is the default archive: a JetStream Object Store bucket.
const ArchiveBucket = "weft-archive"

// Archive keeps the logs of removed runs, one object per run, named by its
// id. Put must be durable when it returns: the live log goes next. An
// S3-compatible store implements it with PutObject, GetObject and the key
// "<prefix><run>.jsonl.gz".
type Archive interface {
	Put(ctx context.Context, run string, data []byte) error
	// Get returns the object, or an error wrapping ErrNotArchived.
	Get(ctx context.Context, run string) ([]byte, error)
	// String names the archive in messages.
	String() string
}

// ObjectStore is an Archive in a JetStream Object Store bucket.
type ObjectStore struct {
	os     jetstream.ObjectStore
	nc     *nats.Conn
	bucket string
}

// OpenObjectStore opens the archive bucket; with create, a missing bucket
// is created with as many replicas as stream. A missing bucket otherwise
// is an error that names it.
func OpenObjectStore(ctx context.Context, js jetstream.JetStream, bucket, stream string, create bool) (*ObjectStore, error) {
	if !eventlog.ValidToken(bucket) {
		return nil, fmt.Errorf("archive bucket %q: not a valid bucket name", bucket)
	}
	o, err := js.ObjectStore(ctx, bucket)
	if errors.Is(err, jetstream.ErrBucketNotFound) && create {
		replicas := 1
		if s, serr := js.Stream(ctx, stream); serr == nil {
			replicas = max(s.CachedInfo().Config.Replicas, 1)
		}
		o, err = setup.CreateObjectStore(ctx, js, jetstream.ObjectStoreConfig{
			Bucket: bucket, Description: "Weft archive: the logs of removed runs, one gzip object per run", Replicas: replicas,
		})
	}
	if errors.Is(err, jetstream.ErrBucketNotFound) {
		return nil, fmt.Errorf("archive bucket %s does not exist (create it with 'weft admin retention -archive %s -create-archive', or name another): %w", bucket, bucket, err)
	}
	if err != nil {
		return nil, fmt.Errorf("opening archive bucket %s: %w", bucket, err)
	}
	return &ObjectStore{os: o, nc: js.Conn(), bucket: bucket}, nil
}

func (a *ObjectStore) String() string { return "object store bucket " + a.bucket }

func (a *ObjectStore) Put(ctx context.Context, run string, data []byte) error {
	if _, err := a.os.PutBytes(ctx, objectName(run), data); err != nil {
		return fmt.Errorf("archiving run %s to %s: %w", run, a, err)
	}
	return nil
}

// Get reads the object with direct gets (direct.go): its meta, the last
// message on its meta subject, and its chunks by their subject; an Object
// Store get would create an ordered consumer, which readers may not
// (deploy/SECURITY.md). The chunks' digest is checked as an Object Store
// get checks it.
func (a *ObjectStore) Get(ctx context.Context, run string) ([]byte, error) {
	info, err := a.os.GetInfo(ctx, objectName(run))
	if errors.Is(err, jetstream.ErrObjectNotFound) {
		return nil, fmt.Errorf("%w: %s in %s", ErrNotArchived, run, a)
	}
	if err != nil {
		return nil, fmt.Errorf("reading run %s from %s: %w", run, a, err)
	}
	if info.NUID == "" || info.Opts != nil && info.Opts.Link != nil {
		return nil, fmt.Errorf("reading run %s from %s: not an object of its own", run, a)
	}
	buf := make([]byte, 0, info.Size)
	sum := sha256.New()
	err = eachDirect(ctx, a.nc, "OBJ_"+a.bucket, "$O."+a.bucket+".C."+info.NUID, func(m *nats.Msg) error {
		buf = append(buf, m.Data...)
		sum.Write(m.Data)
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("reading run %s from %s: %w", run, a, err)
	}
	if uint64(len(buf)) != info.Size {
		return nil, fmt.Errorf("reading run %s from %s: %d bytes, its meta says %d", run, a, len(buf), info.Size)
	}
	if want, err := jetstream.DecodeObjectDigest(info.Digest); err == nil && !bytes.Equal(sum.Sum(nil), want) {
		return nil, fmt.Errorf("reading run %s from %s: %w", run, a, jetstream.ErrDigestMismatch)
	}
	return buf, nil
}

// Dir is an Archive in a directory of files.
type Dir string

// OpenDir returns the archive in dir, which must exist.
func OpenDir(dir string) (Dir, error) {
	fi, err := os.Stat(dir)
	if err != nil {
		return "", fmt.Errorf("archive directory %s: %w", dir, err)
	}
	if !fi.IsDir() {
		return "", fmt.Errorf("archive directory %s: not a directory", dir)
	}
	return Dir(dir), nil
}

func (d Dir) String() string { return "directory " + string(d) }

func (d Dir) Put(_ context.Context, run string, data []byte) error {
	if !validRun(run) {
		return fmt.Errorf("archiving run %q: not a run id", run)
	}
	f, err := os.CreateTemp(string(d), "."+run+"-*")
	if err == nil {
		_, err = f.Write(data)
		if err == nil {
			err = f.Sync()
		}
		if cerr := f.Close(); err == nil {
			err = cerr
		}
		if err == nil {
			err = os.Rename(f.Name(), filepath.Join(string(d), objectName(run)))
		}
		if err != nil {
			_ = os.Remove(f.Name())
		}
	}
	if err != nil {
		return fmt.Errorf("archiving run %s to %s: %w", run, d, err)
	}
	return nil
}

func (d Dir) Get(_ context.Context, run string) ([]byte, error) {
	if !validRun(run) {
		return nil, fmt.Errorf("%w: %q is not a run id", ErrNotArchived, run)
	}
	b, err := os.ReadFile(filepath.Join(string(d), objectName(run)))
	if errors.Is(err, fs.ErrNotExist) {
		return nil, fmt.Errorf("%w: %s in %s", ErrNotArchived, run, d)
	}
	return b, err
}

func objectName(run string) string { return run + ".jsonl.gz" }

// ParseArchive reads an archive setting: "none" (or empty), "dir:PATH",
// or an Object Store bucket name ("weft-archive" by default, "obj:NAME").
// The archive must exist, unless create is set for a bucket.
func ParseArchive(ctx context.Context, js jetstream.JetStream, stream, setting string, create bool) (Archive, error) {
	switch {
	case setting == "" || setting == "none":
		return nil, nil
	case strings.HasPrefix(setting, "dir:"):
		d, err := OpenDir(strings.TrimPrefix(setting, "dir:"))
		if err != nil {
			return nil, fmt.Errorf("archive %q: %w", setting, err)
		}
		return d, nil
	}
	a, err := OpenObjectStore(ctx, js, strings.TrimPrefix(setting, "obj:"), stream, create)
	if err != nil {
		return nil, fmt.Errorf("archive %q: %w", setting, err)
	}
	return a, nil
}

// record is one line of an archived run: a message as the log stored it,
// or a part of a payload object its messages refer to (Object set, no
// Subject): an object's bytes, as the payloads bucket held them, are
// the Data of its parts in order, each at most objectPart bytes, written
// after the first message that refers to it.
type record struct {
	Subject string      `json:"subject,omitempty"`
	Seq     uint64      `json:"seq,omitempty"`
	Stored  time.Time   `json:"stored,omitzero"`
	Header  nats.Header `json:"header,omitempty"`
	Data    []byte      `json:"data,omitempty"`
	Object  string      `json:"object,omitempty"`
}

// objectPart is the most bytes of a payload object one archive record
// carries (a line stays well under the reader's line limit).
const objectPart = 1 << 20

// Encode reads a run's messages from the live log, in order, as an
// archive object. A run with no messages is ErrRunNotFound.
func Encode(ctx context.Context, store events.Store, run string) ([]byte, int, error) {
	evs, err := store.Read(ctx, run, 0, 0)
	if err != nil {
		return nil, 0, fmt.Errorf("archiving run %s: %w", run, err)
	}
	js := eventlog.JetStream(store)
	st, err := js.Stream(ctx, store.StreamName())
	if err != nil {
		return nil, 0, fmt.Errorf("archiving run %s: %w", run, err)
	}
	a, err := encode(ctx, st, js, run, evs)
	if err != nil {
		return nil, 0, err
	}
	return a.data, a.n, nil
}

// archived is a run's archive object, and the payload objects its
// messages refer to (their names in the payloads bucket): all of them
// are the run's to delete, whether the archive carries them or not (an
// object missing, or not the bytes its name says).
type archived struct {
	data    []byte
	n       int
	objects []string
}

// encode gets the stored messages of a run's events (direct gets by
// sequence: the messages as stored, headers and all, junk included) and
// writes them as an archive object, with the payload objects they refer
// to (eventlog.ArchivedPayload): the archive holds the whole run, and
// the objects may leave the bucket with the run's events. A reference
// whose object is already gone is archived as it is.
func encode(ctx context.Context, st jetstream.Stream, js jetstream.JetStream, run string, evs []*events.Event) (*archived, error) {
	var buf bytes.Buffer
	zw := gzip.NewWriter(&buf)
	enc := json.NewEncoder(zw)
	out := &archived{n: len(evs)}
	for _, e := range evs {
		m, err := st.GetMsg(ctx, e.Seq)
		if err != nil {
			return nil, fmt.Errorf("archiving run %s: reading sequence %d: %w", run, e.Seq, err)
		}
		if got, ok := eventlog.RunOf(m.Subject); !ok || got != run {
			return nil, fmt.Errorf("archiving run %s: sequence %d is on %s, not the run's", run, e.Seq, m.Subject)
		}
		if err := enc.Encode(record{Subject: m.Subject, Seq: m.Sequence, Stored: m.Time.UTC(), Header: m.Header, Data: m.Data}); err != nil {
			return nil, err
		}
		name, ok := eventlog.PayloadRef(run, m.Subject, m.Header, m.Data)
		if !ok || slices.Contains(out.objects, name) {
			continue
		}
		out.objects = append(out.objects, name)
		_, obj, err := eventlog.ArchivedPayload(ctx, js, run, m.Subject, m.Header, m.Data)
		if errors.Is(err, eventlog.ErrPayloadMissing) || errors.Is(err, eventlog.ErrMalformedEvent) || errors.Is(err, eventlog.ErrPayloadTooLarge) {
			continue // refused when read, live or archived
		}
		if err != nil {
			return nil, fmt.Errorf("archiving run %s: %w", run, err)
		}
		if err := encodeObject(enc, name, obj); err != nil {
			return nil, err
		}
	}
	if err := zw.Close(); err != nil {
		return nil, err
	}
	out.data = buf.Bytes()
	return out, nil
}

// encodeObject writes a payload object as archive records of up to
// objectPart bytes each.
func encodeObject(enc *json.Encoder, name string, obj []byte) error {
	for len(obj) > 0 {
		part := obj[:min(len(obj), objectPart)]
		if err := enc.Encode(record{Object: name, Data: part}); err != nil {
			return err
		}
		obj = obj[len(part):]
	}
	return nil
}

// Decode reads an archive object back as the run's events, as the live
// log gave them (events.DecodeStored), their large payloads read from the
// archive (or, for an archive written before archives carried them, from
// the payloads bucket).
func Decode(run string, data []byte) ([]*events.Event, error) {
	recs, objects, err := decodeRecords(run, data)
	if err != nil {
		return nil, err
	}
	return decodeEvents(run, recs, objects), nil
}

// decodeEvents decodes an archived run's records as its events, the
// references to the objects the archive carries read from it.
func decodeEvents(run string, recs []record, objects map[string][]byte) []*events.Event {
	out := make([]*events.Event, len(recs))
	for i, r := range recs {
		h, b := eventlog.InlinePayload(run, r.Subject, r.Header, r.Data, objects)
		out[i] = events.DecodeStored(r.Subject, h, b, r.Seq, r.Stored)
	}
	return out
}

// decodeRecords reads an archive object's messages, each checked to be
// on the run's subjects, and the payload objects it carries, each
// checked to be one of the run's, whole (eventlog.CheckPayload).
func decodeRecords(run string, data []byte) ([]record, map[string][]byte, error) {
	zr, err := gzip.NewReader(bytes.NewReader(data))
	if err != nil {
		return nil, nil, fmt.Errorf("archived run %s: %w", run, err)
	}
	sc := bufio.NewScanner(zr)
	sc.Buffer(make([]byte, 0, 64<<10), 64<<20)
	var out []record
	objects := map[string][]byte{}
	for line := 1; sc.Scan(); line++ {
		var r record
		if err := json.Unmarshal(sc.Bytes(), &r); err != nil {
			return nil, nil, fmt.Errorf("archived run %s, line %d: %w", run, line, err)
		}
		if r.Object != "" && r.Subject == "" {
			objects[r.Object] = append(objects[r.Object], r.Data...)
			continue
		}
		if got, ok := eventlog.RunOf(r.Subject); !ok || got != run {
			return nil, nil, fmt.Errorf("archived run %s, line %d: subject %q is not the run's", run, line, r.Subject)
		}
		out = append(out, r)
	}
	if err := sc.Err(); err != nil {
		return nil, nil, fmt.Errorf("archived run %s: %w", run, err)
	}
	if _, err := io.Copy(io.Discard, zr); err != nil {
		return nil, nil, fmt.Errorf("archived run %s: %w", run, err)
	}
	if len(out) == 0 {
		return nil, nil, fmt.Errorf("archived run %s: no events", run)
	}
	for name, b := range objects {
		if err := eventlog.CheckPayload(run, name, b); err != nil {
			return nil, nil, fmt.Errorf("archived run %s: %w", run, err)
		}
	}
	return out, objects, nil
}
