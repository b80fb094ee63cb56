// Package batchtest records batches in a real store for tests: items with
// known outcomes, scores, costs and durations, each item that ran backed
// by a real run with a timeline.
package batchtest

import (
	"context"
	"fmt"
	"path/filepath"
	"testing"
	"time"

	"github.com/flowrun/flowrun/errclass"
	"github.com/flowrun/flowrun/internal/browsertest"
	"github.com/flowrun/flowrun/runtime"
	"github.com/flowrun/flowrun/store"
	"github.com/flowrun/flowrun/tokens"
)

// OpenStore opens a new store in a temporary directory, closed when the
// test ends.
func OpenStore(t *testing.T) *store.Store {
	t.Helper()
	st, err := store.Open(filepath.Join(t.TempDir(), "flowrun.db"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	return st
}

// Keys are n keys: prefix01, prefix02...
func Keys(prefix string, n int) []string {
	out := make([]string, n)
	for i := range out {
		out[i] = fmt.Sprintf("%s%02d", prefix, i+1)
	}
	return out
}

// Record records batch id with one item per key, whose outcome is the
// same letter of pattern: P completed and passed, F completed and not
// passed, E failed (class model_error), S stopped, . pending. Item i
// costs scale*0.001*(i+1) USD and scale*100*(i+1) ms and 100*(i+1)
// tokens, and scores solved (the primary), exact (true for even i) and
// steps (i+1). Each item that ran has a real run in the store with a
// timeline of one llm node; fail, when set, is the error text of failed
// items and the reply of the others.
func Record(t *testing.T, st *store.Store, id string, keys []string, pattern string, scale float64, fail string) *store.Batch {
	t.Helper()
	return RecordWith(t, st, id, keys, pattern, scale, fail, nil)
}

// Dress changes item i of a batch Record records: its dataset fields
// before the batch is created, then its result and its run's outputs
// before they are recorded.
type Dress struct {
	Item   func(i int, fields map[string]any)
	Result func(i int, it *store.BatchItem, outputs map[string]any)
}

// RecordWith is Record with the items dressed; dress may be nil.
func RecordWith(t *testing.T, st *store.Store, id string, keys []string, pattern string, scale float64, fail string, dress *Dress) *store.Batch {
	t.Helper()
	ctx := context.Background()
	if len(keys) != len(pattern) {
		t.Fatalf("fixture %s: %d keys, %d outcomes", id, len(keys), len(pattern))
	}
	b := &store.Batch{ID: id, Pipeline: "pipelines/solve.yaml", PipelineName: "solve", Dataset: "tasks.jsonl",
		Settings: []byte(`{"metrics": ["solved", "exact", "steps"], "primary": "solved", "concurrency": 4}`)}
	items := make([]*store.BatchItem, len(keys))
	for i, k := range keys {
		items[i] = &store.BatchItem{Index: i, Key: k, Item: map[string]any{"id": k, "expected": i}}
		if dress != nil && dress.Item != nil {
			dress.Item(i, items[i].Item)
		}
	}
	if err := st.CreateBatch(ctx, b, items); err != nil {
		t.Fatal(err)
	}
	for i, outcome := range pattern {
		if outcome == '.' {
			continue
		}
		runID := fmt.Sprintf("%s-r%02d", id, i+1)
		it := &store.BatchItem{Batch: id, Index: i, Key: keys[i], CostUSD: scale * 0.001 * float64(i+1),
			Tokens: 100 * (i + 1), DurationMS: scale * 100 * float64(i+1)}
		switch outcome {
		case 'P', 'F':
			it.Status = runtime.StatusCompleted
			it.Scores = map[string]any{"solved": outcome == 'P', "exact": i%2 == 0, "steps": i + 1}
		case 'E':
			it.Status, it.Class, it.Error = runtime.StatusFailed, "model_error", "the model answered 500"
			if fail != "" {
				it.Error = fail
			}
		case 'S':
			it.Status, it.Class, it.Error = runtime.StatusStopped, "", "interrupted"
		}
		outputs := map[string]any{"answer": reply(it, fail)}
		if dress != nil && dress.Result != nil {
			dress.Result(i, it, outputs)
		}
		recordRun(t, st, runID, it, fail, outputs)
		if err := st.StartItem(ctx, id, i, 0, runID); err != nil {
			t.Fatal(err)
		}
		if err := st.FinishItem(ctx, it); err != nil {
			t.Fatal(err)
		}
	}
	if err := st.FinishBatch(ctx, id, runtime.StatusCompleted, ""); err != nil {
		t.Fatal(err)
	}
	got, err := st.Batch(ctx, id)
	if err != nil {
		t.Fatal(err)
	}
	return got
}

// recordRun records a run of one llm node with its events, as the
// runtime would.
func recordRun(t *testing.T, st *store.Store, runID string, it *store.BatchItem, fail string, outputs map[string]any) {
	t.Helper()
	ctx := context.Background()
	if err := st.CreateRun(ctx, &store.Run{ID: runID, Pipeline: "pipelines/solve.yaml", PipelineName: "solve",
		Inputs: map[string]any{"task": it.Key}}); err != nil {
		t.Fatal(err)
	}
	rec, err := st.Recorder(ctx, runID)
	if err != nil {
		t.Fatal(err)
	}
	reply := reply(it, fail)
	start := time.Now()
	at := func(ms float64) time.Time { return start.Add(time.Duration(ms * float64(time.Millisecond))) }
	d := it.DurationMS
	rec.Event(runtime.Event{Type: runtime.EventRunStarted, Run: runID, Time: start, Pipeline: "solve"})
	rec.Event(runtime.Event{Type: runtime.EventNodeStarted, Run: runID, Time: at(d * 0.05), Path: "solve", Node: "solve", Kind: "llm"})
	turn := &runtime.Turn{Model: "gpt-4.1-mini", Attempt: 1, Try: 1, LatencyMS: d * 0.8, CostUSD: it.CostUSD,
		Usage: &tokens.Usage{Total: it.Tokens}, Reply: map[string]any{"text": reply}}
	if it.Status == runtime.StatusFailed {
		turn.Reply, turn.Class, turn.Error = nil, errclass.Class(it.Class), it.Error
	}
	rec.Event(runtime.Event{Type: runtime.EventModelTurn, Run: runID, Time: at(d * 0.9), Path: "solve", Node: "solve", Turn: turn})
	end := runtime.Event{Type: runtime.EventNodeFinished, Run: runID, Time: at(d * 0.95), Path: "solve", Node: "solve", Kind: "llm", DurationMS: d * 0.9}
	if it.Status == runtime.StatusFailed {
		end.Type, end.Class, end.Error = runtime.EventNodeFailed, errclass.Class(it.Class), it.Error
	}
	rec.Event(end)
	rec.Event(runtime.Event{Type: runtime.EventRunFinished, Run: runID, Time: at(d), Status: it.Status, Error: it.Error})
	if err := rec.Flush(ctx); err != nil {
		t.Fatal(err)
	}
	if err := st.Finish(ctx, runID, store.Ending{Status: it.Status, Error: it.Error, CostUSD: it.CostUSD, Tokens: it.Tokens,
		Outputs: outputs}); err != nil {
		t.Fatal(err)
	}
}

// reply is the model's reply in an item's run: fail when given.
func reply(it *store.BatchItem, fail string) string {
	if fail != "" {
		return fail
	}
	return "The answer is " + it.Key
}

// ARC dresses items as ARC tasks: the dataset field expected is a 3x3
// grid, the outputs are a grid (right when the item passes, else with its
// centre cell wrong) and a two-line answer naming side, and a failing
// item's judge reasoning names the wrong cell.
func ARC(side string) *Dress {
	grid := func(i, wrong int) []any {
		rows := []any{}
		for r := range 3 {
			row := []any{}
			for c := range 3 {
				v := (i + r*3 + c) % 10
				if r == 1 && c == 1 {
					v = (v + wrong) % 10
				}
				row = append(row, float64(v))
			}
			rows = append(rows, row)
		}
		return rows
	}
	return &Dress{
		Item: func(i int, fields map[string]any) { fields["expected"] = grid(i, 0) },
		Result: func(i int, it *store.BatchItem, outputs map[string]any) {
			passed := it.Scores["solved"] == true
			wrong := 3
			if passed {
				wrong = 0
			}
			outputs["grid"] = grid(i, wrong)
			outputs["answer"] = "Rule: shift each colour by one.\nSide " + side + " of " + it.Key
			if !passed && it.Scores != nil {
				it.Reasoning = map[string]string{"reason": "the centre cell of " + it.Key + " is wrong"}
			}
		},
	}
}

// Browser is a tab of a headless Chromium that gives up after two
// minutes, closed when the test ends, or skips the test when there is none.
func Browser(t *testing.T) context.Context {
	t.Helper()
	ctx, cancel := context.WithTimeout(browsertest.Start(t, 1280, 1600), 2*time.Minute)
	t.Cleanup(cancel)
	return ctx
}
