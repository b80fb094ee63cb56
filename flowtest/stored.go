package flowtest

import (
	"context"
	"fmt"
	"maps"
	"slices"
	"strings"

	"github.com/flowrun/flowrun/engine"
	"github.com/flowrun/flowrun/runtime"
	"github.com/flowrun/flowrun/store"
)

// FromStoredRun writes a test file with one case that replays the stored
// run ref names (an id, a prefix of one, or last; see FromRun), to be
// saved as testFile: its pipeline: is relative to testFile's directory.
// The run must have finished, and the pipeline it ran (the source it
// recorded, else its file) must load. A fork, or a run resumed with
// edits, becomes a case that restores the checkpoints it went on from
// and makes its edits. expected, when given, says what a dataset
// expected of the run when a batch scored it (nil when none did), so that
// the case expects that instead of a failing item's wrong answer. The run
// is nil when none was found.
func FromStoredRun(ctx context.Context, st *store.Store, ref, testFile string, expected ExpectedOf) (*store.Run, []byte, error) {
	r, events, err := st.RunWithEvents(ctx, ref)
	if err != nil {
		return nil, nil, err
	}
	if r.Status == runtime.StatusRunning {
		return r, nil, fmt.Errorf("run %s is still running: a test case is made from a finished run", r.ID)
	}
	p, ds := engine.Recorded(r)
	if p == nil {
		return r, nil, fmt.Errorf("run %s's pipeline does not load:\n%s", r.ID, ds)
	}
	rec := RecordedRun{ID: r.ID, Pipeline: p, PipelinePath: RelativePipeline(r.PipelineAbs, testFile), Inputs: r.Inputs, Events: events}
	if err := wentOnFrom(ctx, st, r, &rec); err != nil {
		return r, nil, err
	}
	if expected != nil {
		if rec.Expected, err = expected(ctx, r.ID); err != nil {
			return r, nil, fmt.Errorf("run %s: what its dataset expected: %w", r.ID, err)
		}
	}
	b, err := FromRun(rec)
	if err != nil {
		return r, nil, fmt.Errorf("run %s: %w", r.ID, err)
	}
	return r, b, nil
}

// ExpectedOf says what a dataset expected of the run of id runID when a
// batch scored it, nil when none did.
type ExpectedOf func(ctx context.Context, runID string) (*Expected, error)

// wentOnFrom finds where a case of run r must start to end as the run
// did, when that is not the run's start: at the last time it went on with
// edited values, else, in a fork, where it was forked. What ran before
// (in the run it was forked from, or before the edits) is restored from
// the checkpoints it went on from, and rec keeps the events since.
func wentOnFrom(ctx context.Context, st *store.Store, r *store.Run, rec *RecordedRun) error {
	at := -1
	for i, e := range rec.Events {
		if e.Type != runtime.EventRunStarted {
			continue
		}
		if len(e.Edits) > 0 || (at < 0 && r.ParentRun != "") {
			at = i
		}
	}
	if at < 0 {
		return nil
	}
	started := rec.Events[at]
	forked := r.ParentRun != "" && at == firstStart(rec.Events)
	seq, from := started.Restored, r.ID
	if forked {
		from = r.ParentRun
		if seq == 0 {
			// Recorded before run_started said where a run went on from.
			seq = r.ParentSeq
		}
	} else if seq == 0 {
		// Edits in a resume go into a checkpoint, so it went on from one.
		return fmt.Errorf("run %s went on with edited values (%s) at a resume that did not record the checkpoint it went on from (a run recorded by an older flowrun), so a test case cannot tell what ran before the edits", r.ID, editKeys(started.Edits))
	}
	restore := &Restore{Run: from, Checkpoint: seq}
	if seq > 0 {
		points, err := st.Checkpoints(ctx, r.ID, seq)
		if err != nil {
			return fmt.Errorf("run %s: the checkpoints it went on from: %w", r.ID, err)
		}
		if len(points) == 0 {
			return fmt.Errorf("run %s went on from checkpoint %d, which its store no longer holds, so a test case cannot restore what ran before", r.ID, seq)
		}
		restore.Checkpoints = unedited(points, started.Edits)
	}
	rec.Restore, rec.Edits, rec.Events = restore, started.Edits, rec.Events[at:]
	return nil
}

func firstStart(events []runtime.Event) int {
	for i, e := range events {
		if e.Type == runtime.EventRunStarted {
			return i
		}
	}
	return -1
}

func editKeys(edits []runtime.Edit) string {
	keys := make([]string, len(edits))
	for i, e := range edits {
		keys[i] = e.Key
	}
	return strings.Join(keys, ", ")
}

// unedited is points as they were before edits went into them, so that a
// case's edits: makes them and restore: shows what the run had. A state
// edit went into the last checkpoint that holds the variable.
func unedited(points []*runtime.Checkpoint, edits []runtime.Edit) []*runtime.Checkpoint {
	out := slices.Clone(points)
	for _, e := range edits {
		name, ok := strings.CutPrefix(e.Key, "state.")
		if !ok {
			continue
		}
		for i := len(out) - 1; i >= 0; i-- {
			if _, has := out[i].State[name]; !has {
				continue
			}
			cp := *out[i]
			cp.State = maps.Clone(cp.State)
			if e.Old == nil {
				delete(cp.State, name)
			} else {
				cp.State[name] = e.Old
			}
			out[i] = &cp
			break
		}
	}
	return out
}
