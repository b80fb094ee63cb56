package eventview_test

import (
	"context"
	"path/filepath"
	"slices"
	"testing"
	"time"

	"github.com/flowrun/flowrun/eventview"
	"github.com/flowrun/flowrun/runtime"
	"github.com/flowrun/flowrun/store"
)

// TestReadRunListsAndDiffsTheSameCheckpoints: a run whose last
// checkpoint is still in its journal (a run in progress, or one killed),
// read through a read-only store as flowrun show reads it, lists that
// checkpoint and shows what it changed: the list and the state diffs come
// from one read.
func TestReadRunListsAndDiffsTheSameCheckpoints(t *testing.T) {
	ctx := context.Background()
	path := filepath.Join(t.TempDir(), "runs.db")
	w, err := store.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer w.Close()
	if err := w.CreateRun(ctx, &store.Run{ID: "r", Pipeline: "p.yaml", PipelineAbs: "/x/p.yaml", PipelineName: "p", PipelineHash: "h"}); err != nil {
		t.Fatal(err)
	}
	rec, err := w.Recorder(ctx, "r")
	if err != nil {
		t.Fatal(err)
	}
	if err := rec.Save(ctx, &runtime.Checkpoint{Path: "first", State: map[string]any{"a": 1}}); err != nil {
		t.Fatal(err)
	}
	if err := rec.Flush(ctx); err != nil {
		t.Fatal(err)
	}
	// Journaled only: the recorder is alive and has not flushed it.
	if err := rec.Save(ctx, &runtime.Checkpoint{Path: "second", State: map[string]any{"b": "two"}}); err != nil {
		t.Fatal(err)
	}
	ro, err := store.OpenReadOnly(path)
	if err != nil {
		t.Fatal(err)
	}
	defer ro.Close()
	r, err := ro.FindRun(ctx, "r")
	if err != nil {
		t.Fatal(err)
	}
	v, err := eventview.ReadRun(ctx, ro, r, nil, time.Now())
	if err != nil {
		t.Fatal(err)
	}
	var listed, stepped []string
	for _, c := range v.Checkpoints {
		listed = append(listed, c.Path)
	}
	for _, s := range v.Steps {
		stepped = append(stepped, s.Path)
	}
	if want := []string{"first", "second"}; !slices.Equal(listed, want) || !slices.Equal(stepped, want) {
		t.Fatalf("checkpoints %v, steps %v: want both %v", listed, stepped, want)
	}
	step, ok := eventview.StepAt(v.Steps, v.Checkpoints[1].Seq)
	if !ok || len(step.Changes) != 1 || step.State["b"] != "two" || step.State["a"] != 1 {
		t.Fatalf("the journaled checkpoint's step: %+v (found %v)", step, ok)
	}
}
