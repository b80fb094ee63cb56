package batchtext

import (
	"strings"
	"testing"
	"time"

	"github.com/flowrun/flowrun/batch"
	"github.com/flowrun/flowrun/runtime"
	"github.com/flowrun/flowrun/store"
)

// TestProgressLine checks the live line: the pass rate only with a
// primary metric and a finished item, failures only when there are some,
// and the rate and time left from the items this process finished.
func TestProgressLine(t *testing.T) {
	for _, c := range []struct {
		name    string
		p       batch.Progress
		primary string
		elapsed time.Duration
		want    string
	}{
		{name: "nothing done", p: batch.Progress{Total: 10}, primary: "solved", elapsed: time.Second, want: "0/10 done, $0"},
		{name: "no primary", p: batch.Progress{Total: 10, Done: 2, Passed: 2, Ran: 2}, elapsed: 4 * time.Second,
			want: "2/10 done, $0, 0.50 items/s, ETA 16s"},
		{name: "passes and failures", p: batch.Progress{Total: 8, Done: 4, Passed: 3, Failed: 1, Spent: 1.5, Ran: 4}, primary: "solved", elapsed: 2 * time.Second,
			want: "4/8 done, solved 75.0% (3/4), 1 failed, $1.50, 2.00 items/s, ETA 2s"},
		{name: "all done", p: batch.Progress{Total: 2, Done: 2, Passed: 1, Ran: 2}, primary: "solved", elapsed: time.Second,
			want: "2/2 done, solved 50.0% (1/2), $0, 2.00 items/s"},
		{name: "resumed, none run here", p: batch.Progress{Total: 4, Done: 3, Passed: 3}, primary: "solved", elapsed: time.Second,
			want: "3/4 done, solved 100.0% (3/3), $0"},
	} {
		t.Run(c.name, func(t *testing.T) {
			if got := ProgressLine(c.p, c.primary, c.elapsed); got != c.want {
				t.Errorf("got  %q\nwant %q", got, c.want)
			}
		})
	}
}

// TestWriteItem checks the plain line of a finished item: the mark says
// whether it failed, missed the primary metric or passed, and a failure
// shows its class and the first line of its error.
func TestWriteItem(t *testing.T) {
	sc := &batch.Scorer{Primary: "solved"}
	for _, c := range []struct {
		name string
		it   store.BatchItem
		sc   *batch.Scorer
		want string
	}{
		{name: "passed", it: store.BatchItem{Key: "a", Status: runtime.StatusCompleted, Scores: map[string]any{"solved": true, "steps": 2}, CostUSD: 0.5, DurationMS: 1500}, sc: sc,
			want: "  ok   a                        completed solved=true steps=2 $0.50 1.50s\n"},
		{name: "missed", it: store.BatchItem{Key: "b", Status: runtime.StatusCompleted, Scores: map[string]any{"solved": false}}, sc: sc,
			want: "  miss b                        completed solved=false $0 0s\n"},
		{name: "no primary", it: store.BatchItem{Key: "b", Status: runtime.StatusCompleted}, sc: &batch.Scorer{},
			want: "  ok   b                        completed  $0 0s\n"},
		{name: "run failed", it: store.BatchItem{Key: "c", Status: runtime.StatusFailed, Error: "429\nretry later", Class: "rate_limit"}, sc: sc,
			want: "  FAIL c                        failed     $0 0s: rate_limit: 429\n"},
		{name: "scoring failed", it: store.BatchItem{Key: "d", Status: runtime.StatusCompleted, Error: "bad metric"}, sc: sc,
			want: "  miss d                        completed  $0 0s: error: bad metric\n"},
	} {
		t.Run(c.name, func(t *testing.T) {
			var b strings.Builder
			WriteItem(&b, batch.Progress{Item: &c.it, Name: c.it.Key}, c.sc)
			if b.String() != c.want {
				t.Errorf("got  %q\nwant %q", b.String(), c.want)
			}
		})
	}
	var b strings.Builder
	WriteFailure(&b, batch.Progress{Item: &store.BatchItem{Key: "c", Repeat: 1, Status: runtime.StatusFailed, Error: "boom", Class: "model_error"}, Name: "c#2", Where: "line 3"})
	if want := "  FAIL c#2 (line 3) failed: model_error: boom\n"; b.String() != want {
		t.Errorf("failure line %q, want %q", b.String(), want)
	}
}

// TestWriteSequential checks both endings of --until-decided: undecided,
// and decided with what stopping early saved.
func TestWriteSequential(t *testing.T) {
	var b strings.Builder
	WriteSequential(&b, &batch.SequentialOutcome{Baseline: "bA", Alpha: 0.05, Matched: 7, Test: batch.Sequential{Fixed: 1, Broken: 2}})
	if want := "sequential test: not decided after 7 matched items (1 fixed, 2 broken): no difference shown at alpha 0.05\n"; b.String() != want {
		t.Errorf("undecided:\n%s", b.String())
	}
	b.Reset()
	WriteSequential(&b, &batch.SequentialOutcome{Baseline: "bA", Alpha: 0.05, Matched: 9, DecidedAfter: 9, ItemsRun: 9, ItemsSaved: 21, CostSavedUSD: 2.1,
		Test: batch.Sequential{Fixed: 8, Broken: 0, LogLR: 3.5, Decision: batch.DecidedBetter}})
	want := "sequential test: better than batch bA after 9 items (8 fixed, 0 broken; likelihood ratio 33.1 >= 20)\n" +
		"saved: 21 of 30 items not run, about $2.10\n"
	if b.String() != want {
		t.Errorf("decided:\n%s\nwant\n%s", b.String(), want)
	}
}
