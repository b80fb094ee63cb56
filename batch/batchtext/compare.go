package batchtext

import (
	"fmt"
	"io"
	"strings"

	"github.com/flowrun/flowrun/batch"
	"github.com/flowrun/flowrun/figures"
)

// WriteComparison writes what changed from batch A to batch B: both
// sides, the pass-rate change with McNemar's exact test, the cost and
// latency changes, and the keys of the items fixed, broken and only in
// one side.
func WriteComparison(w io.Writer, c *batch.Comparison) {
	for _, s := range []struct {
		label string
		side  batch.Side
	}{{"A", c.A}, {"B", c.B}} {
		pass := "no pass/fail metric"
		if s.side.PassRate != nil {
			pass = fmt.Sprintf("pass %.1f%% (%s)", 100*s.side.PassRate.Rate, s.side.Primary)
		}
		label := ""
		if s.side.Label != "" {
			label = fmt.Sprintf(" %q", s.side.Label)
		}
		fmt.Fprintf(w, "%s  %s%s  %s (%s), %d items, %s\n", s.label, s.side.ID, label, s.side.Name, s.side.Pipeline, s.side.Items, pass)
	}
	if c.A.Primary != c.B.Primary {
		fmt.Fprintf(w, "note: A passes by %q and B by %q\n", c.A.Primary, c.B.Primary)
	}
	if c.Changes != nil {
		WriteChanges(w, c.Changes)
	}
	fmt.Fprintf(w, "\n%d items in both", c.Matched)
	if len(c.OnlyA)+len(c.OnlyB) > 0 {
		fmt.Fprintf(w, " (%d only in A, %d only in B)", len(c.OnlyA), len(c.OnlyB))
	}
	fmt.Fprintf(w, "\npass rate  %.1f%% -> %.1f%%  (%+.1f points)\n", 100*c.PassA.Rate, 100*c.PassB.Rate, 100*c.Delta)
	fmt.Fprintf(w, "items      %d fixed, %d broken, %d same (%d passed in both, %d failed in both)\n",
		len(c.Fixed), len(c.Broken), c.SamePass+c.SameFail, c.SamePass, c.SameFail)
	verdict := "could well be chance"
	if c.PValue < 0.05 {
		verdict = "unlikely to be chance"
	}
	changed := "the %d items that changed"
	if len(c.Fixed)+len(c.Broken) == 1 {
		changed = "the %d item that changed"
	}
	fmt.Fprintf(w, "McNemar    p = %.4g: %s (exact test on "+changed+")\n", c.PValue, verdict, len(c.Fixed)+len(c.Broken))
	fmt.Fprintf(w, "cost       %s -> %s per item (%s), total %s -> %s (%s)\n",
		figures.USD(c.CostUSD.MeanA), figures.USD(c.CostUSD.MeanB), figures.USDChange(c.CostUSD.MeanDelta), figures.USD(c.CostUSD.A), figures.USD(c.CostUSD.B), figures.USDChange(c.CostUSD.Delta))
	fmt.Fprintf(w, "latency    %s -> %s per item (%s), total %s -> %s\n",
		figures.Duration(c.LatencyMS.MeanA), figures.Duration(c.LatencyMS.MeanB), figures.DurationChange(c.LatencyMS.MeanDelta),
		figures.Duration(c.LatencyMS.A), figures.Duration(c.LatencyMS.B))
	keyList(w, "fixed (failed in A, passed in B)", pairKeys(c.Fixed))
	keyList(w, "broken (passed in A, failed in B)", pairKeys(c.Broken))
	keyList(w, "only in A", c.OnlyA)
	keyList(w, "only in B", c.OnlyB)
}

// WriteChanges writes what changed from A's pipeline to B's: each file
// the loads read differently as a unified diff, folded past its first
// lines, then each setting that differs; one line when nothing did.
func WriteChanges(w io.Writer, c *batch.PipelineChanges) {
	if c.Same() {
		fmt.Fprintln(w, "\nchanges    none: same pipeline, same files, same settings")
		return
	}
	fmt.Fprintln(w, "\nchanges from A to B:")
	for _, side := range c.Unrecorded {
		fmt.Fprintf(w, "  %s: no item's run recorded its pipeline files, so they are not compared\n", side)
	}
	for _, f := range c.Files {
		name := f.Path
		if f.Was != "" {
			name = f.Was + " -> " + f.Path
		}
		fmt.Fprintf(w, "  %s (%s)\n", name, f.Status)
		for _, l := range f.Lines {
			fmt.Fprintf(w, "    %s\n", l)
		}
		if f.More > 0 {
			fmt.Fprintf(w, "    … %d more lines\n", f.More)
		}
	}
	if len(c.Files) == 0 && len(c.Unrecorded) == 0 {
		fmt.Fprintln(w, "  same pipeline, same files")
	}
	for _, s := range c.Settings {
		fmt.Fprintf(w, "  %-16s %s -> %s\n", s.Name, s.A, s.B)
	}
}

