package flowtest

import (
	"context"
	"fmt"
	"strings"

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
	if err := replayable(r, events); err != nil {
		return r, nil, err
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

// replayable says why run r, with its events, cannot become a case that
// reproduces it: a case runs the pipeline from its start with the run's
// inputs, answers and model replies, so a fork (whose first steps ran in
// another run) or a run that went on with edited values would not end as
// the run did.
func replayable(r *store.Run, events []runtime.Event) error {
	if r.ParentRun != "" {
		return fmt.Errorf("run %s is a fork of run %s from its checkpoint %d, and a test case replays a run from its start: make the case from a run that went the whole way (a fork's edited inputs can be given as the new run's inputs)", r.ID, r.ParentRun, r.ParentSeq)
	}
	for _, e := range events {
		if e.Type == runtime.EventRunStarted && len(e.Edits) > 0 {
			keys := make([]string, len(e.Edits))
			for i, ed := range e.Edits {
				keys[i] = ed.Key
			}
			return fmt.Errorf("run %s went on with edited values (%s), and a test case cannot edit a run's state mid-way: make the case from a run that went the whole way without edits", r.ID, strings.Join(keys, ", "))
		}
	}
	return nil
}
