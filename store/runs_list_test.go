package store_test

import (
	"context"
	"os"
	"path/filepath"
	"testing"

	"github.com/flowrun/flowrun/runtime"
	"github.com/flowrun/flowrun/store"
	"github.com/flowrun/flowrun/store/storetest"
)

// TestRunListFoldsFiltersAndPages: 30 runs and 2 batches of 5 items list
// as 32 lines, each batch one line with its items counted; pages cut the
// list in SQL; the filters (pipeline, status, id prefix, input text,
// batch) select what they name, a batch by its items' inputs too.
func TestRunListFoldsFiltersAndPages(t *testing.T) {
	ctx := context.Background()
	st, err := store.Open(filepath.Join(t.TempDir(), "runs.db"))
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	if err := storetest.Fill(ctx, st, 30, 2, 5); err != nil {
		t.Fatal(err)
	}
	lines, total, err := st.RunList(ctx, store.RunQuery{Limit: 10}, store.ListOrder{})
	if err != nil || total != 32 || len(lines) != 10 {
		t.Fatalf("first page: %d lines of %d (%v)", len(lines), total, err)
	}
	// The batches were recorded last: newest first.
	b := lines[0].Batch
	if b == nil || b.ID != storetest.BatchID(1) || b.Items != 5 || b.Counts[runtime.StatusCompleted] != 3 || b.Counts[runtime.StatusFailed] != 2 {
		t.Fatalf("first line: %+v", lines[0])
	}
	last, _, _ := st.RunList(ctx, store.RunQuery{Limit: 10, Offset: 30}, store.ListOrder{})
	if len(last) != 2 || last[1].Run == nil || last[1].Run.ID != storetest.RunID(0) {
		t.Fatalf("last page: %+v", last)
	}
	for _, c := range []struct {
		name  string
		q     store.RunQuery
		total int
	}{
		{"pipeline", store.RunQuery{Pipeline: "alpha"}, 10 + 2},
		{"status", store.RunQuery{Status: runtime.StatusFailed}, 8},
		{"pipeline and status", store.RunQuery{Pipeline: "beta", Status: runtime.StatusStopped}, 2},
		{"id prefix", store.RunQuery{IDPrefix: "20260101T000000-run0001"}, 10},
		{"id prefix with LIKE characters", store.RunQuery{IDPrefix: "20260101T000000-run%"}, 0},
		{"input text", store.RunQuery{Text: "topic 2"}, 11},
		{"input text in a batch item", store.RunQuery{Text: "ITEM 1.4"}, 1},
		{"batch", store.RunQuery{Batch: storetest.BatchID(0)}, 5},
		{"batch and status", store.RunQuery{Batch: storetest.BatchID(0), Status: runtime.StatusFailed}, 2},
		{"batch items unfolded", store.RunQuery{BatchItems: true}, 40},
	} {
		_, total, err := st.RunList(ctx, c.q, store.ListOrder{})
		if err != nil || total != c.total {
			t.Errorf("%s: %d lines, want %d (%v)", c.name, total, c.total, err)
		}
	}
	cost, _, err := st.RunList(ctx, store.RunQuery{Limit: 1}, store.ListOrder{By: "cost"})
	if err != nil || cost[0].Batch == nil || cost[0].Batch.CostUSD < 0.004 {
		t.Fatalf("by cost, first: %+v (%v)", cost[0], err)
	}
}

// TestRunsMatchingPipelineFile: a pipeline file given by another path
// than the one its runs were started with (relative, with ./ or ..)
// matches them by its absolute path; a name or a file that is not here
// matches as given.
func TestRunsMatchingPipelineFile(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	st, err := store.Open(filepath.Join(dir, "runs.db"))
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	file := filepath.Join(dir, "flows", "p.yaml")
	if err := os.MkdirAll(filepath.Dir(file), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(file, []byte("version: 1\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := st.CreateRun(ctx, &store.Run{ID: "r1", Pipeline: "flows/p.yaml", PipelineAbs: file, PipelineName: "p", PipelineHash: "h"}); err != nil {
		t.Fatal(err)
	}
	wd, err := os.Getwd()
	if err != nil {
		t.Fatal(err)
	}
	relative, err := filepath.Rel(wd, file)
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		file string
		want int
	}{
		{dir + filepath.FromSlash("/flows/../flows/p.yaml"), 1},
		{relative, 1},
		{file, 1},
		{"p", 1},
		{"flows/p.yaml", 1}, // not a file here: matched as the path given
		{filepath.Join(dir, "other.yaml"), 0},
	} {
		_, total, err := st.RunsMatching(ctx, store.RunQuery{PipelineFile: c.file})
		if err != nil || total != c.want {
			t.Errorf("PipelineFile %q: %d runs, want %d (%v)", c.file, total, c.want, err)
		}
	}
}

// A child run (a judge's) is listed under the run it serves, never on its
// own, and "last" names the newest run that is no child.
func TestChildRunsAreListedUnderTheirRun(t *testing.T) {
	ctx := context.Background()
	s, err := store.Open(filepath.Join(t.TempDir(), "runs.db"))
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	for _, r := range []*store.Run{{ID: "item"}, {ID: "judge-1", ChildOf: "item"}, {ID: "judge-2", ChildOf: "item"}} {
		r.Pipeline, r.PipelineAbs, r.PipelineName = r.ID+".yaml", "/"+r.ID+".yaml", r.ID
		if err := s.CreateRun(ctx, r); err != nil {
			t.Fatal(err)
		}
	}
	lines, total, err := s.RunList(ctx, store.RunQuery{}, store.ListOrder{})
	if err != nil || total != 1 || len(lines) != 1 || lines[0].Run.ID != "item" {
		t.Fatalf("the runs list: %d lines of %d (%v), want the item's run alone", len(lines), total, err)
	}
	if last, err := s.FindRun(ctx, "last"); err != nil || last.ID != "item" {
		t.Fatalf("last: %v %v, want the item's run", last, err)
	}
	children, n, err := s.RunsMatching(ctx, store.RunQuery{ChildOf: "item"})
	if err != nil || n != 2 || children[0].ChildOf != "item" {
		t.Fatalf("the item's child runs: %d (%v)", n, err)
	}
}