// WriteSideBySide writes each fixed and broken item's outputs in A and
// in B, folded to a line each of at most cols runes.
func WriteSideBySide(w io.Writer, c *batch.Comparison, cols int) {
	pairs := append(append([]batch.Pair{}, c.Fixed...), c.Broken...)
	if len(pairs) == 0 {
		return
	}
	fmt.Fprintln(w, "\noutputs, A then B:")
	for _, p := range pairs {
		fmt.Fprintf(w, "  %s (%s)\n", p.Key, p.Outcome)
		for _, side := range []struct {
			name string
			row  batch.Row
		}{{"A", p.A}, {"B", p.B}} {
			what := any(side.row.Outputs)
			if side.row.Error != "" {
				what = side.row.Class + ": " + side.row.Error
			}
			fmt.Fprintf(w, "    %s  %s\n", side.name, batch.Fold(what, cols-7))
		}
	}
}

func pairKeys(ps []batch.Pair) []string {
	out := make([]string, len(ps))
	for i, p := range ps {
		out[i] = p.Key
	}
	return out
}

// keyList writes a titled list of keys, wrapped to 80 columns.
func keyList(w io.Writer, title string, ks []string) {
	if len(ks) == 0 {
		return
	}
	fmt.Fprintf(w, "\n%s: %d\n", title, len(ks))
	line := " "
	for _, k := range ks {
		if len(line)+1+len(k) > 80 && line != " " {
			fmt.Fprintln(w, line)
			line = " "
		}
		line += " " + k
	}
	fmt.Fprintln(w, line)
}

// WritePairwise writes the pairwise judge's verdict and its reason for
// each item; nothing when p is nil (no judge was asked).
func WritePairwise(w io.Writer, p *batch.Pairwise) {
	if p == nil {
		return
	}
	verdict := "no clear winner"
	if p.Better != "" {
		verdict = strings.ToUpper(p.Better) + " is better"
	}
	fmt.Fprintf(w, "\njudge %s (order drawn from seed %d): A %d, B %d, tie %d; sign test p = %.4g: %s; %s\n",
		p.Model, p.Seed, p.WinsA, p.WinsB, p.Ties, p.PValue, verdict, figures.USD(p.CostUSD))
	for _, v := range p.Items {
		first := "A"
		if v.BFirst {
			first = "B"
		}
		fmt.Fprintf(w, "  %-24s %-4s (%s shown first) %s\n", v.Key, strings.ToUpper(v.Winner), first, clip(firstLine(v.Reasoning), 80))
	}
	if len(p.Skipped) > 0 {
		fmt.Fprintf(w, "  not judged (not completed in both): %s\n", strings.Join(p.Skipped, ", "))
	}
}

// WriteSweep writes a sweep's variants side by side (pass rate with its
// interval, cost, cost per item, median latency), then each pair's
// comparison, B against A.
func WriteSweep(w io.Writer, sw *batch.Sweep) {
	fmt.Fprintf(w, "\nsweep: %d variants\n", len(sw.Variants))
	fmt.Fprintf(w, "  %-34s %-26s %-30s %10s %10s %9s\n", "VARIANT", "BATCH", "PASS (95% INTERVAL)", "COST", "PER ITEM", "P50")
	for _, v := range sw.Variants {
		pass := "-"
		if v.PassRate != nil {
			pass = fmt.Sprintf("%.1f%% (%.1f%%-%.1f%%)", 100*v.PassRate.Rate, 100*v.PassRate.Low, 100*v.PassRate.High)
		}
		fmt.Fprintf(w, "  %-34s %-26s %-30s %10s %10s %9s\n", v.Label, v.Batch, pass, figures.USD(v.CostUSD), figures.USD(v.CostPerItem), figures.Duration(v.P50MS))
	}
	if len(sw.Pairs) > 0 {
		fmt.Fprintln(w, "\npairs (B against A):")
	}
	for _, p := range sw.Pairs {
		fmt.Fprintf(w, "  %s -> %s: %+.1f points (%+.1f to %+.1f), %d fixed, %d broken, McNemar mid-p %.4g\n",
			p.A, p.B, 100*p.Delta, 100*p.Interval.Low, 100*p.Interval.High, p.Fixed, p.Broken, p.MidPValue)
	}
}
