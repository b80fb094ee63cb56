package batch

import (
	"context"
	"fmt"
	"strings"
	"testing"

	"github.com/flowrun/flowrun/batch/batchtest"
	"github.com/flowrun/flowrun/store"
)

// TestUnifiedDiff checks a file's diff: hunks with their line numbers and
// two lines of context, a one-line file diffed by lines, and a long diff
// cut at maxChangeLines with the rest counted.
func TestUnifiedDiff(t *testing.T) {
	was := "a\nb\nc\nd\ne\nf\ng\nh\ni\nj\nk\nl\n"
	now := "a\nb\nc\nD\ne\nf\ng\nh\ni\nj\nk\nl\nm\n"
	got, more := unifiedDiff(was, now)
	want := []string{"@@ -2,5 +2,5 @@", " b", " c", "-d", "+D", " e", " f", "@@ -11,2 +11,3 @@", " k", " l", "+m"}
	if strings.Join(got, "\n") != strings.Join(want, "\n") || more != 0 {
		t.Errorf("diff:\n%s\nwant:\n%s (more %d)", strings.Join(got, "\n"), strings.Join(want, "\n"), more)
	}
	if got, _ := unifiedDiff("one two", "one three"); strings.Join(got, "|") != "@@ -1,1 +1,1 @@|-one two|+one three" {
		t.Errorf("a one-line file: %q", got)
	}
	if got, _ := unifiedDiff("", "new\n"); strings.Join(got, "|") != "@@ -0,0 +1,1 @@|+new" {
		t.Errorf("a file read only by B: %q", got)
	}
	var long strings.Builder
	for i := range 100 {
		fmt.Fprintf(&long, "line %d\n", i)
	}
	got, more = unifiedDiff("", long.String())
	if len(got) != maxChangeLines || more != 101-maxChangeLines {
		t.Errorf("a 100-line addition: %d lines shown, %d more", len(got), more)
	}
}

// TestFileChanges checks which files a comparison lists: a changed
// prompt, a file only one load read, the pipeline file under another name
// diffed with the old one, and an unchanged schema left out.
func TestFileChanges(t *testing.T) {
	a := map[string]string{"tickets.yaml": "name: t\n", "prompts/classify.md": "Label it.\n", "schema.json": "{}\n", "old.md": "x\n"}
	b := map[string]string{"tickets_v2.yaml": "name: t2\n", "prompts/classify.md": "Label it, briefly.\n", "schema.json": "{}\n", "new.md": "y\n"}
	got := fileChanges(a, b, "tickets.yaml", "tickets_v2.yaml")
	var names []string
	for _, f := range got {
		names = append(names, f.Was+">"+f.Path+":"+f.Status)
	}
	want := "tickets.yaml>tickets_v2.yaml:changed >new.md:added >prompts/classify.md:changed >old.md:removed"
	if strings.Join(names, " ") != want {
		t.Fatalf("files %q, want %q", strings.Join(names, " "), want)
	}
	if l := strings.Join(got[2].Lines, "|"); l != "@@ -1,1 +1,1 @@|-Label it.|+Label it, briefly." {
		t.Errorf("the prompt's diff: %q", l)
	}
	if same := fileChanges(a, a, "tickets.yaml", "tickets.yaml"); len(same) != 0 {
		t.Errorf("a pipeline against itself: %+v", same)
	}
}

// recordRan records batch id over dataset with settings, whose one item
// ran a pipeline that read files.
func recordRan(t *testing.T, st *store.Store, id, dataset, settings string, files map[string]string) *store.Batch {
	t.Helper()
	ctx := context.Background()
	b := &store.Batch{ID: id, Pipeline: "tickets.yaml", PipelineAbs: "/p/tickets.yaml", PipelineName: "tickets", Dataset: dataset,
		DatasetHash: "0123456789abcdef", Settings: []byte(settings)}
	if err := st.CreateBatch(ctx, b, []*store.BatchItem{{Key: "t1", Item: map[string]any{"q": 1}}}); err != nil {
		t.Fatal(err)
	}
	if files != nil {
		run := &store.Run{ID: id + "-r1", Pipeline: "tickets.yaml", PipelineName: "tickets", PipelineFiles: files, Inputs: map[string]any{}}
		if err := st.CreateRun(ctx, run); err != nil {
			t.Fatal(err)
		}
		if err := st.StartItem(ctx, id, 0, 0, run.ID); err != nil {
			t.Fatal(err)
		}
	}
	got, err := st.Batch(ctx, id)
	if err != nil {
		t.Fatal(err)
	}
	return got
}

// TestChangesBetween checks the changes two recorded batches show: their
// items' runs' files and the settings that differ, nothing for a batch
// against itself, and a batch whose items never ran named as unrecorded.
func TestChangesBetween(t *testing.T) {
	ctx := context.Background()
	st := batchtest.OpenStore(t)
	files := map[string]string{"tickets.yaml": "name: tickets\n", "prompt.md": "Label the ticket.\n"}
	a := recordRan(t, st, "b1", "d.jsonl", `{"model":["fast=small"]}`, files)
	b := recordRan(t, st, "b2", "d.jsonl", `{"model":["fast=large"]}`,
		map[string]string{"tickets.yaml": "name: tickets\n", "prompt.md": "Label the ticket in one word.\n"})
	c, err := ChangesBetween(ctx, st, a, b)
	if err != nil {
		t.Fatal(err)
	}
	if len(c.Files) != 1 || c.Files[0].Path != "prompt.md" || !strings.Contains(strings.Join(c.Files[0].Lines, "\n"), "+Label the ticket in one word.") {
		t.Errorf("files: %+v", c.Files)
	}
	if len(c.Settings) != 1 || c.Settings[0] != (SettingChange{"model overrides", "fast=small", "fast=large"}) {
		t.Errorf("settings: %+v", c.Settings)
	}
	if same, err := ChangesBetween(ctx, st, a, a); err != nil || !same.Same() {
		t.Errorf("a batch against itself: %+v, %v", same, err)
	}
	pending := recordRan(t, st, "b3", "d.jsonl", `{"model":["fast=small"]}`, nil)
	if c, err = ChangesBetween(ctx, st, a, pending); err != nil || c.Same() || strings.Join(c.Unrecorded, ",") != "B" {
		t.Errorf("against a batch no item of which ran: %+v, %v", c, err)
	}
	html := string(ChangesHTML(c))
	if !strings.Contains(html, "B: no item's run recorded its pipeline files") {
		t.Errorf("the unrecorded side in HTML: %s", html)
	}
}

// TestPrevious checks the default baseline: the batch before, of the
// same pipeline over the same dataset, skipping one over another dataset
// and any batch begun later.
func TestPrevious(t *testing.T) {
	ctx := context.Background()
	st := batchtest.OpenStore(t)
	first := recordRan(t, st, "b1", "d.jsonl", `{}`, nil)
	recordRan(t, st, "b2", "other.jsonl", `{}`, nil)
	third := recordRan(t, st, "b3", "d.jsonl", `{}`, nil)
	recordRan(t, st, "b4", "d.jsonl", `{}`, nil)
	if p, err := Previous(ctx, st, third); err != nil || p == nil || p.ID != first.ID {
		t.Errorf("the batch before b3: %+v, %v", p, err)
	}
	if p, err := Previous(ctx, st, first); err != nil || p != nil {
		t.Errorf("the batch before the first: %+v, %v", p, err)
	}
}
