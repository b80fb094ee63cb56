package batchtext

import (
	"context"
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/flowrun/flowrun/batch"
	"github.com/flowrun/flowrun/batch/batchtest"
	"github.com/flowrun/flowrun/runtime"
)

// summaryOf records a batch with the outcomes of pattern (see
// batchtest.Record) and reads its detailed summary.
func summaryOf(t *testing.T, id, pattern string) *batch.Summary {
	t.Helper()
	st := batchtest.OpenStore(t)
	b := batchtest.Record(t, st, id, batchtest.Keys("t", len(pattern)), pattern, 1, "the model gave up\nafter three tries")
	s, err := batch.SummarizeDetailed(context.Background(), st, b)
	if err != nil {
		t.Fatal(err)
	}
	return s
}

// hasLines fails unless every line of want is a line of text.
func hasLines(t *testing.T, text string, want ...string) {
	t.Helper()
	lines := strings.Split(text, "\n")
	for _, w := range want {
		found := false
		for _, l := range lines {
			found = found || l == w
		}
		if !found {
			t.Errorf("no line %q in\n%s", w, text)
		}
	}
}

// TestWriteSummary checks the summary's figures as lines, the failure
// classes with the first line of an error, and the item table: a header,
// one line per item within the width, a failed item's error in its last
// column.
func TestWriteSummary(t *testing.T) {
	s := summaryOf(t, "b20261126T100000-aaaa", "PPFE.")
	var b strings.Builder
	WriteSummary(&b, s, 100)
	out := b.String()
	hasLines(t, out,
		"items      5: 3 completed, 1 failed, 0 stopped, 0 waiting, 1 pending",
		"cost       $0.01 total, $0.0025 per item (mean)",
		"tokens     1000",
	)
	for _, want := range []string{
		"pass rate  50.0% (2/4), 95% interval ",
		" (solved) over the 4 of 5 items that finished\n",
		"\nfailures by class:\n  model_error           1  t04: the model gave up\n",
		"OUTPUT OR ERROR\n",
		"t04  failed                           $0.004  400     400.0ms   model_error: the model gave up⏎… +12\n",
	} {
		if !strings.Contains(out, want) {
			t.Errorf("no %q in\n%s", want, out)
		}
	}
	table := out[strings.LastIndex(out, "\n\n")+2:]
	if lines := strings.Split(strings.TrimSuffix(table, "\n"), "\n"); len(lines) != 6 {
		t.Errorf("item table of %d lines, want a header and 5 items:\n%s", len(lines), table)
	} else {
		for _, l := range lines {
			if utf8.RuneCountInString(l) > 100 {
				t.Errorf("line wider than 100 columns: %q", l)
			}
		}
	}
}

// TestWriteEnded checks the totals printed when a batch's run ends: the
// items without a result, and each metric with the items it is over.
func TestWriteEnded(t *testing.T) {
	s := summaryOf(t, "b20261126T100000-bbbb", "PFE.")
	s.Status = runtime.StatusStopped
	var b strings.Builder
	WriteEnded(&b, s)
	out := b.String()
	if !strings.HasPrefix(out, "batch b20261126T100000-bbbb stopped: 4 items, 2 completed, 1 failed, 1 without a result; $0.006, 600 tokens\n") {
		t.Errorf("first line of\n%s", out)
	}
	for _, want := range []string{"  solved                33.3%  1/3 (pass rate) over the 3 of 4 items that finished\n", "  steps                mean 1.5 over 2 items\n"} {
		if !strings.Contains(out, want) {
			t.Errorf("no %q in\n%s", want, out)
		}
	}
}

// TestWriteList checks the list of batches: a header, then two lines a
// batch, a long pipeline and dataset clipped at the start to keep the
// file names.
func TestWriteList(t *testing.T) {
	s := summaryOf(t, "b20261126T100000-cccc", "PF")
	s.Pipeline, s.Dataset = strings.Repeat("dir/", 20)+"p.yaml", "d.jsonl"
	var b strings.Builder
	WriteList(&b, []*batch.Summary{s})
	lines := strings.Split(strings.TrimSuffix(b.String(), "\n"), "\n")
	if len(lines) != 3 || !strings.HasPrefix(lines[0], "BATCH") || !strings.HasPrefix(lines[1], "b20261126T100000-cccc      completed       2/2  50.0%    $0.003  ") {
		t.Fatalf("list:\n%s", b.String())
	}
	if !strings.HasPrefix(lines[2], "  …r/dir/") || !strings.HasSuffix(lines[2], "/p.yaml on d.jsonl") || utf8.RuneCountInString(lines[2]) != 2+76 {
		t.Errorf("second line %q, want the pipeline and dataset clipped to 76 columns, keeping their end", lines[2])
	}
}
