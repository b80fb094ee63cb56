package plan

import (
	"fmt"
	"io"
	"slices"

	"github.com/flowrun/flowrun/dsl"
)

// Batch is the bound of a batch: one run per item and repeat.
type Batch struct {
	Pipeline string `json:"pipeline"`
	Items    int    `json:"items"`
	Repeat   int    `json:"repeat"`
	// Total adds up the items' plans, each evaluated with its inputs.
	Total     Totals   `json:"total"`
	Unbounded []Reason `json:"unbounded,omitempty"`
	// MaxCostUSD is the batch's cap (--max-cost-usd), 0 for none.
	MaxCostUSD float64 `json:"max_cost_usd,omitempty"`
}

// MakeBatch bounds a batch of p: a run per inputs, each repeat times.
func MakeBatch(p *dsl.Pipeline, inputs []map[string]any, repeat int, maxCostUSD float64) *Batch {
	b := &Batch{Pipeline: p.Name, Items: len(inputs), Repeat: repeat, Total: zero(), MaxCostUSD: maxCostUSD}
	for _, in := range inputs {
		pl := Make(p, Options{Inputs: in})
		b.Total = b.Total.plus(pl.Total.settled())
		for _, r := range pl.Unbounded {
			if !slices.Contains(b.Unbounded, r) {
				b.Unbounded = append(b.Unbounded, r)
			}
		}
	}
	b.Total = b.Total.times(Num(float64(repeat)))
	return b
}

// settled is t with every figure that has a value reduced to it: items'
// bounds read the same names with different values, so their sum is
// told by number.
func (t Totals) settled() Totals {
	s := func(f Figure) Figure {
		if v, ok := f.Value(); ok {
			return Num(v)
		}
		return f
	}
	return Totals{s(t.Calls), s(t.OutputTokens), s(t.InputTokens), s(t.USD), s(t.SandboxRuns), s(t.ToolCalls), s(t.WallSeconds)}
}

// Write prints the batch's bound and how it compares with its cap.
func (b *Batch) Write(w io.Writer) {
	t := b.Total
	fmt.Fprintf(w, "Plan of a batch of %s: %d item(s) × %d repeat(s) = %d run(s), at most:\n", b.Pipeline, b.Items, b.Repeat, b.Items*b.Repeat)
	fmt.Fprintf(w, "  model calls %s, output tokens %s, input tokens %s, cost %s,\n  sandbox runs %s, tool calls %s\n",
		t.Calls.Text(), t.OutputTokens.Text(), t.InputTokens.Text(), t.USD.USD(), t.SandboxRuns.Text(), t.ToolCalls.Text())
	section(w, "Unbounded", reasons(b.Unbounded))
	if b.MaxCostUSD > 0 {
		fmt.Fprintf(w, "\n%s\n", capText("the batch's cost cap", b.MaxCostUSD, t.USD, "the batch"))
	}
}
