package natsconn

import (
	"fmt"
	"slices"
	"strings"

	"github.com/weft-dev/weft/internal/eventlog"
)

// The HTTP gateway ('weft serve', internal/gateway) has a role of its
// own, RoleServe: it starts runs and signals nodes for the callers its
// API tokens name, and publishes the verified bodies of its webhooks on
// their subjects (Deployment.WebhookSubjects), where event triggers read
// them. Least privilege: of the client's rights it keeps starting runs
// and signalling (no cancel request) and reading a run (the idempotency
// check of a signal sent again); it lists nothing, follows nothing,
// creates no consumer, and publishes on no subject outside Weft's but its
// webhooks'. So a gateway's credentials cannot cancel runs, read the
// read model, or publish on the users' other subjects.

// RoleServe is 'weft serve'.
const RoleServe Role = "serve"

// serveUser is RoleServe's grants, added to u: writes are the client's
// starts and signals (in a namespace, asked of admission), reads the
// events stream's.
func serveUser(u User, admission bool, reads []string, inbox string, webhooks []string) User {
	writes := []string{eventlog.ClientStarts, eventlog.SignalSubjects}
	if admission {
		writes = []string{eventlog.AdmitStart, eventlog.AdmitSignal}
	}
	// Large payloads: a webhook's body over the threshold is kept beside
	// the log by whoever appends its start: serve itself without
	// admission, the coordinator with it.
	if !admission {
		writes = slices.Concat(writes, payloadsWrite())
	}
	u.PublishAllow = slices.Concat(writes, reads, webhooks)
	u.SubscribeAllow = []string{inbox}
	return u
}

// webhookSubjectErrors checks WebhookSubjects: the users' subjects, never
// Weft's own, JetStream's or another role's inbox.
func (d Deployment) webhookSubjectErrors() []error {
	var errs []error
	for i, s := range d.WebhookSubjects {
		toks := strings.Split(s, ".")
		bad := s == "" || len(s) > 255 || strings.ContainsAny(s, " \t\r\n")
		for j, t := range toks {
			bad = bad || t == "" || (t == ">" && j != len(toks)-1)
		}
		switch {
		case bad:
			errs = append(errs, fmt.Errorf("webhook subject %q: not a NATS subject", s))
		case toks[0] == "weft" || toks[0] == "*" || toks[0] == ">" || strings.HasPrefix(s, "$") || strings.HasPrefix(s, "_INBOX"):
			errs = append(errs, fmt.Errorf("webhook subject %q: Weft's own, JetStream's and inbox subjects cannot be webhooks' (a subject of your own, which a trigger's stream captures)", s))
		case slices.Contains(d.WebhookSubjects[:i], s):
			errs = append(errs, fmt.Errorf("webhook subject %q: given twice", s))
		}
	}
	return errs
}
