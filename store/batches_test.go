package store

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"path/filepath"
	"slices"
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
	if err := s.StartItem(ctx, b.ID, 1, 0, "run-1"); err != nil {
		t.Fatal(err)
	}
	if err := s.StartItem(ctx, b.ID, 1, 0, "run-1"); err != nil {
		t.Fatalf("starting an item again with its own run: %v", err)
	}
	if err := s.StartItem(ctx, b.ID, 1, 0, "run-2"); err == nil {
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

// TestBatchItemRepeats checks an item run several times: one row per
// repeat, each with its own run and result, and that a database made
// before repeats existed keeps its items (as repeat 0) when it opens.
func TestBatchItemRepeats(t *testing.T) {
	ctx := context.Background()
	path := filepath.Join(t.TempDir(), "runs.db")
	old, err := sql.Open("sqlite", path)
	if err != nil {
		t.Fatal(err)
	}
	// The version before repeats: the migrations after it run on open.
	before := slices.IndexFunc(migrations, func(m string) bool { return strings.Contains(m, "CREATE TABLE batch_items_repeats") })
	stmts := []string{`CREATE TABLE schema_version (version INTEGER NOT NULL)`, fmt.Sprintf(`INSERT INTO schema_version VALUES (%d)`, before)}
	stmts = append(append(migrations[:before:before], stmts...),
		`INSERT INTO batches (id, pipeline, pipeline_abs, pipeline_name, pipeline_hash, dataset, dataset_hash, flags, status, started_at, updated_at)
			VALUES ('b-old', 'p.yaml', '/p.yaml', 'p', 'h', 'd.jsonl', 'dh', '{}', 'completed', '2026-01-01', '2026-01-01')`,
		`INSERT INTO batch_items (batch_id, idx, item_key, item, run_id, status, scores, updated_at)
			VALUES ('b-old', 0, 'line 1', '{"q":"one"}', 'run-old', 'completed', '{"pass":true}', '2026-01-01')`)
	for _, s := range stmts {
		if _, err := old.Exec(s); err != nil {
			t.Fatalf("%s: %v", s, err)
		}
	}
	old.Close()

	s, err := Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	kept, err := s.BatchItems(ctx, "b-old")
	if err != nil || len(kept) != 1 || kept[0].Run != "run-old" || kept[0].Repeat != 0 || kept[0].Scores["pass"] != true {
		t.Fatalf("the old item after the migration: %+v, %v", kept, err)
	}
	if ob, err := s.Batch(ctx, "b-old"); err != nil || ob.Label != "" || ob.PipelineName != "p" {
		t.Fatalf("the old batch after the migrations: %+v, %v", ob, err)
	}

	b := &Batch{ID: "b-rep", Pipeline: "p.yaml", PipelineAbs: "/p.yaml", PipelineName: "p", PipelineHash: "h", Dataset: "d", DatasetHash: "dh"}
	var rows []*BatchItem
	for r := range 3 {
		rows = append(rows, &BatchItem{Index: 0, Repeat: r, Key: "line 1", Item: map[string]any{"q": "one"}})
	}
	if err := s.CreateBatch(ctx, b, rows); err != nil {
		t.Fatal(err)
	}
	for r := range 3 {
		if err := s.StartItem(ctx, b.ID, 0, r, fmt.Sprintf("run-%d", r)); err != nil {
			t.Fatal(err)
		}
	}
	if err := s.FinishItem(ctx, &BatchItem{Batch: b.ID, Index: 0, Repeat: 1, Status: runtime.StatusCompleted, Scores: map[string]any{"pass": true}}); err != nil {
		t.Fatal(err)
	}
	got, err := s.BatchItems(ctx, b.ID)
	if err != nil || len(got) != 3 {
		t.Fatalf("items %+v, %v", got, err)
	}
	for r, it := range got {
		finished := it.Status == runtime.StatusCompleted
		if it.Repeat != r || it.Run != fmt.Sprintf("run-%d", r) || finished != (r == 1) {
			t.Fatalf("repeat %d: %+v", r, it)
		}
	}
}

// TestBatchLabel checks that a batch keeps the label and description it
// was created with, that LabelBatch replaces them, and that labelling a
// batch the store does not hold says so.
func TestBatchLabel(t *testing.T) {
	ctx := context.Background()
	s, err := Open(filepath.Join(t.TempDir(), "runs.db"))
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	b := &Batch{ID: "b-1", Pipeline: "p.yaml", Label: "shorter prompt", Description: "drops the examples"}
	if err := s.CreateBatch(ctx, b, nil); err != nil {
		t.Fatal(err)
	}
	got, err := s.Batch(ctx, "b-1")
	if err != nil || got.Label != "shorter prompt" || got.Description != "drops the examples" {
		t.Fatalf("created: %+v, %v", got, err)
	}
	if err := s.LabelBatch(ctx, "b-1", "baseline", ""); err != nil {
		t.Fatal(err)
	}
	list, err := s.Batches(ctx)
	if err != nil || len(list) != 1 || list[0].Label != "baseline" || list[0].Description != "" {
		t.Fatalf("relabelled: %+v, %v", list, err)
	}
	var nf *NotFoundError
	if err := s.LabelBatch(ctx, "b-2", "x", ""); !errors.As(err, &nf) {
		t.Fatalf("labelling a missing batch: %v", err)
	}
}
