package eventlog

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"strings"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/weft-dev/weft/internal/logattr"
	"github.com/weft-dev/weft/internal/setup"
)

// The events stream's settings. events.Open creates a missing stream with the
// settings of its options. An existing stream is used as it is: its
// replicas, de-duplication window, max age and storage are what an operator
// (or the first process) chose, and a process started with other flags only
// logs the difference, once, so that one worker started without -replicas 3
// never turns an R3 stream into R1. Changing them is done on purpose, with
// 'weft admin apply'. A stream that lacks what Weft relies on (the
// subjects weft.r.> and weft.t.>, direct gets, message schedules,
// per-message TTLs, atomic batches, limits retention, purges, a
// de-duplication window of at least MinDuplicates) is refused with a
// *SettingError naming the setting and the command that fixes it.

// DefaultStream is the events stream's default name.
const DefaultStream = "WEFT"

// MinDuplicates is the shortest de-duplication window Weft runs with: a
// retried append (a lost ack, a timeout) must fall in the window to be
// recognised as the same event.
const MinDuplicates = time.Minute

// SettingError is a setting of the live stream, or of one of its
// consumers, that Weft cannot run with.
type SettingError struct {
	// Resource names it: "stream WEFT", "consumer work-default of stream WEFT".
	Resource string
	Setting  string
	Have     string
	Want     string
	// Fix is the command that fixes it.
	Fix string
}

func (e *SettingError) Error() string {
	return fmt.Sprintf("%s: %s is %s, Weft needs %s; %s", e.Resource, e.Setting, e.Have, e.Want, e.Fix)
}

func (e *SettingError) Unwrap() error { return ErrUnsafeSetting }

// Settings are the events stream's tunable settings. After the store is
// opened they are the live stream's, which may differ from those asked for.
type Settings struct {
	Stream   string
	Storage  jetstream.StorageType
	Replicas int
	// Duplicates is the de-duplication window.
	Duplicates time.Duration
	// MaxAge drops events older than this; zero keeps them forever.
	MaxAge time.Duration
}

// DefaultSettings are the settings events.Open starts from.
func DefaultSettings() Settings {
	return Settings{Stream: DefaultStream, Storage: jetstream.FileStorage, Replicas: 1, Duplicates: 2 * time.Minute}
}

// StreamConfig is the stream Open creates for cfg.
func StreamConfig(cfg Settings) jetstream.StreamConfig {
	return jetstream.StreamConfig{
		Name:               cfg.Stream,
		Description:        "Weft run histories (CloudEvents, binary mode)",
		Subjects:           []string{AllEvents},
		Retention:          jetstream.LimitsPolicy,
		Storage:            cfg.Storage,
		Replicas:           cfg.Replicas,
		Duplicates:         cfg.Duplicates,
		MaxAge:             cfg.MaxAge,
		AllowDirect:        true,
		AllowAtomicPublish: true,
	}
}

// TimerStreamConfig is the timers stream Open creates beside the events
// stream: message schedules, which force roll-up headers on, live here,
// where only the coordinator writes.
func TimerStreamConfig(cfg Settings) jetstream.StreamConfig {
	return jetstream.StreamConfig{
		Name:              cfg.Stream + TimerStreamSuffix,
		Description:       "Weft durable timers (message schedules) of the runs in " + cfg.Stream,
		Subjects:          []string{AllSchedules},
		Retention:         jetstream.LimitsPolicy,
		Storage:           cfg.Storage,
		Replicas:          cfg.Replicas,
		Duplicates:        cfg.Duplicates,
		AllowMsgSchedules: true,
	}
}

// SetupTimerStream creates the timers stream, or checks an existing one
// and logs (on log, or slog.Default()) how its settings differ from cfg.
func SetupTimerStream(ctx context.Context, js jetstream.JetStream, cfg Settings, log *slog.Logger) (jetstream.Stream, error) {
	want := TimerStreamConfig(cfg)
	s, created, err := setup.CreateStream(ctx, js, want)
	if err != nil || created {
		return s, err
	}
	have := s.CachedInfo().Config
	var errs []error
	if !SubjectsCover(have.Subjects, AllSchedules) {
		errs = append(errs, &SettingError{Resource: "stream " + have.Name, Setting: "subjects", Have: fmt.Sprintf("%q", have.Subjects), Want: "subjects covering " + AllSchedules, Fix: "recreate it"})
	}
	if !have.AllowMsgSchedules {
		errs = append(errs, &SettingError{Resource: "stream " + have.Name, Setting: "allow_msg_schedules", Have: "false", Want: "true", Fix: "recreate it"})
	}
	if err := errors.Join(errs...); err != nil {
		return nil, err
	}
	setup.WarnDiffs(log, js, "stream "+want.Name, StreamDiffs(have, Settings{Replicas: cfg.Replicas, Duplicates: cfg.Duplicates, Storage: cfg.Storage}))
	return s, nil
}

