package eventview

import (
	"cmp"
	"fmt"
	"strings"
	"time"

	"github.com/flowrun/flowrun/llm"
	"github.com/flowrun/flowrun/runtime"
	"github.com/flowrun/flowrun/store"
)

// InFlight describes the background calls of a run that its checkpoints
// hold in flight (durable before the first poll) or its events say were
// created, and that neither ended nor had their node finish, as of now,
// with what the events add (polls, last status): "plan: response resp_1
// in progress, 4m0s, polled 12 times". Events are not durable: a killed
// process may have lost its last polls.
func InFlight(events []runtime.Event, cps []store.CheckpointInfo, now time.Time) []string {
	type call struct {
		path, status string
		since        time.Time
		polls        int
		ended        bool
	}
	finished := map[string]bool{}
	byID := map[string]*call{}
	var order []string
	for _, cp := range cps {
		if cp.InFlight == nil {
			finished[cp.Path] = true
			continue
		}
		bc, ok := llm.ReadBackgroundCall(cp.InFlight.Value)
		if !ok {
			continue
		}
		c := byID[bc.ID]
		if c == nil {
			c = &call{path: strings.TrimSuffix(cp.Path, runtime.InFlightSuffix), since: cp.Created}
			byID[bc.ID] = c
			order = append(order, bc.ID)
		}
		c.status = bc.Status
		c.ended = bc.Status == "cancelled" || bc.Status == "failed"
	}
	for _, e := range events {
		switch {
		case e.Type == runtime.EventNodeFinished || e.Type == runtime.EventNodeFailed:
			finished[e.Path] = true
			continue
		case e.Type != runtime.EventRemoteWork:
			continue
		}
		c := byID[e.Remote.ID]
		if c == nil {
			// A live run's calls are in its events before a reader may
			// settle its journal.
			if e.Remote.What != "created" && e.Remote.What != "attached" {
				continue
			}
			c = &call{path: e.Path, since: e.Time}
			byID[e.Remote.ID] = c
			order = append(order, e.Remote.ID)
		}
		c.status = cmp.Or(e.Remote.Status, c.status)
		switch e.Remote.What {
		case "polled":
			c.polls++
		case "completed", "cancelled":
			c.ended = true
		}
	}
	var out []string
	for _, id := range order {
		c := byID[id]
		if c.ended || finished[c.path] {
			continue
		}
		polled := fmt.Sprintf("polled %d times", c.polls)
		if c.polls == 1 {
			polled = "polled once"
		}
		out = append(out, fmt.Sprintf("%s: response %s %s, %s, %s", c.path, id,
			strings.ReplaceAll(c.status, "_", " "), now.Sub(c.since).Round(time.Second), polled))
	}
	return out
}
