package batch

import (
	"context"

	"github.com/flowrun/flowrun/store"
)

// Previous is the batch a comparison with b starts from: the newest
// batch begun before b of the same pipeline file over the same dataset;
// nil when there is none. A batch over another dataset is no baseline:
// its items are not b's.
func Previous(ctx context.Context, st *store.Store, b *store.Batch) (*store.Batch, error) {
	all, err := st.Batches(ctx)
	if err != nil {
		return nil, err
	}
	past := false
	for _, o := range all { // newest first
		if o.ID == b.ID {
			past = true
			continue
		}
		if past && sameRun(o, b) {
			return o, nil
		}
	}
	return nil, nil
}

// sameRun says whether two batches ran one pipeline file over one
// dataset.
func sameRun(x, y *store.Batch) bool {
	return pathOf(x.PipelineAbs, x.Pipeline) == pathOf(y.PipelineAbs, y.Pipeline) && datasetOf(x) == datasetOf(y)
}

func datasetOf(b *store.Batch) string {
	s, _ := SettingsOf(b)
	return pathOf(s.DatasetAbs, b.Dataset)
}

// pathOf is abs, or the path as given when no absolute one was recorded.
func pathOf(abs, given string) string {
	if abs != "" {
		return abs
	}
	return given
}
