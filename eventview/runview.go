package eventview

import (
	"context"
	"fmt"
	"time"

	"github.com/flowrun/flowrun/dsl"
	"github.com/flowrun/flowrun/runtime"
	"github.com/flowrun/flowrun/store"
)

// RunView is what a view of one stored run shows: the run, its events,
// its checkpoints with the state after each, its snapshots and the calls
// still in flight.
type RunView struct {
	Run    *store.Run
	Events []runtime.Event
	// Checkpoints lists the run's current checkpoints, journaled ones
	// included; Steps is the state after each of them, in the same order.
	Checkpoints []store.CheckpointInfo
	Steps       []Step
	Snapshots   []*store.Snapshot
	// TokensEstimated says some token counts were made locally (see
	// TokensEstimated).
	TokensEstimated bool
	// InFlight describes the calls under way at the time of reading (see
	// InFlight).
	InFlight []string
}

// ReadRun reads r's view from st, its checkpoints once, so that the list
// and the state after each agree. p is the pipeline r ran, which tells
// which checkpoints write a scope of their own; nil when it no longer
// loads. now dates the calls in flight.
func ReadRun(ctx context.Context, st *store.Store, r *store.Run, p *dsl.Pipeline, now time.Time) (*RunView, error) {
	events, err := st.Events(ctx, r.ID)
	if err != nil {
		return nil, fmt.Errorf("read the events of run %s: %w", r.ID, err)
	}
	infos, points, err := st.ListCheckpointsWithData(ctx, r.ID)
	if err != nil {
		return nil, fmt.Errorf("read the checkpoints of run %s: %w", r.ID, err)
	}
	snaps, err := st.Snapshots(ctx, r.ID)
	if err != nil {
		return nil, fmt.Errorf("read the snapshots of run %s: %w", r.ID, err)
	}
	return &RunView{Run: r, Events: events, Checkpoints: infos, Steps: Steps(p, points), Snapshots: snaps,
		TokensEstimated: TokensEstimated(events), InFlight: InFlight(events, infos, now)}, nil
}
