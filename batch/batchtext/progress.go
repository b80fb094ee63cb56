package batchtext

import (
	"fmt"
	"io"
	"math"
	"time"

	"github.com/flowrun/flowrun/batch"
	"github.com/flowrun/flowrun/figures"
	"github.com/flowrun/flowrun/runtime"
	"github.com/flowrun/flowrun/store"
)

// ItemFailed says whether an item's run did not complete or its scoring
// failed: such an item is shown as a failure.
func ItemFailed(it *store.BatchItem) bool {
	return it.Status != runtime.StatusCompleted || it.Class != ""
}

// WriteItem writes the item p reports as a line: a mark (ok, FAIL, or
// miss when it did not pass sc's primary metric), its name (key, and
// run number with --repeat), status, scores, cost, duration and error.
func WriteItem(w io.Writer, p batch.Progress, sc *batch.Scorer) {
	it := p.Item
	mark := "ok  "
	switch {
	case ItemFailed(it):
		mark = "FAIL"
	case sc.Primary != "" && !sc.Passed(it.Scores):
		mark = "miss"
	}
	fmt.Fprintf(w, "  %s %-24s %-9s %s %s %s%s\n", mark, p.Name, it.Status, batch.ScoreLine(it.Scores), figures.USD(it.CostUSD), figures.Duration(it.DurationMS), failureText(it))
}

// WriteFailure writes the line that a progress display prints above its
// live line for an item that failed: its name, its place in the dataset,
// status and error.
func WriteFailure(w io.Writer, p batch.Progress) {
	fmt.Fprintf(w, "  FAIL %s (%s) %s%s\n", p.Name, p.Where, p.Item.Status, failureText(p.Item))
}

func failureText(it *store.BatchItem) string {
	if it.Error == "" {
		return ""
	}
	class := it.Class
	if class == "" {
		class = "error"
	}
	return ": " + class + ": " + firstLine(it.Error)
}

// ProgressLine is the live line of a running batch, elapsed after it
// started: items done, the pass rate by primary (when there is one),
// failures, spend, and at what rate items finish with the time left.
func ProgressLine(p batch.Progress, primary string, elapsed time.Duration) string {
	line := fmt.Sprintf("%d/%d done", p.Done, p.Total)
	if primary != "" && p.Done > 0 {
		line += fmt.Sprintf(", %s %.1f%% (%d/%d)", primary, 100*float64(p.Passed)/float64(p.Done), p.Passed, p.Done)
	}
	if p.Failed > 0 {
		line += fmt.Sprintf(", %d failed", p.Failed)
	}
	line += ", " + figures.USD(p.Spent)
	if p.Ran > 0 && elapsed > 0 {
		rate := float64(p.Ran) / elapsed.Seconds()
		line += fmt.Sprintf(", %.2f items/s", rate)
		if left := p.Total - p.Done; left > 0 && rate > 0 {
			line += ", ETA " + (time.Duration(float64(left)/rate) * time.Second).Round(time.Second).String()
		}
	}
	return line
}

// WriteEnded writes the totals of a batch whose run just ended: its
// status, the items by outcome, cost and tokens, and each metric.
func WriteEnded(w io.Writer, s *batch.Summary) {
	fmt.Fprintf(w, "batch %s %s: %d %s", s.ID, s.Status, s.Items.Total, s.Unit())
	if s.Repeated {
		fmt.Fprintf(w, " of %d items", s.ItemsRun())
	}
	fmt.Fprintf(w, ", %d completed, %d failed", s.Items.Completed, s.Items.Failed)
	if rest := s.Items.Unsettled(); rest > 0 {
		fmt.Fprintf(w, ", %d without a result", rest)
	}
	fmt.Fprintf(w, "; %s, %d tokens\n", figures.USD(s.CostUSD), s.Tokens)
	for _, m := range s.Metrics {
		mark := ""
		if m.Primary {
			mark = " (pass rate)"
		}
		if m.Rate != nil {
			fmt.Fprintf(w, "  %-20s %5.1f%%  %d/%d%s%s\n", m.Name, 100*m.Rate.Rate, m.Rate.Passed, m.Rate.N, mark, finishedNote(m.Rate, s.Items.Total, s.Unit()))
		} else if m.Kind == "mean" {
			fmt.Fprintf(w, "  %-20s mean %.4g over %d %s\n", m.Name, m.Mean, m.N, s.Unit())
		}
	}
}

// WriteSequential writes what the sequential test of flowrun batch
// --until-decided concluded and, when it decided, what stopping saved.
func WriteSequential(w io.Writer, o *batch.SequentialOutcome) {
	t := o.Test
	if o.DecidedAfter == 0 {
		fmt.Fprintf(w, "sequential test: not decided after %d matched items (%d fixed, %d broken): no difference shown at alpha %g\n", o.Matched, t.Fixed, t.Broken, o.Alpha)
		return
	}
	fmt.Fprintf(w, "sequential test: %s than batch %s after %d items (%d fixed, %d broken; likelihood ratio %.3g >= %.3g)\n",
		t.Decision, o.Baseline, o.DecidedAfter, t.Fixed, t.Broken, math.Exp(t.LogLR), 1/o.Alpha)
	fmt.Fprintf(w, "saved: %d of %d items not run, about %s\n", o.ItemsSaved, o.ItemsRun+o.ItemsSaved, figures.USD(o.CostSavedUSD))
}
