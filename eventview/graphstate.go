package eventview

import (
	"strings"

	"github.com/flowrun/flowrun/dsl"
	"github.com/flowrun/flowrun/graph"
	"github.com/flowrun/flowrun/runtime"
)

// BoxStates is where each box of d, the drawing of p, stands in a run
// whose events are events and whose status is status, so that the graph
// of a finished run reads right: the start box is done once the run
// started; a completed run's end box is done and every node it never
// took is skipped; a run that ended any other way (failed, stopped,
// waiting) has not reached its end, and the nodes it did not take are
// still pending, since a resume may run them. A join box stands where
// its map or parallel node stands.
func BoxStates(p *dsl.Pipeline, d *graph.Drawing, events []runtime.Event, status runtime.Status) map[string]NodeState {
	states := map[string]NodeState{}
	inside := map[string]NodeState{} // by path, loop and map indices left out
	for _, e := range events {
		if v := Describe(e); v.NodeState != "" && e.Node != "" {
			states[e.Node] = v.NodeState
			inside[unindexed(e.Path)] = v.NodeState
		}
	}
	// The boxes of the nodes inside an open call node (ids "call/node")
	// stand where the nodes at those paths do; those of a finished call
	// the resume restored whole are done.
	for _, b := range d.Boxes {
		if i := strings.LastIndex(b.ID, "/"); i >= 0 {
			states[b.ID] = inside[b.ID]
			if states[b.ID] == "" && states[b.ID[:i]] == NodeDone {
				states[b.ID] = NodeDone
			}
		}
	}
	if status != runtime.StatusRunning {
		// A node cut short by a stop or a kill runs again on resume.
		for id, st := range states {
			if st == NodeRunning {
				states[id] = NodePending
			}
		}
	}
	finishBodies(p.Nodes, states, false)
	if len(events) > 0 {
		states[graph.StartID] = NodeDone
	}
	if status == runtime.StatusCompleted {
		states[graph.EndID] = NodeDone
	}
	for _, b := range d.Boxes {
		if b.Kind != "terminal" && states[b.ID] == "" && status == runtime.StatusCompleted {
			states[b.ID] = NodeSkipped
		}
	}
	for _, b := range d.Boxes {
		if fork, ok := graph.ForkOf(b.ID); ok {
			states[b.ID] = states[fork]
		}
	}
	return states
}

// finishBodies shows the nodes inside a finished loop, map or parallel
// node as done when no event says otherwise: a resume restores such a
// node whole, with no event for what it ran inside.
func finishBodies(b dsl.Block, states map[string]NodeState, done bool) {
	for _, n := range b {
		if done && states[n.ID] == "" {
			states[n.ID] = NodeDone
		}
		for _, body := range dsl.Bodies(n) {
			finishBodies(body.Body, states, states[n.ID] == NodeDone)
		}
	}
}

// unindexed is path without its loop iterations, map items and parallel
// branches: "rounds[2]/solve/check" is "rounds/solve/check".
func unindexed(path string) string {
	var b strings.Builder
	depth := 0
	for _, r := range path {
		switch {
		case r == '[':
			depth++
		case r == ']':
			depth--
		case depth == 0:
			b.WriteRune(r)
		}
	}
	return b.String()
}
