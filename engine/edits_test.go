package engine

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"

	"github.com/flowrun/flowrun/runtime"
)

const editPipeline = `
version: 1
name: editor
inputs:
  start: {type: integer, default: 1}
  word: {type: string, default: "hi"}
state: {n: 0, note: ""}
nodes:
  - id: first
    set: {n: inputs.start}
  - id: second
    set: {n: state.n + 10, note: 'inputs.word + "!"'}
  - id: gate
    ask: {question: "go on?", schema: {type: boolean}, default: true}
  - id: third
    set: {n: state.n * 2}
outputs: {n: state.n, note: state.note}
`

// startedEdits is what the run_started events of run recorded as edited.
func startedEdits(t *testing.T, e *Engine, run string) []runtime.Edit {
	t.Helper()
	st, _ := e.Store()
	events, _, err := st.EventsAfter(context.Background(), run, 0)
	if err != nil {
		t.Fatal(err)
	}
	var out []runtime.Edit
	for _, ev := range events {
		if ev.Type == runtime.EventRunStarted {
			out = append(out, ev.Edits...)
		}
	}
	return out
}

// TestForkWithEdits: a fork from checkpoint 1 with state.n and an input
// edited goes on from the edited state with the edited input, records
// the edits with their old values, and leaves its parent as it was; a
// value of the wrong type is refused before anything runs, naming the
// key and its type; a run waiting on a question takes a state edit
// before its answer; inputs are edited only in a fork.
func TestForkWithEdits(t *testing.T) {
	e, st := newEngine(t, nil, nil)
	p := load(t, "editor.yaml", editPipeline)
	ctx := context.Background()
	res, err := result(e.Start(ctx, p, nil, RunOptions{}))
	if err != nil || res.Status != runtime.StatusWaiting {
		t.Fatalf("start: %v %+v", err, res)
	}
	run := res.RunID
	forked, err := result(e.Fork(ctx, run, "1", ResumeOptions{Edits: []string{"state.n=5", "inputs.word=yo"}, RunOptions: RunOptions{Human: autoHuman{}}}))
	if err != nil || forked.Status != runtime.StatusCompleted {
		t.Fatalf("fork: %v %+v", err, forked)
	}
	if forked.Outputs["n"] != 30 || forked.Outputs["note"] != "yo!" {
		t.Errorf("the fork did not go on from the edits: %v", forked.Outputs)
	}
	edits := startedEdits(t, e, forked.RunID)
	if fmt.Sprint(edits) != "[{state.n 1 5} {inputs.word hi yo}]" {
		t.Errorf("recorded edits: %+v", edits)
	}
	if r, _ := st.Run(ctx, forked.RunID); r.Inputs["word"] != "yo" || r.ParentRun != run {
		t.Errorf("the fork's record: %+v", r)
	}
	if cps, _ := st.Checkpoints(ctx, run, 0); cps[0].State["n"] != 1 {
		t.Errorf("the parent's checkpoint changed: %v", cps[0].State)
	}
	for _, c := range []struct{ edit, want string }{
		{"state.n=many", `state.n is of type integer (from its initial value); "many" is of type string`},
		{"state.count=1", `state.count: editor declares no state variable "count"`},
		{"inputs.start=1.5", "inputs.start (of type integer)"},
		{"x=1", `"x": an edit names state.NAME or inputs.NAME`},
	} {
		_, err := result(e.Fork(ctx, run, "1", ResumeOptions{Edits: []string{c.edit}}))
		var input *InputError
		if !errors.As(err, &input) || !strings.Contains(err.Error(), c.want) {
			t.Errorf("edit %s: %v, want an input error with %q", c.edit, err, c.want)
		}
	}
	if _, err := result(e.Resume(ctx, run, ResumeOptions{Edits: []string{"inputs.word=no"}})); err == nil || !strings.Contains(err.Error(), "only in a fork") {
		t.Errorf("an input edit without a fork: %v", err)
	}
	res, err = result(e.Answer(ctx, run, true, ResumeOptions{Edits: []string{"state.n=100"}}))
	if err != nil || res.Status != runtime.StatusCompleted || res.Outputs["n"] != 200 {
		t.Fatalf("answer after a state edit: %v %+v", err, res)
	}
	if edits := startedEdits(t, e, run); fmt.Sprint(edits) != "[{state.n 11 100}]" {
		t.Errorf("the waiting run's edit: %+v", edits)
	}
}
