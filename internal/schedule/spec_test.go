package schedule_test

import (
	"strings"
	"testing"
	"time"

	"github.com/weft-dev/weft/internal/schedule"
)

func utc(s string) time.Time {
	t, err := time.Parse(time.RFC3339, s)
	if err != nil {
		panic(err)
	}
	return t
}

// TestCronAcrossDaylightSaving: a daily cron in Europe/Paris fires once
// a day across both changes: the skipped 02:30 of 29 March 2026 at 03:30
// summer time, the doubled 02:30 of 25 October once, at its first
// occurrence (summer time).
func TestCronAcrossDaylightSaving(t *testing.T) {
	tm, err := schedule.ParseTiming("30 2 * * *", "Europe/Paris", 0, time.Time{})
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		from string
		want []string
	}{
		{"2026-03-27T12:00:00Z", []string{"2026-03-28T01:30:00Z", "2026-03-29T01:30:00Z", "2026-03-30T00:30:00Z"}},
		{"2026-10-23T12:00:00Z", []string{"2026-10-24T00:30:00Z", "2026-10-25T00:30:00Z", "2026-10-26T01:30:00Z"}},
	} {
		from := utc(c.from)
		got := tm.Between(from, from.Add(72*time.Hour), 10)
		var gs []string
		for _, g := range got {
			gs = append(gs, g.Format(time.RFC3339))
		}
		if strings.Join(gs, " ") != strings.Join(c.want, " ") {
			t.Errorf("from %s: fires %v, want %v", c.from, gs, c.want)
		}
	}
	// An hourly spec: once per wall-clock hour, never twice for one
	// instant, always increasing.
	h, _ := schedule.ParseTiming("0 * * * *", "Europe/Paris", 0, time.Time{})
	fires := h.Between(utc("2026-10-24T20:00:00Z"), utc("2026-10-25T06:00:00Z"), 100)
	for i := 1; i < len(fires); i++ {
		if !fires[i].After(fires[i-1]) {
			t.Fatalf("hourly fires not increasing: %v", fires)
		}
	}
	// After 22:00 summer time through 07:00 winter time: the wall-clock
	// hours 23, 0, 1, 2 (once, summer time), 3, 4, 5, 6, 7.
	var hours []string
	for _, f := range fires {
		hours = append(hours, f.Format("15"))
	}
	if got := strings.Join(hours, " "); got != "21 22 23 00 02 03 04 05 06" {
		t.Fatalf("hourly fires (UTC hours) %s", got)
	}
	// A seconds field, for the NATS-style 6-field spec.
	s, err := schedule.ParseTiming("*/15 * * * * *", "", 0, time.Time{})
	if err != nil {
		t.Fatal(err)
	}
	if n := s.Next(utc("2026-01-01T00:00:01Z")); !n.Equal(utc("2026-01-01T00:00:15Z")) {
		t.Fatalf("6-field spec next %s", n)
	}
}

func TestEveryIsAnchored(t *testing.T) {
	anchor := utc("2026-01-01T00:00:07Z")
	tm, err := schedule.ParseTiming("", "", 10*time.Minute, anchor)
	if err != nil {
		t.Fatal(err)
	}
	if n := tm.Next(utc("2026-01-01T01:00:00Z")); !n.Equal(utc("2026-01-01T01:00:07Z")) {
		t.Fatalf("next %s", n)
	}
	if n := tm.Next(utc("2026-01-01T01:00:07Z")); !n.Equal(utc("2026-01-01T01:10:07Z")) {
		t.Fatalf("next after a fire time %s", n)
	}
}

// TestBadDefinitions: each gets an error naming its flag.
func TestBadDefinitions(t *testing.T) {
	good := func() *schedule.Definition {
		return &schedule.Definition{Name: "n", GraphName: "g", GraphDigest: "sha256:0", Graph: []byte(`{}`), Cron: "0 2 * * *"}
	}
	for _, c := range []struct {
		name string
		edit func(*schedule.Definition)
		want string
	}{
		{"bad cron", func(d *schedule.Definition) { d.Cron = "61 * * * *" }, "-cron"},
		{"cron words", func(d *schedule.Definition) { d.Cron = "every night" }, "-cron"},
		{"unknown zone", func(d *schedule.Definition) { d.TimeZone = "Mars/Olympus" }, "-tz"},
		{"both", func(d *schedule.Definition) { d.Every = schedule.Duration(time.Hour) }, "-every"},
		{"neither", func(d *schedule.Definition) { d.Cron = "" }, "-cron or -every"},
		{"tz in spec", func(d *schedule.Definition) { d.Cron = "CRON_TZ=Europe/Paris 0 2 * * *" }, "-tz"},
		{"short every", func(d *schedule.Definition) { d.Cron, d.Every = "", schedule.Duration(time.Millisecond) }, "-every"},
		{"overlap", func(d *schedule.Definition) { d.Overlap = "sometimes" }, "-overlap"},
		{"input", func(d *schedule.Definition) { d.Input = []byte(`[1]`) }, "-input"},
		{"jitter", func(d *schedule.Definition) { d.Jitter = -1 }, "-jitter"},
		{"name", func(d *schedule.Definition) { d.Name = "a.b" }, "name"},
		{"graph", func(d *schedule.Definition) { d.Graph = nil }, "-graph"},
	} {
		t.Run(c.name, func(t *testing.T) {
			d := good()
			c.edit(d)
			err := d.Validate()
			if err == nil || !strings.Contains(err.Error(), c.want) {
				t.Fatalf("error %v, want one naming %s", err, c.want)
			}
		})
	}
	if err := good().Validate(); err != nil {
		t.Fatal(err)
	}
}
