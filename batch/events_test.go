package batch

import (
	"context"
	"testing"
	"time"

	"github.com/flowrun/flowrun/batch/batchtest"
	"github.com/flowrun/flowrun/jsonvalue"
	"github.com/flowrun/flowrun/runtime"
	"github.com/flowrun/flowrun/store"
)

// sameJSON fails unless got and want marshal to the same bytes.
func sameJSON(t *testing.T, got, want any) {
	t.Helper()
	g, err := jsonvalue.Marshal(got)
	if err != nil {
		t.Fatal(err)
	}
	w, err := jsonvalue.Marshal(want)
	if err != nil {
		t.Fatal(err)
	}
	if string(g) != string(w) {
		t.Errorf("event\n%s\nwant the bytes of the map\n%s", g, w)
	}
}

// TestItemEventBytes checks that an item_finished event is byte for byte
// the JSON object flowrun batch --json printed when it built a map: the
// same fields, keys in name order.
func TestItemEventBytes(t *testing.T) {
	it := &store.BatchItem{Index: 3, Key: "line 4", Run: "r1", Status: runtime.StatusFailed, Scores: map[string]any{"exact": false},
		Error: "model: boom", Class: "model_error", CostUSD: 0.25, Tokens: 120, DurationMS: 21.5}
	p := Progress{Item: it, Done: 4, Total: 9, Started: time.Now()}
	sameJSON(t, NewItemEvent("b1", p), map[string]any{"type": "item_finished", "batch": "b1", "index": 3, "key": "line 4",
		"run": "r1", "status": runtime.StatusFailed, "scores": map[string]any{"exact": false}, "error": "model: boom", "class": "model_error",
		"cost_usd": 0.25, "tokens": 120, "duration_ms": 21.5, "done": 4, "total": 9})
}

// TestFinishedEventBytes checks a batch_finished event against the map
// flowrun batch --json built, for a batch with a pass/fail metric
// (passed and pass_rate present) and one without (absent).
func TestFinishedEventBytes(t *testing.T) {
	ctx := context.Background()
	st := batchtest.OpenStore(t)
	b := batchtest.Record(t, st, "b20261126T100000-aaaa", batchtest.Keys("t", 5), "PPFE.", 1, "")
	rows, err := st.BatchItems(ctx, b.ID)
	if err != nil {
		t.Fatal(err)
	}
	s := Ended(b, runtime.StatusStopped, "cost limit", rows)
	if s.Status != runtime.StatusStopped || s.Reason != "cost limit" || b.Reason == "cost limit" {
		t.Fatalf("ended summary %s %q, want stopped by the cost limit, the record left as it was", s.Status, s.Reason)
	}
	want := map[string]any{"type": "batch_finished", "batch": b.ID, "status": runtime.StatusStopped, "reason": "cost limit",
		"items": 5, "completed": 3, "failed": 1, "pending": 1, "primary": "solved", "metrics": s.Metrics,
		"cost_usd": s.CostUSD, "tokens": s.Tokens, "failures": map[string]int{"model_error": 1},
		"passed": 2, "pass_rate": s.PassRate.Rate}
	sameJSON(t, NewFinishedEvent(s), want)

	s.PassRate = nil
	delete(want, "passed")
	delete(want, "pass_rate")
	sameJSON(t, NewFinishedEvent(s), want)
}

// TestSweepEventBytes checks a sweep_finished event against the map
// flowrun batch --json built.
func TestSweepEventBytes(t *testing.T) {
	sw := &Sweep{Variants: []SweepResult{{Label: "a", Batch: "b1"}}, Pairs: []SweepPair{{A: "a", B: "b", Fixed: 1}}}
	sameJSON(t, NewSweepEvent(sw), map[string]any{"type": "sweep_finished", "variants": sw.Variants, "pairs": sw.Pairs})
}
