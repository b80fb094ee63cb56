package main

import (
	"context"
	"fmt"
	"io"

	"github.com/flowrun/flowrun/batch"
	"github.com/flowrun/flowrun/figures"
	"github.com/flowrun/flowrun/store"
)

// batchSweep runs one batch per variant (pipeline files crossed with the
// --sweep axes) through runOne, then prints them side by side with each
// pair's comparison. The exit code is the worst of the batches'.
func batchSweep(ctx context.Context, files, axes []string, storePath string, asJSON bool,
	runOne func(file string, models []string) (*store.Batch, int), stdout, stderr io.Writer) int {
	variants, err := batch.Variants(files, axes)
	if err != nil {
		fmt.Fprintf(stderr, "flowrun batch: %v\n", err)
		return exitInvalid
	}
	var labels []string
	var batches []*store.Batch
	worst := exitOK
	for _, v := range variants {
		fmt.Fprintf(stderr, "\nvariant %s\n", v.Label)
		b, code := runOne(v.Pipeline, v.Models)
		if b == nil {
			return code
		}
		worst = max(worst, code)
		labels, batches = append(labels, v.Label), append(batches, b)
	}
	st, err := store.Open(storePath)
	if err != nil {
		return fail(stderr, "flowrun batch", err)
	}
	defer st.Close()
	sw, err := batch.SummarizeSweep(ctx, st, labels, batches)
	if err != nil {
		return fail(stderr, "flowrun batch", err)
	}
	if asJSON {
		writeEvent(stdout, map[string]any{"type": "sweep_finished", "variants": sw.Variants, "pairs": sw.Pairs})
		return worst
	}
	w := stderr
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
	return worst
}
