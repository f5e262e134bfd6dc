package natsconn_test

import (
	"slices"
	"strings"
	"testing"

	"github.com/weft-dev/weft/internal/eventlog"
	"github.com/weft-dev/weft/internal/natsconn"
	"github.com/weft-dev/weft/pkg/events"
)

// TestLocalQueueIsTheCoordinators: no worker may be given the queue of
// local nodes, and only the coordinator may write their outcomes.
func TestLocalQueueIsTheCoordinators(t *testing.T) {
	err := natsconn.Deployment{Queues: []string{"default", events.LocalQueue}}.Validate()
	if err == nil || !strings.Contains(err.Error(), `queue "_local": reserved`) {
		t.Fatalf("a worker queue named %s: %v", events.LocalQueue, err)
	}
	d := natsconn.Deployment{Queues: []string{"default"}}
	local := eventlog.WorkerFilter(events.LocalQueue)
	if u := d.User(natsconn.RoleCoordinator, ""); !slices.Contains(u.PublishAllow, local) {
		t.Fatalf("the coordinator may not publish %s: %v", local, u.PublishAllow)
	}
	for _, u := range []natsconn.User{d.User(natsconn.RoleWorker, "default"), d.User(natsconn.RoleClient, ""), d.User(natsconn.RoleUI, "")} {
		for _, p := range u.PublishAllow {
			// Its own outcomes, written or read back (a direct get by subject).
			subject := strings.TrimPrefix(p, "$JS.API.DIRECT.GET.WEFT.")
			if strings.Contains(subject, ".w.") && subject != eventlog.WorkerFilter(u.Queue) || strings.Contains(p, events.LocalQueue) {
				t.Errorf("%s may publish %s", u.Name, p)
			}
		}
	}
}
