package engine

import (
	"github.com/flowrun/flowrun/dsl"
	"github.com/flowrun/flowrun/engine/internal/durable"
	"github.com/flowrun/flowrun/runtime"
	"github.com/flowrun/flowrun/store"
)

// What packages outside the engine need of durable runs: how a front end
// reads a recorded run and the errors a resume refuses with, and, for
// the cluster's coordinator, which records runs that run elsewhere (the
// layer test in internal/layers lists it, with its reason), a run's
// record and ending. Their tests record runs with node kinds of their
// own through Runner, which the layer test keeps out of their code.

// Runner records and runs pipelines as durable runs, with node kinds
// its caller built.
type Runner = durable.Runner

// ChangedError says files of a run's pipeline changed since it started.
type ChangedError = durable.ChangedError

// CompletedError says a run to resume has completed.
type CompletedError = durable.CompletedError

// EditError says why edits cannot be made.
type EditError = durable.EditError

// Recorded is run's pipeline as the run recorded it (durable.Recorded).
func Recorded(run *store.Run) (*dsl.Pipeline, dsl.Diagnostics) { return durable.Recorded(run) }

// Changes names, file by file and line by line, what differs between the
// files run prev's pipeline read and what p read now.
func Changes(prev *store.Run, p *dsl.Pipeline) []string { return durable.Changes(prev, p) }

// CheckEdits checks edits against what p declares (ParseEdits reads them
// from text).
func CheckEdits(p *dsl.Pipeline, edits []runtime.Edit) error { return durable.CheckEdits(p, edits) }

// Edited is what a run that goes on from points with inputs starts from
// once edits are made, made in memory instead of the store (flowrun
// test's cases).
func Edited(p *dsl.Pipeline, inputs map[string]any, points []*runtime.Checkpoint, edits []runtime.Edit) (map[string]any, []*runtime.Checkpoint, error) {
	return durable.Edited(p, inputs, points, edits)
}
