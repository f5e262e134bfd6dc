package projection_test

import (
	"errors"
	"fmt"
	"time"

	"github.com/weft-dev/weft/pkg/events"
	"github.com/weft-dev/weft/pkg/projection"
)

// Apply says what became of each event: here the work item of an attempt
// was delivered twice, both deliveries report, and the first outcome to
// land stands.
func ExampleState_Apply() {
	a := events.NodeRef{Node: "fetch", Iteration: 1}
	log := []events.Payload{
		&events.RunStartedData{GraphName: "example"},
		&events.NodeReadyData{NodeRef: a, Attempt: 1, Queue: "default"},
		&events.NodeInvokingData{NodeRef: a, Attempt: 1, Delivery: 1, Worker: "w1"},
		&events.NodeInvokingData{NodeRef: a, Attempt: 1, Delivery: 2, Worker: "w2"},
		&events.NodeInvokedData{NodeRef: a, Attempt: 1, Delivery: 1, Worker: "w1"},
		&events.NodeInvokedData{NodeRef: a, Attempt: 1, Delivery: 2, Worker: "w2"},
	}
	s := &projection.State{}
	for i, p := range log {
		e, _ := events.New("run1", fmt.Sprint("e", i), time.Unix(int64(i), 0), p)
		e.Seq = uint64(i + 1)
		if err := s.Apply(e); errors.Is(err, projection.ErrStale) {
			fmt.Printf("seq %d: %v\n", e.Seq, err)
		}
	}
	n := s.Node("fetch")
	fmt.Println(n.Status, "by", n.Worker, "- stale events:", s.Stats.Stale)
	// Output:
	// seq 6: stale: attempt 1 of fetch/1 is succeeded
	// succeeded by w1 - stale events: 1
}
