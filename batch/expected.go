package batch

import (
	"context"
	"fmt"

	"github.com/flowrun/flowrun/flowtest"
	"github.com/flowrun/flowrun/store"
)

// ExpectedOfRun says what the dataset expected of a run that a batch in
// st scored, for a test case made from it: the dataset row's value of
// each output the batch's metrics compare with a field of the row
// (outputs.X == item.Y, the primary metric's first); when they compare
// none, the fields the metrics read and why none could be pinned.
func ExpectedOfRun(st *store.Store) flowtest.ExpectedOf {
	return func(ctx context.Context, runID string) (*flowtest.Expected, error) {
		it, err := st.BatchItemOfRun(ctx, runID)
		if it == nil || err != nil {
			return nil, err
		}
		b, err := st.Batch(ctx, it.Batch)
		if err != nil {
			return nil, err
		}
		settings, err := SettingsOf(b)
		if err != nil {
			return nil, err
		}
		e := &flowtest.Expected{Source: fmt.Sprintf("batch %s, item %s", b.ID, RunName(it.Key, it.Repeat, settings.Repeat > 1)), Outputs: map[string]any{}}
		for _, metric := range append([]string{settings.Primary}, settings.Metrics...) {
			for _, x := range settings.Expects[metric] {
				v, ok := it.Item[x.Item]
				if _, pinned := e.Outputs[x.Output]; ok && !pinned {
					e.Outputs[x.Output] = v
				}
			}
		}
		if len(e.Outputs) == 0 {
			e.Fields = expected(it.Item, settings.Expected)
			e.Why = "its metrics compare no output with a dataset field as outputs.X == item.Y"
		}
		return e, nil
	}
}
