package flowtest

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/flowrun/flowrun/runtime"
	"github.com/flowrun/flowrun/sandbox/sandboxtest"
	"github.com/flowrun/flowrun/store"
)

// completedCase runs testdata/fromrun/review.yaml to completion.
const completedCase = `cases:
  - name: source
    inputs: {topic: owls}
    mocks:
      write: {text: "x"}
      count: {output: {ok: true, result: 1}}
      judge: {finish: {name: verdict, args: {ok: true}}}
    answers: {approve: true}
    expect: {status: completed}
`

// TestFromStoredRun: a run read back from a real store becomes a case,
// beside its pipeline, that loads and passes; a run still running is
// refused with why, and an unknown one is not found.
func TestFromStoredRun(t *testing.T) {
	sandboxtest.NeedPython(t)
	ctx := context.Background()
	dir, rec := recordCase(t, completedCase)
	if !rec.Pass {
		t.Fatalf("source case: %s %s %s", rec.Status, rec.Missing, strings.Join(rec.Problems, "\n"))
	}
	st, err := store.Open(filepath.Join(dir, "runs.db"))
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	abs := filepath.Join(dir, "review.yaml")
	src, err := os.ReadFile(abs)
	if err != nil {
		t.Fatal(err)
	}
	if err := st.CreateRun(ctx, &store.Run{ID: "r1", Pipeline: abs, PipelineAbs: abs, PipelineName: "review", PipelineHash: "h",
		PipelineSrc: string(src), Inputs: rec.Case.Inputs}); err != nil {
		t.Fatal(err)
	}
	recorder, err := st.Recorder(ctx, "r1")
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range rec.Events {
		recorder.Event(e)
	}
	if err := recorder.Flush(ctx); err != nil {
		t.Fatal(err)
	}
	testFile := filepath.Join(dir, "stored.test.yaml")
	if _, _, err := FromStoredRun(ctx, st, "r1", testFile, nil); err == nil || !strings.Contains(err.Error(), "still running") {
		t.Fatalf("a running run: %v", err)
	}
	if err := st.Finish(ctx, "r1", store.Ending{Status: runtime.StatusCompleted}); err != nil {
		t.Fatal(err)
	}
	if r, _, err := FromStoredRun(ctx, st, "nope", testFile, nil); r != nil || !errors.Is(err, store.ErrNotFound) {
		t.Fatalf("an unknown run: %v, %v", r, err)
	}
	r, b, err := FromStoredRun(ctx, st, "last", testFile, nil)
	if err != nil || r.ID != "r1" {
		t.Fatalf("run %v: %v", r, err)
	}
	if err := os.WriteFile(testFile, b, 0o644); err != nil {
		t.Fatal(err)
	}
	f, ds := Load(testFile)
	if len(ds) > 0 {
		t.Fatalf("the case does not load: %s\n%s", ds, b)
	}
	if res := testRunner(t).Run(ctx, f, f.Cases[0]); !res.Pass {
		t.Fatalf("the case fails: %s\n%s", strings.Join(res.Problems, "\n"), b)
	}
}

// TestCoverageByFileAndJUnitFile: each file's coverage counts the results
// of its own cases only; the JUnit file holds every case, and a path that
// cannot be created is an error naming it.
func TestCoverageByFileAndJUnitFile(t *testing.T) {
	sandboxtest.NeedPython(t)
	_, rec := recordCase(t, completedCase)
	other := &File{Path: "other.test.yaml", Pipeline: rec.File.Pipeline}
	covs := CoverageByFile([]*File{rec.File, other}, []*Result{rec})
	if len(covs) != 2 {
		t.Fatalf("%d coverages for 2 files", len(covs))
	}
	if covered, total := covs[0].Counts(); covered == 0 || total == 0 {
		t.Errorf("the file run: %d of %d covered", covered, total)
	}
	if covered, _ := covs[1].Counts(); covered != 0 {
		t.Errorf("a file with no results: %d covered", covered)
	}
	path := filepath.Join(t.TempDir(), "junit.xml")
	if err := WriteJUnitFile(path, []*Result{rec}); err != nil {
		t.Fatal(err)
	}
	if b, err := os.ReadFile(path); err != nil || !strings.Contains(string(b), `name="source"`) {
		t.Errorf("junit file: %v\n%s", err, b)
	}
	bad := filepath.Join(path, "under-a-file.xml")
	if err := WriteJUnitFile(bad, []*Result{rec}); err == nil || !strings.Contains(err.Error(), bad) {
		t.Errorf("an unwritable path: %v", err)
	}
}

// A case of a fork or of a run resumed with edits restores the
// checkpoints it went on from; FromStoredRun refuses, saying why, when
// it cannot tell or find them rather than write a case that never
// passes: a fork whose store lacks its checkpoints, and an edited resume
// recorded before run_started said where it went on from.
func TestFromStoredRunRefusesWhatACaseCannotReplay(t *testing.T) {
	ctx := context.Background()
	st, err := store.Open(filepath.Join(t.TempDir(), "runs.db"))
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	src := "version: 1\nname: p\nstate: {notes: \"\"}\nnodes:\n  - id: keep\n    set: {notes: '\"x\"'}\n"
	for _, r := range []*store.Run{{ID: "parent"}, {ID: "fork", ParentRun: "parent", ParentSeq: 2}, {ID: "edited"}} {
		r.Pipeline, r.PipelineAbs, r.PipelineName, r.PipelineSrc = "p.yaml", "/p.yaml", "p", src
		if err := st.CreateRun(ctx, r); err != nil {
			t.Fatal(err)
		}
		rec, err := st.Recorder(ctx, r.ID)
		if err != nil {
			t.Fatal(err)
		}
		rec.Event(runtime.Event{Type: runtime.EventRunStarted, Run: r.ID})
		if r.ID == "edited" {
			rec.Event(runtime.Event{Type: runtime.EventRunStarted, Run: r.ID, Edits: []runtime.Edit{{Key: "state.notes", New: "changed"}}})
		}
		rec.Event(runtime.Event{Type: runtime.EventRunFinished, Run: r.ID, Status: runtime.StatusCompleted})
		if err := rec.Flush(ctx); err != nil {
			t.Fatal(err)
		}
		if err := st.Finish(ctx, r.ID, store.Ending{Status: runtime.StatusCompleted}); err != nil {
			t.Fatal(err)
		}
	}
	for id, want := range map[string]string{
		"fork":   "run fork went on from checkpoint 2, which its store no longer holds",
		"edited": "run edited went on with edited values (state.notes) at a resume that did not record the checkpoint it went on from",
	} {
		if _, b, err := FromStoredRun(ctx, st, id, filepath.Join(t.TempDir(), "x.test.yaml"), nil); err == nil || !strings.Contains(err.Error(), want) || b != nil {
			t.Errorf("%s: %v, want a refusal saying %q", id, err, want)
		}
	}
}
