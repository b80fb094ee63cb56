package batch

import (
	"context"
	"regexp"
	"strconv"
	"testing"

	"github.com/flowrun/flowrun/batch/batchtest"
	"github.com/flowrun/flowrun/dsl"
	"github.com/flowrun/flowrun/llm/llmtest"
	"github.com/flowrun/flowrun/runtime"
	"github.com/flowrun/flowrun/store"
)

// runUntilDecided runs the fixture's items in a seeded random order,
// stopping once the sequential test against a decides, as the CLI does.
func runUntilDecided(t *testing.T, st *store.Store, pipeline, dataset string, a *store.Batch, env func(string) (string, bool)) (*store.Batch, runtime.Status, *SequentialOutcome) {
	ctx := context.Background()
	p, _ := dsl.Load(pipeline)
	d, err := ReadDataset(dataset)
	if err != nil {
		t.Fatal(err)
	}
	u, err := NewUntilDecided(ctx, st, a, 0.05)
	if err != nil {
		t.Fatal(err)
	}
	s := Settings{Concurrency: 1, Metrics: []string{"exact"}, Primary: "exact", DatasetAbs: dataset}
	b := &store.Batch{Pipeline: pipeline, PipelineAbs: pipeline, PipelineHash: p.Hash, Dataset: dataset, DatasetHash: d.Hash}
	if err := SetSettings(b, s); err != nil {
		t.Fatal(err)
	}
	r := NewRunner(st, p, share(t, engineFor(t, st, env), p), s)
	r.Scorer, r.Shuffle, r.OrderSeed, r.Decide = NewScorer(p, nil), true, 7, u.Observe
	if err := r.Create(ctx, b, d.Items, func(*store.Batch) {}); err != nil {
		t.Fatal(err)
	}
	status, _, err := r.Run(ctx, b, d.Items)
	if err != nil {
		t.Fatal(err)
	}
	o, err := u.Outcome(ctx, st, b)
	if err != nil {
		t.Fatal(err)
	}
	return b, status, o
}

// TestUntilDecidedStopsEarly: against a baseline that passes all 40
// items, a batch that fails the even ones is decided worse long before
// its last item, and reports the items and cost it saved; a batch no
// different from the baseline is never decided and runs every item.
func TestUntilDecidedStopsEarly(t *testing.T) {
	st := batchtest.OpenStore(t)
	pipeline, dataset, _, env := resumeFixture(t, 40)
	a, _ := startBatch(t, st, pipeline, dataset, Settings{Concurrency: 4, Metrics: []string{"exact"}, Primary: "exact"}, env)

	number := regexp.MustCompile(`q(\d+)`)
	srv := llmtest.New(t)
	srv.Handle(func(req llmtest.Request) llmtest.Reply {
		n, _ := strconv.Atoi(number.FindStringSubmatch(string(req.Raw))[1])
		if n%2 == 0 {
			return llmtest.Reply{Text: "wrong", Usage: llmtest.Usage{Prompt: 100}}
		}
		return llmtest.Reply{Text: "A", Usage: llmtest.Usage{Prompt: 100}}
	})
	_, status, o := runUntilDecided(t, st, pipeline, dataset, a, srv.Env("sk-seq"))
	if status != runtime.StatusStopped || o.Test.Decision != DecidedWorse || o.Test.Fixed != 0 || o.Test.Broken != 8 {
		t.Fatalf("status %s, outcome %+v; want stopped, worse after 8 broken", status, o)
	}
	if o.ItemsRun != o.DecidedAfter || o.ItemsRun+o.ItemsSaved != 40 || o.ItemsSaved < 10 || !near(o.CostSavedUSD, float64(o.ItemsSaved)) {
		t.Fatalf("outcome %+v: want the items after the decision saved, at $1 each", o)
	}

	_, status, o = runUntilDecided(t, st, pipeline, dataset, a, env)
	if status != runtime.StatusCompleted || o.Test.Decision != Continue || o.ItemsRun != 40 || o.ItemsSaved != 0 || o.DecidedAfter != 0 {
		t.Fatalf("no change: status %s, outcome %+v; want every item run, undecided", status, o)
	}
}
