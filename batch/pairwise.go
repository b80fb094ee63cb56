package batch

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math/rand/v2"
	"path/filepath"

	"github.com/flowrun/flowrun/budget"
	"github.com/flowrun/flowrun/dsl"
	"github.com/flowrun/flowrun/engine"
	"github.com/flowrun/flowrun/figures"
	"github.com/flowrun/flowrun/runtime"
	"github.com/flowrun/flowrun/store"
)

// DefaultPairwiseRubric is what a pairwise judge is asked when no rubric
// is given.
const DefaultPairwiseRubric = "Which output answers the dataset item better: more correct first, then more complete and clearer?"

// PairwiseJudge asks a model, item by item, which of A's and B's outputs
// is better. The two are shown in a random order drawn per item from
// Seed, so that a judge's bias for the first (or second) position does
// not favour one batch; the order is recorded with each verdict. Each
// question is a run of a judge pipeline that Engine starts, a child run
// of batch B: listed under it, never among the runs on their own.
type PairwiseJudge struct {
	Engine *engine.Engine
	Model  string // the model id, e.g. gpt-4.1
	Rubric string
	Seed   uint64
	// MaxCostUSD caps what the judge spends (0: no cap): each call
	// reserves its worst case before it is sent, and the judge stops at
	// the first call the cap cannot afford.
	MaxCostUSD float64
}

// PairVerdict is the judge's verdict on one item.
type PairVerdict struct {
	Key       string  `json:"key"`
	Winner    string  `json:"winner"` // "a", "b" or "tie"
	BFirst    bool    `json:"b_shown_first"`
	Reasoning string  `json:"reasoning"`
	CostUSD   float64 `json:"cost_usd"`
}

// Pairwise is what a pairwise judge found over a comparison's items.
type Pairwise struct {
	Model   string        `json:"model"`
	Rubric  string        `json:"rubric"`
	Seed    uint64        `json:"seed"`
	Items   []PairVerdict `json:"items"`
	WinsA   int           `json:"wins_a"`
	WinsB   int           `json:"wins_b"`
	Ties    int           `json:"ties"`
	Skipped []string      `json:"skipped"` // items not completed on both sides
	// PValue is the two-sided sign test of B's wins against A's (ties
	// left out): McNemar's exact test on the split.
	PValue  float64 `json:"p_value"`
	Better  string  `json:"better"` // "a", "b" or "" (no clear winner at 0.05)
	CostUSD float64 `json:"cost_usd"`
	// Stopped says why the judge stopped before the last item: the cost
	// cap; the items after it were not judged.
	Stopped string `json:"stopped,omitempty"`
}

var pairwiseSchema = map[string]any{
	"type": "object",
	"properties": map[string]any{
		"reasoning": map[string]any{"type": "string"},
		"better":    map[string]any{"type": "string", "enum": []any{"first", "second", "tie"}},
	},
	"required": []any{"reasoning", "better"},
}

