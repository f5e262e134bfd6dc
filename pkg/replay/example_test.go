package replay_test

import (
	"bufio"
	"encoding/json"
	"fmt"
	"os"

	"github.com/weft-dev/weft/pkg/events"
	"github.com/weft-dev/weft/pkg/graph"
	"github.com/weft-dev/weft/pkg/replay"
)

// ExampleRun checks a recorded run (one event a line, as
// client.History's events marshal) against a graph file.
func ExampleRun() {
	f, err := os.Open("../projection/testdata/histories/hello.jsonl")
	if err != nil {
		fmt.Println(err)
		return
	}
	defer f.Close()
	var history []*events.Event
	for sc := bufio.NewScanner(f); sc.Scan(); {
		var e events.Event
		if err := json.Unmarshal(sc.Bytes(), &e); err != nil {
			fmt.Println(err)
			return
		}
		history = append(history, &e)
	}
	g, err := graph.LoadFile("../../examples/hello.yaml")
	if err != nil {
		fmt.Println(err)
		return
	}
	r := replay.Run(g, history)
	fmt.Println(r.RunID, r.OK(), r.Events, "events")
	// Output: rec-hello true 9 events
}
