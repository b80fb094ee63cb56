package store

import (
	"context"
	"time"

	"github.com/flowrun/flowrun/runtime"
)

// Duration is how long the run took: to its end, or to its last update
// while it has none.
func (r *Run) Duration() time.Duration {
	end := r.Finished
	if end.IsZero() {
		end = r.Updated
	}
	return end.Sub(r.Started)
}

// JSON is the run as a listing shows it: its figures, inputs and outputs,
// and, where they apply, its error, reason, parent and pending question.
func (r *Run) JSON() map[string]any {
	m := map[string]any{"id": r.ID, "pipeline": r.Pipeline, "name": r.PipelineName, "status": r.Status,
		"started": r.Started, "duration_ms": r.Duration().Milliseconds(), "cost_usd": r.CostUSD, "tokens": r.Tokens, "steps": r.Steps,
		"inputs": r.Inputs, "outputs": r.Outputs}
	if r.Error != "" {
		m["error"] = r.Error
	}
	if r.Reason != "" {
		m["reason"] = r.Reason
	}
	if r.ParentRun != "" {
		m["parent"] = map[string]any{"run": r.ParentRun, "checkpoint": r.ParentSeq}
	}
	if r.Pending != nil {
		m["pending"] = r.Pending
	}
	return m
}

// HiddenBatchRuns counts the runs q would select but leaves out because
// they are batch items (q.BatchItems unset).
func (s *Store) HiddenBatchRuns(ctx context.Context, q RunQuery) (int, error) {
	q.BatchItems, q.Limit = true, 1
	_, all, err := s.RunsMatching(ctx, q)
	if err != nil {
		return 0, err
	}
	q.BatchItems = false
	_, shown, err := s.RunsMatching(ctx, q)
	return all - shown, err
}

// RunWithEvents finds a run by id, prefix or "last" (FindRun) and reads
// its events.
func (s *Store) RunWithEvents(ctx context.Context, ref string) (*Run, []runtime.Event, error) {
	r, err := s.FindRun(ctx, ref)
	if err != nil {
		return nil, nil, err
	}
	events, err := s.Events(ctx, r.ID)
	return r, events, err
}
