package nodes_test

import (
	"context"
	"testing"

	"github.com/flowrun/flowrun/llm"
	"github.com/flowrun/flowrun/llm/llmtest"
	"github.com/flowrun/flowrun/runtime"
	"github.com/flowrun/flowrun/runtime/runtimetest"
)

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
	full := &runtimetest.Checkpoints{}
	res := runtime.Run(context.Background(), kinds, p, nil, runtime.Options{Checkpointer: full})
	mustComplete(t, res)
	if res.Steps != 5 {
		t.Fatalf("%d steps, want 5: rounds, solve, lookup's define twice, after", res.Steps)
	}
	for k := 1; k <= full.Len(); k++ {
		restore, err := full.Prefix(k)
		if err != nil {
			t.Fatal(err)
		}
		res := runtime.Run(context.Background(), kinds, p, nil, runtime.Options{Checkpointer: &runtimetest.Checkpoints{}, Restore: restore})
		mustComplete(t, res)
		if res.Steps != 5 {
			t.Errorf("resume after %d checkpoints: %d steps, want 5", k, res.Steps)
		}
	}
}
