package batchtext

import (
	"context"
	"strings"
	"testing"

	"github.com/flowrun/flowrun/batch"
	"github.com/flowrun/flowrun/batch/batchtest"
)

// TestWriteComparison checks a comparison of two recorded batches: the
// pass-rate change, the counts of fixed and broken items, and the lists
// of their keys wrapped to 80 columns with every key kept.
func TestWriteComparison(t *testing.T) {
	ctx := context.Background()
	st := batchtest.OpenStore(t)
	keys := batchtest.Keys("item-with-a-long-key-", 24)
	a := batchtest.Record(t, st, "b20261126T100000-aaaa", keys, strings.Repeat("F", 20)+"PPPP", 1, "")
	b := batchtest.Record(t, st, "b20261126T110000-bbbb", keys, strings.Repeat("P", 20)+"FFPP", 1, "")
	c, err := batch.CompareBatches(ctx, st, a, b)
	if err != nil {
		t.Fatal(err)
	}
	var w strings.Builder
	WriteComparison(&w, c)
	out := w.String()
	hasLines(t, out,
		"pass rate  16.7% -> 91.7%  (+75.0 points)",
		"items      20 fixed, 2 broken, 2 same (2 passed in both, 0 failed in both)",
		"fixed (failed in A, passed in B): 20",
		"broken (passed in A, failed in B): 2",
		"  item-with-a-long-key-21 item-with-a-long-key-22",
	)
	fixed := out[strings.Index(out, "fixed (failed in A"):strings.Index(out, "broken (passed in A")]
	for _, l := range strings.Split(strings.TrimSpace(fixed), "\n")[1:] {
		if len(l) > 80 {
			t.Errorf("key line of %d columns: %q", len(l), l)
		}
	}
	for _, k := range keys[:20] {
		if !strings.Contains(fixed, " "+k+"\n") && !strings.Contains(fixed, " "+k+" ") {
			t.Errorf("fixed key %s not listed in\n%s", k, fixed)
		}
	}

	w.Reset()
	WriteSideBySide(&w, c, 60)
	for _, l := range strings.Split(w.String(), "\n") {
		if strings.HasPrefix(l, "    A  ") || strings.HasPrefix(l, "    B  ") {
			if n := len([]rune(l)); n > 60 {
				t.Errorf("side line of %d runes, want at most 60: %q", n, l)
			}
		}
	}
	if n := strings.Count(w.String(), "\n    A  "); n != 22 {
		t.Errorf("%d items side by side, want the 22 fixed and broken:\n%s", n, w.String())
	}
}

// TestWritePairwise checks the judge's verdict line, one line per item
// saying which output was shown first, and the items not judged.
func TestWritePairwise(t *testing.T) {
	var w strings.Builder
	WritePairwise(&w, nil)
	if w.Len() != 0 {
		t.Fatalf("no judge asked, yet %q", w.String())
	}
	WritePairwise(&w, &batch.Pairwise{Model: "gpt-4.1", Seed: 25, WinsA: 1, WinsB: 3, PValue: 0.625, Better: "b", CostUSD: 0.01,
		Items:   []batch.PairVerdict{{Key: "k1", Winner: "b", BFirst: true, Reasoning: "B is right\nA is not"}},
		Skipped: []string{"k5", "k6"}})
	want := "\njudge gpt-4.1 (order drawn from seed 25): A 1, B 3, tie 0; sign test p = 0.625: B is better; $0.01\n" +
		"  k1                       B    (B shown first) B is right\n" +
		"  not judged (not completed in both): k5, k6\n"
	if w.String() != want {
		t.Errorf("got\n%q\nwant\n%q", w.String(), want)
	}
}

// TestWriteSweep checks the sweep table: a variant without a pass rate
// shows a dash, and each pair its change with its interval.
func TestWriteSweep(t *testing.T) {
	var w strings.Builder
	WriteSweep(&w, &batch.Sweep{
		Variants: []batch.SweepResult{{Label: "m=a", Batch: "b1", PassRate: &batch.Rate{Rate: 0.5, Low: 0.25, High: 0.75}}, {Label: "m=b", Batch: "b2"}},
		Pairs:    []batch.SweepPair{{A: "m=a", B: "m=b", Delta: 0.25, Interval: batch.Interval{Low: -0.1, High: 0.6}, Fixed: 2, Broken: 1, MidPValue: 0.5}}})
	hasLines(t, w.String(),
		"sweep: 2 variants",
		"  m=a                                b1                         50.0% (25.0%-75.0%)                    $0         $0        0s",
		"  m=b                                b2                         -                                      $0         $0        0s",
		"  m=a -> m=b: +25.0 points (-10.0 to +60.0), 2 fixed, 1 broken, McNemar mid-p 0.5",
	)
}

// TestWriteChanges checks what a comparison says first: one line when
// nothing changed; else each file's diff lines with the fold of those cut,
// the pipeline file's old name, a side with no recorded files, and each
// setting that differs.
func TestWriteChanges(t *testing.T) {
	var w strings.Builder
	WriteChanges(&w, &batch.PipelineChanges{})
	if got := strings.TrimSpace(w.String()); got != "changes    none: same pipeline, same files, same settings" {
		t.Errorf("no change: %q", got)
	}
	w.Reset()
	WriteChanges(&w, &batch.PipelineChanges{
		Files: []batch.FileChange{
			{Path: "qa_v2.yaml", Was: "qa.yaml", Status: "changed", Lines: []string{"@@ -1,1 +1,1 @@", "-name: qa", "+name: qa2"}},
			{Path: "prompt.md", Status: "added", Lines: []string{"@@ -0,0 +1,40 @@", "+line 1"}, More: 39},
		},
		Settings: []batch.SettingChange{{Name: "model overrides", A: "none", B: "default=gpt-4.1"}},
	})
	hasLines(t, w.String(),
		"changes from A to B:",
		"  qa.yaml -> qa_v2.yaml (changed)",
		"    -name: qa",
		"    +name: qa2",
		"  prompt.md (added)",
		"    … 39 more lines",
		"  model overrides  none -> default=gpt-4.1",
	)
	w.Reset()
	WriteChanges(&w, &batch.PipelineChanges{Settings: []batch.SettingChange{{Name: "repeat", A: "1", B: "3"}}, Unrecorded: []string{"A"}})
	hasLines(t, w.String(), "  A: no item's run recorded its pipeline files, so they are not compared", "  repeat           1 -> 3")
	if strings.Contains(w.String(), "same pipeline") {
		t.Errorf("an unrecorded side reads as the same pipeline:\n%s", w.String())
	}
}
