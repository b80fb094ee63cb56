package store

import (
	"context"
	"path/filepath"
	"strings"
	"testing"

	"github.com/flowrun/flowrun/runtime"
)

// TestBatchRecords checks a batch's life in the store: its items start
// pending in dataset order, keep the run they were first given, have one
// result however often it is recorded, and the batch is found by an
// unambiguous prefix.
func TestBatchRecords(t *testing.T) {
	ctx := context.Background()
	s, err := Open(filepath.Join(t.TempDir(), "runs.db"))
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	b := &Batch{ID: "b-20261122-aaaa", Pipeline: "p.yaml", PipelineAbs: "/x/p.yaml", PipelineName: "p", PipelineHash: "h",
		Dataset: "d.jsonl", DatasetHash: "dh", Settings: []byte(`{"concurrency":8}`)}
	items := []*BatchItem{
		{Index: 0, Key: "line 1", Item: map[string]any{"q": "one", "expected": 1}},
		{Index: 1, Key: "line 2", Item: map[string]any{"q": "two", "expected": 2}},
	}
	if err := s.CreateBatch(ctx, b, items); err != nil {
		t.Fatal(err)
	}
	if err := s.CreateBatch(ctx, &Batch{ID: "b-20261122-aaab"}, nil); err != nil {
		t.Fatal(err)
	}
	if _, err := s.Batch(ctx, "b-2026"); err == nil || !strings.Contains(err.Error(), "ambiguous") {
		t.Fatalf("an ambiguous prefix: %v", err)
	}
	got, err := s.Batch(ctx, "b-20261122-aaaa")
	if err != nil || string(got.Settings) != `{"concurrency":8}` || got.Status != runtime.StatusRunning {
		t.Fatalf("batch %+v, %v", got, err)
	}
	if err := s.StartItem(ctx, b.ID, 1, "run-1"); err != nil {
		t.Fatal(err)
	}
	if err := s.StartItem(ctx, b.ID, 1, "run-1"); err != nil {
		t.Fatalf("starting an item again with its own run: %v", err)
	}
	if err := s.StartItem(ctx, b.ID, 1, "run-2"); err == nil {
		t.Fatal("an item took a second run")
	}
	done := &BatchItem{Batch: b.ID, Index: 1, Key: "line 2", Status: "completed", Scores: map[string]any{"exact": true}, CostUSD: 0.5, Tokens: 10}
	for range 2 {
		if err := s.FinishItem(ctx, done); err != nil {
			t.Fatal(err)
		}
	}
	all, err := s.BatchItems(ctx, b.ID)
	if err != nil || len(all) != 2 {
		t.Fatalf("items %v, %v", all, err)
	}
	if all[0].Status != ItemPending || all[0].Item["q"] != "one" || all[1].Run != "run-1" || all[1].Scores["exact"] != true || all[1].Tokens != 10 {
		t.Fatalf("items %+v %+v", all[0], all[1])
	}
	if err := s.FinishBatch(ctx, b.ID, "stopped", "max_cost_usd"); err != nil {
		t.Fatal(err)
	}
	if err := s.ClaimBatch(ctx, b.ID); err != nil {
		t.Fatal(err)
	}
	list, _ := s.Batches(ctx)
	if len(list) != 2 {
		t.Fatalf("%d batches", len(list))
	}
}
