package batchtext

import (
	"fmt"
	"io"
	"maps"
	"slices"
	"strings"
	"text/tabwriter"

	"github.com/flowrun/flowrun/batch"
	"github.com/flowrun/flowrun/figures"
)

// WriteList writes batches' summaries as a table, two lines a batch so
// that it fits 80 columns: the figures, then what ran over what.
func WriteList(w io.Writer, sums []*batch.Summary) {
	fmt.Fprintf(w, "%-26s %-9s %9s %6s %9s  %s\n", "BATCH", "STATUS", "DONE", "PASS", "COST", "STARTED")
	for _, s := range sums {
		pass := "-"
		if s.PassRate != nil {
			pass = fmt.Sprintf("%.1f%%", 100*s.PassRate.Rate)
		}
		fmt.Fprintf(w, "%-26s %-9s %9s %6s %9s  %s\n", s.ID, s.Status, fmt.Sprintf("%d/%d", s.Items.Done(), s.Items.Total),
			pass, figures.USD(s.CostUSD), s.Started.Local().Format("01-02 15:04"))
		// The label is what a person looks for: the paths give way to it.
		label := ""
		if s.Label != "" {
			label = clip(fmt.Sprintf("%q", s.Label), 38) + "  "
		}
		fmt.Fprintf(w, "  %s%s\n", label, clip(s.Pipeline+" on "+s.Dataset, 76-len([]rune(label))))
	}
}

// WriteSummary writes a batch's summary (status, items by outcome, pass
// rate with its interval, the other metrics, agreement with human
// ratings, cost, tokens, latency, repeats, failures by class, the slowest
// and costliest items), then one line per row of s, at most cols wide.
func WriteSummary(w io.Writer, s *batch.Summary, cols int) {
	fmt.Fprintf(w, "batch %s  %s (%s) on %s  %s", s.ID, s.Name, s.Pipeline, s.Dataset, s.Status)
	if s.Reason != "" {
		fmt.Fprintf(w, " (%s)", s.Reason)
	}
	fmt.Fprintln(w)
	if s.Label != "" {
		fmt.Fprintf(w, "label      %s\n", s.Label)
	}
	if s.Description != "" {
		fmt.Fprintf(w, "description %s\n", s.Description)
	}
	fmt.Fprintf(w, "started %s\n\n", s.Started.Local().Format("2006-01-02 15:04:05"))
	c := s.Items
	fmt.Fprintf(w, "%-10s %d", s.Unit(), c.Total)
	if s.Repeated {
		fmt.Fprintf(w, " of %d items", s.ItemsRun())
	}
	fmt.Fprintf(w, ": %d completed, %d failed, %d stopped, %d waiting, %d pending", c.Completed, c.Failed, c.Stopped, c.Waiting, c.Pending)
	if c.Running > 0 {
		fmt.Fprintf(w, ", %d running", c.Running)
	}
	if c.Interrupted > 0 {
		fmt.Fprintf(w, ", %d interrupted", c.Interrupted)
	}
	fmt.Fprintln(w)
	if s.PassRate != nil {
		fmt.Fprintf(w, "pass rate  %s (%s)%s\n", rateText(s.PassRate), s.Primary, finishedNote(s.PassRate, s.Items.Total, s.Unit()))
		if n := s.Items.Unscored; n > 0 {
			fmt.Fprintf(w, "           %d of the %s unscored (none of their checks could be checked): not passed\n", n, s.Unit())
		}
	} else {
		fmt.Fprintln(w, "pass rate  - (no boolean metric was scored)")
	}
	for _, m := range s.Metrics {
		switch {
		case m.Primary:
		case m.Rate != nil:
			fmt.Fprintf(w, "  %-8s %s\n", m.Name, rateText(m.Rate))
		case m.Kind == "mean":
			fmt.Fprintf(w, "  %-8s mean %.4g over %d %s\n", m.Name, m.Mean, m.N, s.Unit())
		default:
			fmt.Fprintf(w, "  %-8s not a boolean or a number: see the item table\n", m.Name)
		}
	}
	for _, a := range s.Agreement {
		kappa := "undefined (each gave one verdict throughout)"
		if a.Defined {
			kappa = fmt.Sprintf("%.2f", a.Kappa)
		}
		fmt.Fprintf(w, "  human vs %s: agree on %d of %d rated items, Cohen's kappa %s\n", a.Metric, a.Agree, a.N, kappa)
	}
	fmt.Fprintf(w, "cost       %s total, %s per %s (mean)\n", figures.USD(s.CostUSD), figures.USD(s.CostPerItem), strings.TrimSuffix(s.Unit(), "s"))
	fmt.Fprintf(w, "tokens     %d\n", s.Tokens)
	fmt.Fprintf(w, "latency    p50 %s, p95 %s\n", figures.Duration(s.P50MS), figures.Duration(s.P95MS))
	writeRepeats(w, s.Repeats)
	if len(s.Failures) > 0 {
		fmt.Fprintln(w, "\nfailures by class:")
		for _, f := range s.Failures {
			fmt.Fprintf(w, "  %-18s %4d  %s: %s\n", f.Class, f.Count, strings.Join(f.Keys, ", "), clip(firstLine(f.Error), 80))
		}
	}
	for _, list := range []struct {
		title string
		rows  []batch.Row
	}{{"slowest", s.Slowest}, {"most expensive", s.Costliest}} {
		if len(list.rows) == 0 {
			continue
		}
		fmt.Fprintf(w, "\n%s:\n", list.title)
		for _, r := range list.rows {
			fmt.Fprintf(w, "  %-30s %9s %9s  run %s\n", r.Name, figures.Duration(r.DurationMS), figures.USD(r.CostUSD), r.Run)
		}
	}
	fmt.Fprintln(w)
	writeItemLines(w, s, cols)
}

