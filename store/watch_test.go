package store_test

import (
	"context"
	"errors"
	"testing"

	"github.com/flowrun/flowrun/runtime"
	"github.com/flowrun/flowrun/store"
)

// Lists and the status a watcher polls read runs without their
// pipelines' source files; Run reads them, and all three agree on the rest.
func TestListsLeaveOutPipelineSources(t *testing.T) {
	ctx := context.Background()
	s := open(t)
	newRun(t, s, "r1")
	whole, err := s.Run(ctx, "r1")
	if err != nil || whole.PipelineSrc != "src" {
		t.Fatalf("Run: %+v %v, want its source", whole, err)
	}
	runs, err := s.Runs(ctx)
	if err != nil || len(runs) != 1 {
		t.Fatalf("Runs: %v %v", runs, err)
	}
	if r := runs[0]; r.PipelineSrc != "" || r.PipelineFiles != nil || r.ID != "r1" || r.Status != whole.Status || r.Inputs["n"] != whole.Inputs["n"] {
		t.Errorf("listed %+v, want %+v without its sources", r, whole)
	}
	if st, started, err := s.Status(ctx, "r1"); err != nil || st != runtime.StatusRunning || !started.Equal(whole.Started) {
		t.Errorf("Status: %q %v %v, want running since %v", st, started, err, whole.Started)
	}
	if _, _, err := s.Status(ctx, "r2"); !errors.Is(err, store.ErrNotFound) {
		t.Errorf("Status of an unknown run: %v, want ErrNotFound", err)
	}
}

// TestMarkMovesWhenAnItemIsRated: a rating, first or again, moves the
// mark that live batch pages poll, so a rating made in another tab or by
// flowrun batch rate reaches an open page.
func TestMarkMovesWhenAnItemIsRated(t *testing.T) {
	ctx := context.Background()
	s := open(t)
	b := &store.Batch{ID: "b1", Pipeline: "p.yaml", Dataset: "d.jsonl"}
	if err := s.CreateBatch(ctx, b, []*store.BatchItem{{Index: 0, Key: "task-1", Item: map[string]any{"q": "one"}}}); err != nil {
		t.Fatal(err)
	}
	last, err := s.Mark(ctx)
	if err != nil {
		t.Fatal(err)
	}
	for _, pass := range []bool{true, false} {
		if err := s.Rate(ctx, &store.Rating{Batch: b.ID, Key: "task-1", Pass: pass}); err != nil {
			t.Fatal(err)
		}
		m, err := s.Mark(ctx)
		if err != nil || m == last {
			t.Fatalf("after rating pass=%v the mark is %q, as before (%v)", pass, m, err)
		}
		last = m
	}
}
