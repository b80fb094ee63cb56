package eventview_test

import (
	"context"
	"sync"
	"testing"

	"github.com/flowrun/flowrun/dsl"
	"github.com/flowrun/flowrun/eventview"
	"github.com/flowrun/flowrun/graph"
	"github.com/flowrun/flowrun/nodes"
	"github.com/flowrun/flowrun/runtime"
)

type collect struct {
	mu     sync.Mutex
	events []runtime.Event
}

func (c *collect) Event(e runtime.Event) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.events = append(c.events, e)
}

// boxStates runs the pipeline at path with inputs and returns its boxes'
// states as its graph shows them after the run.
func boxStates(t *testing.T, path string, inputs map[string]any, want runtime.Status) map[string]eventview.NodeState {
	t.Helper()
	p, ds := dsl.Load(path)
	if p == nil {
		t.Fatal(ds)
	}
	var c collect
	res := runtime.Run(context.Background(), nodes.Kinds(nodes.Services{}), p, inputs, runtime.Options{Sink: &c})
	if res.Status != want {
		t.Fatalf("run of %s: status %s (%v), want %s", path, res.Status, res.Err, want)
	}
	return eventview.BoxStates(p, graph.Layout(p), c.events, res.Status)
}

func checkStates(t *testing.T, got map[string]eventview.NodeState, want map[string]eventview.NodeState) {
	t.Helper()
	for id, w := range want {
		if got[id] != w {
			t.Errorf("box %s: %q, want %q (all: %v)", id, got[id], w, got)
		}
	}
}

// TestBoxStatesAfterARun: once counter.yaml completes, start and end are
// done and the join boxes follow their map and parallel nodes; when its
// branch jumps to end, the summary it never took is skipped, not pending.
func TestBoxStatesAfterARun(t *testing.T) {
	const done, skipped = eventview.NodeDone, eventview.NodeSkipped
	all := boxStates(t, "../pipelines/counter.yaml", nil, runtime.StatusCompleted)
	checkStates(t, all, map[string]eventview.NodeState{graph.StartID: done, graph.EndID: done, "count_up": done, "step": done,
		"measure": done, "measure__join": done, "shout": done, "both": done, "both__join": done, "shortest": done, "longest": done,
		"route": done, "summary": done})
	toEnd := boxStates(t, "../pipelines/counter.yaml", map[string]any{"words": []any{"a", "extraordinarily"}}, runtime.StatusCompleted)
	checkStates(t, toEnd, map[string]eventview.NodeState{graph.StartID: done, graph.EndID: done, "route": done, "summary": skipped})
}

// TestBoxStatesAfterAFailure: a failed run has not reached its end, and
// the node after the failure is still pending (a resume runs it), not
// skipped.
func TestBoxStatesAfterAFailure(t *testing.T) {
	got := boxStates(t, "testdata/fails.yaml", nil, runtime.StatusFailed)
	checkStates(t, got, map[string]eventview.NodeState{graph.StartID: eventview.NodeDone, "prepare": eventview.NodeDone,
		"parse": eventview.NodeFailed, "report": "", graph.EndID: ""})
}
