package main

import (
	"context"
	"fmt"
	"io"

	"github.com/flowrun/flowrun/batch"
	"github.com/flowrun/flowrun/batch/batchtext"
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
		writeEvent(stdout, batch.NewSweepEvent(sw))
		return worst
	}
	batchtext.WriteSweep(stderr, sw)
	return worst
}
