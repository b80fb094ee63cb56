package main

import (
	"fmt"
	"io"

	"github.com/flowrun/flowrun/batch"
	"github.com/flowrun/flowrun/internal/termview"
	"github.com/flowrun/flowrun/plan"
)

// batchPlanArgs are what flowrun batch --plan bounds: the flags that
// choose the runs of a batch.
type batchPlanArgs struct {
	files, sweeps []string
	dataset       string
	selection     batch.Selection
	maps          []string
	repeat        int
	bf            *batchFlags
}

// batchPlan prints, for each batch a sweep would run (one without
// --sweep), the most its runs can call and cost, against --max-cost-usd;
// it runs nothing.
func batchPlan(a batchPlanArgs, stdout, stderr io.Writer) int {
	variants, err := batch.Variants(a.files, a.sweeps)
	if err != nil {
		fmt.Fprintf(stderr, "flowrun batch: %v\n", err)
		return exitInvalid
	}
	_, items, err := batch.ReadSelected(a.dataset, a.selection)
	if err != nil {
		fmt.Fprintf(stderr, "flowrun batch: %v\n", err)
		return exitInvalid
	}
	var plans []*plan.Batch
	for _, v := range variants {
		p := loadPipeline(v.Pipeline, stderr)
		if p == nil {
			return exitInvalid
		}
		mapping, err := batch.ParseMap(p, a.maps)
		if err != nil {
			fmt.Fprintf(stderr, "flowrun batch: %v\n", err)
			return exitInvalid
		}
		var inputs []map[string]any
		for _, it := range items {
			in, err := batch.Inputs(p, it, mapping)
			if err != nil {
				fmt.Fprintf(stderr, "flowrun batch: %v\n", err)
				return exitInvalid
			}
			inputs = append(inputs, in)
		}
		priced := *p
		priced.Models = overridden(p, append(append([]string(nil), a.bf.models.models...), v.Models...))
		b := plan.MakeBatch(&priced, inputs, a.repeat, a.bf.maxCost)
		if a.bf.asJSON {
			plans = append(plans, b)
			continue
		}
		text := termview.Text{W: stdout}
		if v.Label != "" {
			fmt.Fprintf(text, "\nvariant %s\n", v.Label)
		}
		b.Write(text)
	}
	if a.bf.asJSON {
		return writeJSON(stdout, plans)
	}
	return exitOK
}
