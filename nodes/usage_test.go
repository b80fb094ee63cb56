package nodes_test

import (
	"strings"
	"testing"

	"github.com/flowrun/flowrun/llm"
	"github.com/flowrun/flowrun/llm/llmtest"
	"github.com/flowrun/flowrun/runtime"
)

// A server that reports no usage still costs money: the tokens are counted
// locally, marked estimated in the model_turn events, and max_cost_usd
// stops the run before it passes the cap.
func TestMaxCostWithoutServerUsage(t *testing.T) {
	srv := llmtest.New(t)
	srv.Handle(func(llmtest.Request) llmtest.Reply {
		return llmtest.Reply{Text: "a reply of a few tokens", NoUsage: true}
	})
	p := load(t, `
version: 1
name: t
models: {default: {model: gpt-4.1-mini, price: {input_per_mtok: 100000, output_per_mtok: 100000}}}
limits: {max_cost_usd: 5}
state: {n: 0}
nodes:
  - id: spend
    loop:
      max_iterations: 10
      body:
        - id: ask
          llm: {prompt: "spend"}
          set: {n: state.n + 1}
`, nil)
	res, rec := run(t, p, modelKinds(srv, llm.Options{}), nil)
	if res.Status != runtime.StatusStopped || !strings.Contains(res.Reason, "limits.max_cost_usd") {
		t.Fatalf("status %s reason %q err %v: max_cost_usd never tripped", res.Status, res.Reason, res.Err)
	}
	if srv.Calls() >= 10 || srv.Calls() == 0 || res.CostUSD > 5 {
		t.Fatalf("%d calls, cost %v", srv.Calls(), res.CostUSD)
	}
	for _, e := range rec.All() {
		if e.Type != runtime.EventModelTurn || e.Turn.Error != "" { // the refused call was not sent
			continue
		}
		u := e.Turn.Usage
		if u == nil || !u.Estimated || u.Prompt == 0 || u.Completion == 0 {
			t.Fatalf("model_turn usage %#v, want an estimate", e.Turn.Usage)
		}
	}
}
