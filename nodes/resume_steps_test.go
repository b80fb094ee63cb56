package nodes_test

import (
	"context"
	"strings"
	"testing"

	"github.com/flowrun/flowrun/llm"
	"github.com/flowrun/flowrun/llm/llmtest"
	"github.com/flowrun/flowrun/runtime"
)

// TestResumeCountsStepsOnce resumes a run after each of its checkpoints in
// turn, and then a resume of that resume after each of its own, and
// requires the step count of an uninterrupted run: nodes still running when
// the last checkpoint was taken (the enclosing loop, map items in flight)
// run again on resume and must not be counted twice.
func TestResumeCountsStepsOnce(t *testing.T) {
	p := load(t, strings.ReplaceAll(resumable, "item * loop_it", "item * 10"), map[string]string{"sub.yaml": resumableSub})
	full := &memoryCheckpoints{}
	res := runtime.Run(context.Background(), kindsWith(&pathProbe{}), p, nil, runtime.Options{Checkpointer: full})
	mustComplete(t, res)
	want := res.Steps
	for k := 0; k <= len(full.raw); k++ {
		again := &memoryCheckpoints{}
		restore := full.prefix(t, k)
		res := runtime.Run(context.Background(), kindsWith(&pathProbe{}), p, nil, runtime.Options{Checkpointer: again, Restore: restore})
		mustComplete(t, res)
		if res.Steps != want {
			t.Errorf("resume after %d checkpoints: %d steps, an uninterrupted run takes %d", k, res.Steps, want)
		}
		for j := 0; j <= len(again.raw); j++ {
			res := runtime.Run(context.Background(), kindsWith(&pathProbe{}), p, nil,
				runtime.Options{Checkpointer: &memoryCheckpoints{}, Restore: append(full.prefix(t, k), again.prefix(t, j)...)})
			mustComplete(t, res)
			if res.Steps != want {
				t.Errorf("resume after %d checkpoints, resumed again after %d more: %d steps, an uninterrupted run takes %d", k, j, res.Steps, want)
			}
		}
	}
}

// TestResumeCountsToolStepsOnce: the nodes of a pipeline an agent calls as
// a tool have no checkpoints of their own; their steps count in the
// agent's, so a resume that restores the agent still counts them, once.
func TestResumeCountsToolStepsOnce(t *testing.T) {
	srv := llmtest.New(t)
	srv.Push(
		llmtest.Calls(llmtest.Call("lookup", map[string]any{"word": "flow"}), llmtest.Call("lookup", map[string]any{"word": "ebb"})),
		llmtest.Calls(llmtest.Call("answer", map[string]any{"answer": "water"})),
	)
	p := load(t, agentTools+`
nodes:
  - id: rounds
    loop:
      max_iterations: 1
      body:
        - id: solve
          agent: {prompt: Define flow and ebb., tools: [lookup], finish: [answer], max_steps: 3}
        - id: after
          set: {}
outputs: {out: nodes.solve}
`, agentFiles)
	kinds := modelKinds(srv, llm.Options{})
	full := &memoryCheckpoints{}
	res := runtime.Run(context.Background(), kinds, p, nil, runtime.Options{Checkpointer: full})
	mustComplete(t, res)
	if res.Steps != 5 {
		t.Fatalf("%d steps, want 5: rounds, solve, lookup's define twice, after", res.Steps)
	}
	for k := 1; k <= len(full.raw); k++ {
		res := runtime.Run(context.Background(), kinds, p, nil, runtime.Options{Checkpointer: &memoryCheckpoints{}, Restore: full.prefix(t, k)})
		mustComplete(t, res)
		if res.Steps != 5 {
			t.Errorf("resume after %d checkpoints: %d steps, want 5", k, res.Steps)
		}
	}
}
