package flowtest

import (
	"context"
	"fmt"

	"github.com/flowrun/flowrun/durable"
	"github.com/flowrun/flowrun/runtime"
	"github.com/flowrun/flowrun/store"
)

// FromStoredRun writes a test file with one case that replays the stored
// run ref names (an id, a prefix of one, or last; see FromRun), to be
// saved as testFile: its pipeline: is relative to testFile's directory.
// The run must have finished, and the pipeline it ran (the source it
// recorded, else its file) must load. The run is nil when none was found.
func FromStoredRun(ctx context.Context, st *store.Store, ref, testFile string) (*store.Run, []byte, error) {
	r, events, err := st.RunWithEvents(ctx, ref)
	if err != nil {
		return nil, nil, err
	}
	if r.Status == runtime.StatusRunning {
		return r, nil, fmt.Errorf("run %s is still running: a test case is made from a finished run", r.ID)
	}
	p, ds := durable.Recorded(r)
	if p == nil {
		return r, nil, fmt.Errorf("run %s's pipeline does not load:\n%s", r.ID, ds)
	}
	b, err := FromRun(RecordedRun{ID: r.ID, Pipeline: p, PipelinePath: RelativePipeline(r.PipelineAbs, testFile),
		Inputs: r.Inputs, Events: events})
	if err != nil {
		return r, nil, fmt.Errorf("run %s: %w", r.ID, err)
	}
	return r, b, nil
}