// Judge asks the model about every item of c that completed in both
// batches, reading each side's outputs from st.
func (j *PairwiseJudge) Judge(ctx context.Context, st *store.Store, c *Comparison) (*Pairwise, error) {
	rubric := j.Rubric
	if rubric == "" {
		rubric = DefaultPairwiseRubric
	}
	out := &Pairwise{Model: j.Model, Rubric: rubric, Seed: j.Seed, Items: []PairVerdict{}, Skipped: []string{}}
	rows, err := st.BatchItems(ctx, c.B.ID)
	if err != nil {
		return nil, fmt.Errorf("batch %s: reading its items: %w", c.B.ID, err)
	}
	items := make(map[string]map[string]any, len(rows))
	for _, r := range rows {
		items[r.Key] = r.Item
	}
	judge, err := pairwisePipeline(filepath.Join(filepath.Dir(c.B.Pipeline), "pairwise.judge.yaml"), j.Model)
	if err != nil {
		return nil, err
	}
	var ledger *refusals
	o := engine.RunOptions{ChildOf: c.B.ID}
	if j.MaxCostUSD > 0 {
		ledger = &refusals{Cap: budget.New("the judge's cost cap of "+figures.USD(j.MaxCostUSD), j.MaxCostUSD, 0, nil)}
		o.Ledger = ledger
	}
	rng := rand.New(rand.NewPCG(j.Seed, 0xb1a5))
	for _, p := range c.Pairs {
		bFirst := rng.IntN(2) == 1
		outA, okA := completedOutputs(ctx, st, p.A)
		outB, okB := completedOutputs(ctx, st, p.B)
		if !okA || !okB {
			out.Skipped = append(out.Skipped, p.Key)
			continue
		}
		first, second := outA, outB
		if bFirst {
			first, second = outB, outA
		}
		prompt := fmt.Sprintf("Rubric:\n%s\n\nDataset item (%s):\n%s\n\nFirst output:\n%s\n\nSecond output:\n%s\n\nSay which output is better by the rubric (first, second, or tie), with brief reasoning.",
			rubric, p.Key, jsonText(items[p.Key]), jsonText(first), jsonText(second))
		run, err := j.Engine.Start(ctx, judge, map[string]any{"prompt": prompt}, o)
		if err != nil {
			return nil, fmt.Errorf("pairwise judge on item %s: %w", p.Key, err)
		}
		res := run.Wait()
		if res.Status == runtime.StatusStopped && ledger != nil && ledger.refused != nil {
			final := *ledger.refused
			final.Spent = ledger.Spent()
			out.Stopped = final.Error()
			break
		}
		if res.Status != runtime.StatusCompleted {
			return nil, fmt.Errorf("pairwise judge on item %s: run %s %s: %s", p.Key, res.RunID, res.Status, errText(res.Err)+res.Reason)
		}
		v := PairVerdict{Key: p.Key, BFirst: bFirst, CostUSD: res.CostUSD, Winner: "tie"}
		reply, _ := res.Outputs["verdict"].(map[string]any)
		v.Reasoning, _ = reply["reasoning"].(string)
		switch reply["better"] {
		case "first":
			v.Winner = map[bool]string{false: "a", true: "b"}[bFirst]
		case "second":
			v.Winner = map[bool]string{false: "b", true: "a"}[bFirst]
		}
		switch v.Winner {
		case "a":
			out.WinsA++
		case "b":
			out.WinsB++
		default:
			out.Ties++
		}
		out.CostUSD += res.CostUSD
		out.Items = append(out.Items, v)
	}
	if ledger != nil {
		out.CostUSD = ledger.Spent()
	}
	out.PValue = McNemar(out.WinsB, out.WinsA)
	if out.PValue < 0.05 {
		out.Better = "b"
		if out.WinsA > out.WinsB {
			out.Better = "a"
		}
	}
	return out, nil
}

// pairwiseSystem is what the judge is told of its task.
const pairwiseSystem = "You compare two outputs of automated pipelines for the same input, impartially: the order they are shown in means nothing."

// pairwisePipeline is the pipeline a pairwise judge runs for each item,
// asking model, loaded as if it were at path (it is no file).
func pairwisePipeline(path, model string) (*dsl.Pipeline, error) {
	id, _ := json.Marshal(model)
	system, _ := json.Marshal(pairwiseSystem)
	schema, _ := json.Marshal(pairwiseSchema)
	src := fmt.Sprintf(`version: 1
name: pairwise-judge
inputs:
  prompt: {type: string}
models:
  judge: {model: %s, temperature: 0}
nodes:
  - id: pairwise_judge
    llm:
      model: judge
      system: %s
      prompt: "${{ inputs.prompt }}"
      output_schema: %s
      repair_retries: 1
outputs:
  verdict: nodes.pairwise_judge.json
`, id, system, schema)
	p, ds := dsl.LoadSource(path, []byte(src))
	if p == nil {
		return nil, fmt.Errorf("the pairwise judge's pipeline for model %s: %s", model, ds)
	}
	return p, nil
}

// refusals is a cost cap that keeps the reservation it refused; the
// judge's runs go one at a time, each read once it has ended.
type refusals struct {
	*budget.Cap
	refused *budget.ExceededError
}

func (r *refusals) Reserve(ctx context.Context, least, most float64) (budget.Reservation, error) {
	res, err := r.Cap.Reserve(ctx, least, most)
	if e := (*budget.ExceededError)(nil); errors.As(err, &e) && r.refused == nil {
		r.refused = e
	}
	return res, err
}

// completedOutputs are the outputs of a row's run when it completed.
func completedOutputs(ctx context.Context, st *store.Store, r Row) (map[string]any, bool) {
	if r.Run == "" || r.Status != runtime.StatusCompleted {
		return nil, false
	}
	run, err := st.Run(ctx, r.Run)
	if err != nil {
		return nil, false
	}
	return run.Outputs, true
}

func jsonText(v any) string {
	b, err := json.MarshalIndent(v, "", "  ")
	if err != nil {
		return fmt.Sprint(v)
	}
	return string(b)
}
