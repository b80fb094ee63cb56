package engine

import (
	"context"
	"reflect"
	"testing"

	"github.com/flowrun/flowrun/llm/llmtest"
	"github.com/flowrun/flowrun/runtime"
	"github.com/flowrun/flowrun/store"
)

// A run goes on as it was started: its model override and loop cap are
// recorded with it, an answer given through another engine on the same
// store (another process) calls the overriding model, a fork inherits
// them, and a fork given another override records that one and leaves
// the parent's as it was.
func TestARunGoesOnAsItWasStarted(t *testing.T) {
	fake := llmtest.New(t)
	e, st := newEngine(t, fake, nil)
	p := load(t, "asker.yaml", askPipeline)
	ctx := context.Background()
	res, err := result(e.Start(ctx, p, nil, RunOptions{Models: []string{"default=gpt-4.1"}, MaxLoops: 3}))
	if err != nil || res.Status != runtime.StatusWaiting {
		t.Fatalf("start: %v %+v", err, res)
	}
	want := store.RunSpec{Models: map[string]string{"default": "gpt-4.1"}, MaxLoops: 3}
	if r, _ := st.Run(ctx, res.RunID); !reflect.DeepEqual(r.Spec, want) {
		t.Fatalf("the run recorded %+v, want %+v", r.Spec, want)
	}

	other, _ := newEngine(t, fake, nil)
	other.o.Store = st
	fake.Push(llmtest.Text("hello Ada"))
	done, err := result(other.Answer(ctx, res.RunID, map[string]any{"name": "Ada"}, ResumeOptions{}))
	if err != nil || done.Status != runtime.StatusCompleted {
		t.Fatalf("answer: %v %+v", err, done)
	}
	if got := fake.Last().Model; got != "gpt-4.1" {
		t.Fatalf("after the answer the run called %s, want the override gpt-4.1", got)
	}

	fake.Push(llmtest.Text("hello again"))
	forked, err := result(e.Fork(ctx, res.RunID, "1", ResumeOptions{}))
	if err != nil || fake.Last().Model != "gpt-4.1" {
		t.Fatalf("a fork called %s (%v), want the override it inherits", fake.Last().Model, err)
	}
	if r, _ := st.Run(ctx, forked.RunID); !reflect.DeepEqual(r.Spec, want) {
		t.Errorf("the fork recorded %+v, want %+v", r.Spec, want)
	}

	fake.Push(llmtest.Text("hello there"))
	changed, err := result(e.Fork(ctx, res.RunID, "1", ResumeOptions{RunOptions: RunOptions{Models: []string{"default=gpt-4o"}}}))
	if err != nil || fake.Last().Model != "gpt-4o" {
		t.Fatalf("a fork given gpt-4o called %s (%v)", fake.Last().Model, err)
	}
	if r, _ := st.Run(ctx, changed.RunID); r.Spec.Models["default"] != "gpt-4o" || r.Spec.MaxLoops != 3 {
		t.Errorf("the changed fork recorded %+v", r.Spec)
	}
	if r, _ := st.Run(ctx, res.RunID); !reflect.DeepEqual(r.Spec, want) {
		t.Errorf("the parent's spec changed to %+v", r.Spec)
	}
}
