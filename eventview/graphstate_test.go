package eventview_test

import (
	"context"
	"fmt"
	"strings"
	"testing"

	"github.com/flowrun/flowrun/dsl"
	"github.com/flowrun/flowrun/eventview"
	"github.com/flowrun/flowrun/graph"
	"github.com/flowrun/flowrun/nodes"
	"github.com/flowrun/flowrun/runtime"
	"github.com/flowrun/flowrun/runtime/runtimetest"
)

// boxStates runs the pipeline at path with inputs and returns its boxes'
// states as its graph shows them after the run.
func boxStates(t *testing.T, path string, inputs map[string]any, want runtime.Status) map[string]eventview.NodeState {
	t.Helper()
	p, ds := dsl.Load(path)
	if p == nil {
		t.Fatal(ds)
	}
	var c runtimetest.Events
	res := runtime.Run(context.Background(), nodes.Kinds(nodes.Services{}), p, inputs, runtime.Options{Sink: &c})
	if res.Status != want {
		t.Fatalf("run of %s: status %s (%v), want %s", path, res.Status, res.Err, want)
	}
	return eventview.BoxStates(p, graph.Layout(p), c.All(), res.Status)
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

// TestStepsOfCounter: each checkpoint of counter.yaml has the run's state
// then and what it changed; a map item's own writes are its scope's and
// change nothing, the map node's set: does.
func TestStepsOfCounter(t *testing.T) {
	p, ds := dsl.Load("../pipelines/counter.yaml")
	if p == nil {
		t.Fatal(ds)
	}
	var cps runtimetest.Checkpoints
	res := runtime.Run(context.Background(), nodes.Kinds(nodes.Services{}), p, nil, runtime.Options{Checkpointer: &cps})
	if res.Status != runtime.StatusCompleted {
		t.Fatal(res.Err)
	}
	points, err := cps.Prefix(cps.Len())
	if err != nil {
		t.Fatal(err)
	}
	steps := eventview.Steps(p, points)
	var lines []string
	for _, s := range steps {
		var cs []string
		for _, c := range s.Changes {
			cs = append(cs, c.String())
		}
		lines = append(lines, fmt.Sprintf("%d %s scoped=%v %s", s.Seq, s.Path, s.Scoped, strings.Join(cs, "; ")))
	}
	got := strings.Join(lines, "\n")
	for _, want := range []string{
		`1 count_up[1]/step scoped=false ~ count: 0 -> 1; ~ log: [] -> ["iteration 1"]`,
		"count_up scoped=false \n",
		"measure[2]/shout scoped=true \n",
		`measure scoped=false ~ lengths: [] -> [5,4,5,5]`,
		"both[long]/longest scoped=true \n",
		`both scoped=false ~ longest: 0 -> 5; ~ shortest: 0 -> 4`,
	} {
		if !strings.Contains(got, want) {
			t.Errorf("steps lack %q:\n%s", want, got)
		}
	}
	last, ok := eventview.StepAt(steps, steps[len(steps)-1].Seq)
	if !ok || last.State["count"] != 3 || len(last.State["log"].([]any)) != 4 {
		t.Errorf("the state at the last checkpoint: %v", last.State)
	}
}

// TestDiff: keys added, removed and changed, in key order, long values
// folded in the change's line; equal values (an int and the float64 the
// store may read back) are no change.
func TestDiff(t *testing.T) {
	long := strings.Repeat("x", 200)
	got := eventview.Diff(map[string]any{"a": 1, "b": "old", "c": true, "n": 2},
		map[string]any{"a": 1, "b": long, "d": []any{1}, "n": 2.0})
	var lines []string
	for _, c := range got {
		lines = append(lines, c.String())
	}
	want := []string{`~ b: "old" -> "` + strings.Repeat("x", 78) + "…", `- c: true`, `+ d: [1]`}
	if strings.Join(lines, "\n") != strings.Join(want, "\n") {
		t.Errorf("diff:\n%s\nwant:\n%s", strings.Join(lines, "\n"), strings.Join(want, "\n"))
	}
}
