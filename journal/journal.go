// Package journal is what a run leaves behind for a resume, behind one
// interface: its record, its checkpoints (in-flight records among them),
// its events and a stop asked of it. The SQLite store and JetStream both
// implement it, and journal/journaltest is the suite both must pass, so
// that a run resumes the same way whichever holds it.
package journal

import (
	"context"
	"errors"
	"strings"

	"github.com/flowrun/flowrun/runtime"
)

// Run is the part of a run's record every journal keeps.
type Run struct {
	ID       string
	Pipeline string
	Inputs   map[string]any
	Status   runtime.Status
}

// ErrNotFound is returned for a run the journal has no record of.
var ErrNotFound = errors.New("no such run in the journal")

// ErrClaimed is returned to a resumer of a run someone else holds: two
// resumers of one run would each pay for its next model calls.
var ErrClaimed = errors.New("the run is held by another resumer")

// Log is the part of a journal that a run writes as it goes and a resume
// reads back: its checkpoints (in-flight records among them) and its
// events. A run kept in a Log alone has its record elsewhere: a cluster
// worker's item has it in the coordinator's store. Every method is safe
// for concurrent use.
type Log interface {
	// Save stores a checkpoint; it is durable when Save returns. A Log
	// alone stores it under the number its run gave it (cp.Seq), a number
	// saved twice once; a Journal numbers it after the run's last (cp.Seq
	// is set).
	Save(ctx context.Context, id string, cp *runtime.Checkpoint) error
	// Checkpoints reads back a run's checkpoints in order, those numbered
	// up to upTo when it is above 0: what a resume from there restores.
	Checkpoints(ctx context.Context, id string, upTo int64) ([]*runtime.Checkpoint, error)
	// Event appends an event to the run's timeline. Unlike a checkpoint,
	// the last few may be lost with a killed process.
	Event(ctx context.Context, id string, e runtime.Event) error
	// Flush waits until the run's events appended so far are stored.
	Flush(ctx context.Context, id string) error
	// Events reads back a run's events in order.
	Events(ctx context.Context, id string) ([]runtime.Event, error)
}

// Journal records runs: a Log, with each run's record and a stop asked of
// it. Every method is safe for concurrent use.
type Journal interface {
	Log
	// Create records a new run, held by the caller until Finish.
	Create(ctx context.Context, r Run) error
	// Run reads a run's record.
	Run(ctx context.Context, id string) (Run, error)
	// Claim makes the caller the one holder of a run that is not
	// running, for a resume; while another holds it, ErrClaimed.
	Claim(ctx context.Context, id string) error
	// Finish records how the holder's attempt ended and releases the run.
	Finish(ctx context.Context, id string, status runtime.Status) error
	// RequestStop asks the run's holder to stop it; Claim and Finish
	// clear the request.
	RequestStop(ctx context.Context, id, reason string) error
	// StopRequested returns the reason of a standing stop request, or "".
	StopRequested(ctx context.Context, id string) (string, error)
}

// InFlight returns the in-flight records among checkpoints: the model
// calls (and other effects) under way when they were saved, which a
// resume hands back instead of making them again.
func InFlight(cps []*runtime.Checkpoint) []*runtime.Checkpoint {
	var out []*runtime.Checkpoint
	for _, cp := range cps {
		if strings.HasSuffix(cp.Path, runtime.InFlightSuffix) {
			out = append(out, cp)
		}
	}
	return out
}