// writeItemLines writes one line per item: its key, status, metrics, cost
// and duration, then its error or else its outputs, folded to fit cols.
func writeItemLines(w io.Writer, s *batch.Summary, cols int) {
	var lines strings.Builder
	tw := tabwriter.NewWriter(&lines, 0, 0, 2, ' ', 0)
	table := batch.Columns(s)
	table = table[:len(table)-batch.DetailColumns-3] // without run, class and error: the last column says them
	// A person reads a run by its name (t26#2), not by a key and a
	// repeat counted from 0.
	table = slices.DeleteFunc(table, func(c batch.Column) bool { return c.Name == "repeat" })
	table[0] = batch.Column{Name: "key", Value: func(r batch.Row) any { return r.Name }}
	for i, col := range table {
		if i > 0 {
			fmt.Fprint(tw, "\t")
		}
		fmt.Fprint(tw, strings.ToUpper(strings.TrimSuffix(strings.TrimSuffix(col.Name, "_usd"), "_ms")))
	}
	fmt.Fprintln(tw, "\t\x00")
	for _, r := range s.Rows {
		for i, col := range table {
			if i > 0 {
				fmt.Fprint(tw, "\t")
			}
			switch v := col.Value(r); col.Unit {
			case "usd":
				fmt.Fprint(tw, figures.USD(v.(float64)))
			case "ms":
				fmt.Fprint(tw, figures.Duration(v.(float64)))
			default:
				fmt.Fprint(tw, batch.Fold(batch.CellText(v), 24))
			}
		}
		fmt.Fprintln(tw, "\t\x00")
	}
	tw.Flush()
	// The last column takes what room the table leaves.
	for i, line := range strings.Split(strings.TrimSuffix(lines.String(), "\n"), "\n") {
		line = strings.TrimSuffix(line, "\x00")
		room := max(cols-len([]rune(line)), 16)
		switch {
		case i == 0:
			line += "OUTPUT OR ERROR"
		case s.Rows[i-1].Error != "":
			line += batch.Fold(s.Rows[i-1].Class+": "+s.Rows[i-1].Error, room)
		case s.Rows[i-1].Outputs != nil:
			line += batch.Fold(s.Rows[i-1].Outputs, room)
		}
		fmt.Fprintln(w, strings.TrimRight(line, " "))
	}
}

// writeRepeats writes, for a batch whose items ran several times, each
// item's pass@N and pass^N with its class, and each metric's spread.
func writeRepeats(w io.Writer, r *batch.RepeatSummary) {
	if r == nil {
		return
	}
	fmt.Fprintf(w, "\nrepeats    %d items: %d always pass, %d always fail, %d flaky\n", len(r.Items), r.AlwaysPass, r.AlwaysFail, r.Flaky)
	fmt.Fprintf(w, "  pass@N   %s\n  pass^N   %s\n", rateText(&r.PassAt), rateText(&r.PassAll))
	for _, n := range slices.Sorted(maps.Keys(r.Metrics)) {
		m := r.Metrics[n]
		fmt.Fprintf(w, "  %-8s mean %.4g, sd %.4g across items, sd %.4g within an item\n", n, m.Mean, m.SD, r.Within[n])
	}
	for _, it := range r.Items {
		fmt.Fprintf(w, "  %-30s %d/%d passed  pass@%d %-5t pass^%d %-5t %s\n", it.Key, it.Passed, it.Runs, it.Runs, it.PassAt, it.Runs, it.PassAll, it.Class)
	}
}

func rateText(r *batch.Rate) string {
	return fmt.Sprintf("%.1f%% (%d/%d), 95%% interval %.1f%%-%.1f%%", 100*r.Rate, r.Passed, r.N, 100*r.Low, 100*r.High)
}

// finishedNote says, when not every item (or run, unit) finished (a
// stopped batch), over how many a rate is.
func finishedNote(r *batch.Rate, total int, unit string) string {
	if r.N == total {
		return ""
	}
	return fmt.Sprintf(" over the %d of %d %s that finished", r.N, total, unit)
}

// clip shortens s to n runes, keeping its end (where a path's file name is).
func clip(s string, n int) string {
	r := []rune(s)
	if len(r) <= n {
		return s
	}
	return "…" + string(r[len(r)-n+1:])
}

func firstLine(s string) string {
	line, _, _ := strings.Cut(s, "\n")
	return line
}