// SetupStream creates the events stream, or checks an existing one and
// logs (on log, or slog.Default()) how its settings differ from cfg. It
// never updates a stream.
func SetupStream(ctx context.Context, js jetstream.JetStream, cfg Settings, log *slog.Logger) (jetstream.Stream, error) {
	s, created, err := setup.CreateStream(ctx, js, StreamConfig(cfg))
	if err != nil || created {
		return s, err
	}
	have := s.CachedInfo().Config
	if err := CheckStream(have); err != nil {
		return nil, err
	}
	if have.AllowRollup || have.AllowMsgSchedules || have.AllowMsgTTL {
		if log == nil {
			log = slog.Default()
		}
		log.Warn("the events stream allows roll-up, schedule or TTL headers (a stream made by an older Weft): any writer may purge it with one header; recreate it",
			logattr.Stream, cfg.Stream, logattr.AllowRollupHdrs, have.AllowRollup, logattr.AllowMsgSchedules, have.AllowMsgSchedules, logattr.AllowMsgTTL, have.AllowMsgTTL)
	}
	setup.WarnDiffs(log, js, "stream "+cfg.Stream, StreamDiffs(have, cfg))
	return s, nil
}

// CheckStream reports every setting of a live stream Weft cannot run with,
// each a *SettingError.
func CheckStream(have jetstream.StreamConfig) error {
	fix := fmt.Sprintf("run 'weft admin apply -stream %s' to set it", have.Name)
	recreate := fmt.Sprintf("it cannot be changed on a live stream: move the runs to a new stream (-stream) or recreate %s", have.Name)
	var errs []error
	bad := func(setting, h, w, fix string) {
		errs = append(errs, &SettingError{Resource: "stream " + have.Name, Setting: setting, Have: h, Want: w, Fix: fix})
	}
	if !SubjectsCover(have.Subjects, AllEvents) {
		bad("subjects", fmt.Sprintf("%q", have.Subjects), "subjects covering "+AllEvents, fix)
	}
	if slices.ContainsFunc(have.Subjects, func(s string) bool { return subsetOf(AllSchedules, s) || subsetOf(s, AllSchedules) }) {
		bad("subjects", fmt.Sprintf("%q", have.Subjects), "no subject of the timers stream ("+AllSchedules+")", fix)
	}
	flags := []struct {
		name string
		have bool
	}{
		{"allow_direct", have.AllowDirect},
		{"allow_atomic", have.AllowAtomicPublish},
	}
	for _, f := range flags {
		if !f.have {
			bad(f.name, "false", "true", fix)
		}
	}
	if have.Duplicates < MinDuplicates {
		bad("duplicate_window", have.Duplicates.String(), "at least "+MinDuplicates.String(),
			fmt.Sprintf("run 'weft admin apply -stream %s -duplicates %s' to set it", have.Name, 2*time.Minute))
	}
	if have.Retention != jetstream.LimitsPolicy {
		bad("retention", have.Retention.String(), jetstream.LimitsPolicy.String(), recreate)
	}
	if have.Sealed {
		bad("sealed", "true", "false", recreate)
	}
	if have.DenyPurge {
		bad("deny_purge", "true", "false", recreate)
	}
	if (have.MaxBytes > 0 || have.MaxMsgs > 0 || have.MaxMsgsPerSubject > 0) && have.Discard != jetstream.DiscardNew {
		// A full stream that discards old messages would drop the oldest
		// runs' events, their starts first: it must refuse new ones.
		bad("discard", "old (with max_bytes, max_msgs or max_msgs_per_subject set)", "new", fix)
	}
	return errors.Join(errs...)
}

// Repair returns have with the settings Weft relies on set: those
// CheckStream asks for that an update can change.
func Repair(have jetstream.StreamConfig) jetstream.StreamConfig {
	upd := have
	upd.Subjects = slices.Clone(have.Subjects)
	upd.Subjects = slices.DeleteFunc(upd.Subjects, func(s string) bool { return subsetOf(AllSchedules, s) || subsetOf(s, AllSchedules) })
	if !SubjectsCover(upd.Subjects, AllEvents) {
		// Narrower subjects go: the server refuses overlaps.
		upd.Subjects = slices.DeleteFunc(upd.Subjects, func(s string) bool { return subsetOf(s, AllEvents) })
		upd.Subjects = append(upd.Subjects, AllEvents)
	}
	upd.AllowDirect, upd.AllowAtomicPublish = true, true
	if upd.MaxBytes > 0 || upd.MaxMsgs > 0 || upd.MaxMsgsPerSubject > 0 {
		upd.Discard = jetstream.DiscardNew
	}
	return upd
}

// StreamDiffs lists the tunable settings of a live stream that differ from
// cfg: replicas, de-duplication window, max age, storage.
func StreamDiffs(have jetstream.StreamConfig, cfg Settings) []setup.Diff {
	var d []setup.Diff
	d = setup.Compare(d, "replicas", max(have.Replicas, 1), max(cfg.Replicas, 1))
	d = setup.Compare(d, "duplicate_window", have.Duplicates, cfg.Duplicates)
	d = setup.Compare(d, "max_age", have.MaxAge, cfg.MaxAge)
	d = setup.Compare(d, "storage", have.Storage.String(), cfg.Storage.String())
	return d
}

// SubjectsCover reports whether every subject matching filter matches one
// of subjects (a stream's subjects, a consumer's filters).
func SubjectsCover(subjects []string, filter string) bool {
	return slices.ContainsFunc(subjects, func(s string) bool { return subsetOf(filter, s) })
}

// subsetOf reports whether every subject matching filter a matches filter b.
func subsetOf(a, b string) bool {
	at, bt := strings.Split(a, "."), strings.Split(b, ".")
	for i, t := range bt {
		if t == ">" {
			return i < len(at)
		}
		if i >= len(at) {
			return false
		}
		switch {
		case at[i] == ">":
			return false
		case t == "*":
		case at[i] == "*" || at[i] != t:
			return false
		}
	}
	return len(at) == len(bt)
}
