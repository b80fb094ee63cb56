package nodes_test

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/flowrun/flowrun/figures"
	"github.com/flowrun/flowrun/llm"
	"github.com/flowrun/flowrun/llm/llmtest"
	"github.com/flowrun/flowrun/runtime"
)

// TestMaxCostHoldsAcrossAMap is issue 32's run at small scale: a $3 cap
// and a map of 8 items at max_concurrency 8, each call $1 (100 output
// tokens at max_tokens 100, $0.01 a token). Checking the spend before
// each call sent all eight at once ($8, and a stop message telling less
// than the stored cost); reserving each call's worst case lets three
// through, and the stop message tells the stored cost.
func TestMaxCostHoldsAcrossAMap(t *testing.T) {
	srv := llmtest.New(t)
	srv.Handle(func(llmtest.Request) llmtest.Reply {
		return llmtest.Reply{Text: "ok", Usage: llmtest.Usage{Completion: 100}, Delay: 20 * time.Millisecond}
	})
	p := load(t, `
version: 1
name: t
models: {default: {model: gpt-4.1-mini, price: {input_per_mtok: 0, output_per_mtok: 10000}}}
limits: {max_cost_usd: 3}
nodes:
  - id: each
    map:
      over: 1..8
      max_concurrency: 8
      body:
        - id: ask
          llm: {prompt: "item ${{ item }}", max_tokens: 100}
`, nil)
	res, _ := run(t, p, modelKinds(srv, llm.Options{}), nil)
	if res.CostUSD > 3+1e-9 || srv.Calls() != 3 {
		t.Fatalf("%d calls cost $%.2f under a $3 cap", srv.Calls(), res.CostUSD)
	}
	if res.Status != runtime.StatusStopped || !strings.HasPrefix(res.Reason, "limits.max_cost_usd ($3.00) reached: the run has spent "+figures.USD(res.CostUSD)) {
		t.Fatalf("status %s reason %q: want stopped, telling the stored %s", res.Status, res.Reason, figures.USD(res.CostUSD))
	}
}

// TestCancelledCallCountsItsReservation: a call cancelled while the
// server works on it counts at what it reserved ($1: 100 output tokens
// at $0.01), never at $0, since the server may bill it all.
func TestCancelledCallCountsItsReservation(t *testing.T) {
	srv := llmtest.New(t)
	srv.Handle(func(llmtest.Request) llmtest.Reply {
		return llmtest.Reply{Text: "late", Delay: time.Minute}
	})
	p := load(t, `
version: 1
name: t
models: {default: {model: gpt-4.1-mini, price: {input_per_mtok: 0, output_per_mtok: 10000}}}
limits: {max_cost_usd: 5}
nodes:
  - id: ask
    llm: {prompt: "slow", max_tokens: 100}
`, nil)
	ctx, cancel := context.WithCancel(context.Background())
	go func() {
		for srv.Calls() == 0 {
			time.Sleep(time.Millisecond)
		}
		cancel()
	}()
	res := runtime.Run(ctx, modelKinds(srv, llm.Options{}), p, nil, runtime.Options{})
	if res.CostUSD != 1 {
		t.Fatalf("a cancelled call cost $%v (status %s), want its $1 reservation", res.CostUSD, res.Status)
	}
}
