package cli

import (
	"flag"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/weft-dev/weft/internal/readmodel"
	"github.com/weft-dev/weft/pkg/client"
	"github.com/weft-dev/weft/pkg/projection"
)

// listFlagSet holds the filters of 'weft list'.
type listFlagSet struct {
	limit         *int
	status, graph *string
	since, until  *string
	cursor        *string
	count         *bool
	attrs         attrFlag
	schedule      *string
	trigger       *string
	query         *string
	by            *string
	webhook       *string
	chain         *string
}

// attrFlag is a repeatable NAME=VALUE flag.
type attrFlag map[string]string

func (a attrFlag) String() string { return "" }
func (a attrFlag) Set(v string) error {
	k, val, ok := strings.Cut(v, "=")
	if !ok || k == "" {
		return fmt.Errorf("want NAME=VALUE, got %q", v)
	}
	a[k] = val
	return nil
}

func listFlags(fs *flag.FlagSet) *listFlagSet {
	lf := &listFlagSet{attrs: attrFlag{}}
	lf.limit = fs.Int("limit", 50, "list at most this many runs (0: all)")
	lf.status = fs.String("status", "", "only runs in these statuses, comma separated (running, which includes waiting; waiting: on a human node or a wait node; cancelling, completed, failed, cancelled)")
	lf.graph = fs.String("graph", "", "only runs of this graph")
	lf.since = fs.String("since", "", "only runs started at or after this time (RFC 3339, or a duration before now: 24h)")
	lf.until = fs.String("until", "", "only runs started before this time (RFC 3339, or a duration before now)")
	lf.cursor = fs.String("cursor", "", "continue after the page this cursor ends")
	lf.count = fs.Bool("count", false, "print how many runs the filters select")
	lf.by = fs.String("by", "", "with -count, count by status or graph")
	fs.Var(lf.attrs, "attr", "only runs with this search attribute, NAME=VALUE (repeatable)")
	lf.schedule = fs.String("schedule", "", "only runs this schedule started")
	lf.trigger = fs.String("trigger", "", "only runs this event trigger (or a webhook through it) started")
	lf.webhook = fs.String("webhook", "", "only runs this webhook of 'weft serve' started")
	lf.query = fs.String("q", "", `only runs this query is true for: status = "failed" AND graph = "billing" AND started > "2026-11-01" ('weft help list' has the language)`)
	lf.chain = fs.String("chain", "", "only the links of this chain of continuations (continue-as-new): its first run's id")
	return lf
}

// options turns the flags into List options; errors name the flag.
func (lf *listFlagSet) options(now time.Time) ([]client.ListOption, error) {
	if *lf.limit < 0 {
		return nil, fmt.Errorf("-limit: want 0 or more, got %d", *lf.limit)
	}
	opts := []client.ListOption{client.WithLimit(*lf.limit), client.WithCursor(*lf.cursor), client.WithGraph(*lf.graph)}
	statuses, err := statusOptions(*lf.status)
	if err != nil {
		return nil, err
	}
	opts = append(opts, statuses...)
	started, err := lf.startedBetween(now)
	if err != nil {
		return nil, err
	}
	opts = append(opts, started)
	for k, v := range lf.attrs {
		opts = append(opts, client.WithAttr(k, v))
	}
	if *lf.schedule != "" {
		opts = append(opts, client.WithSchedule(*lf.schedule))
	}
	if *lf.trigger != "" {
		opts = append(opts, client.WithTrigger(*lf.trigger))
	}
	if *lf.query != "" {
		// Compiled here, so that a bad query is a usage error that says
		// where, before any connection.
		if _, err := readmodel.ParseFilter(*lf.query); err != nil {
			return nil, fmt.Errorf("-q: %w", err)
		}
		opts = append(opts, client.WithQuery(*lf.query))
	}
	if *lf.webhook != "" {
		opts = append(opts, client.WithWebhook(*lf.webhook))
	}
	if *lf.chain != "" {
		opts = append(opts, client.WithChain(*lf.chain))
	}
	return opts, nil
}

// statusOptions reads -status, a comma-separated list of run statuses.
func statusOptions(status string) ([]client.ListOption, error) {
	if status == "" {
		return nil, nil
	}
	var opts []client.ListOption
	for s := range strings.SplitSeq(status, ",") {
		rs := projection.RunStatus(strings.TrimSpace(s))
		if !slices.Contains(readmodel.Statuses, rs) {
			return nil, fmt.Errorf("-status: unknown status %q (want running, waiting, cancelling, completed, failed or cancelled)", s)
		}
		opts = append(opts, client.WithStatus(rs))
	}
	return opts, nil
}

// startedBetween reads -since and -until, which must be in that order.
func (lf *listFlagSet) startedBetween(now time.Time) (client.ListOption, error) {
	since, err := timeArg("since", *lf.since, now)
	if err != nil {
		return nil, err
	}
	until, err := timeArg("until", *lf.until, now)
	if err != nil {
		return nil, err
	}
	if !since.IsZero() && !until.IsZero() && !until.After(since) {
		return nil, fmt.Errorf("-until %s is not after -since %s", *lf.until, *lf.since)
	}
	return client.WithStartedBetween(since, until), nil
}

// timeArg reads a time flag: RFC 3339, or a duration before now.
func timeArg(name, v string, now time.Time) (time.Time, error) {
	if v == "" {
		return time.Time{}, nil
	}
	if t, err := time.Parse(time.RFC3339, v); err == nil {
		return t, nil
	}
	d, err := time.ParseDuration(v)
	if err != nil || d < 0 {
		return time.Time{}, fmt.Errorf("-%s: want an RFC 3339 time or a duration before now (24h), got %q", name, v)
	}
	return now.Add(-d), nil
}
