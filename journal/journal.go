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

// Run is a run's record, as every journal keeps it: what it runs and
// with what, how it was started, where it came from, and how its last
// attempt ended. A resume in another process, or on another machine,
// goes on from this alone, with the run's checkpoints.
type Run struct {
	ID string
	// Pipeline is the pipeline's path as it was given; PipelineAbs is
	// where a resume loads it from.
	Pipeline     string
	PipelineAbs  string
	PipelineName string
	// PipelineHash is the hash of every file the pipeline's load read,
	// PipelineSrc the pipeline file's text as the run read it, and
	// PipelineFiles each of those files (prompts, schemas, called
	// pipelines, the pipeline itself) by path.
	PipelineHash  string
	PipelineSrc   string
	PipelineFiles map[string]string
	Inputs        map[string]any
	// RemoteInputs: a remote caller gave the inputs (see
	// runtime.Options.RemoteInputs), so its resumes treat them so too.
	RemoteInputs bool
	Spec         Spec
	// ParentRun is the run this one forked from, at its checkpoint
	// ParentSeq.
	ParentRun string
	ParentSeq int64
	// ChildOf is the run this one serves (a judge's run: the item's run
	// it scores). A child run is listed under it, never on its own.
	ChildOf string
	// Ending is how the run's last attempt ended; its Status is
	// runtime.StatusRunning while one is under way.
	Ending
}

// Spec is how a run was started beyond its pipeline and inputs: what
// every resume, answer and fork of it goes on with, in this process or
// another, unless it is given a change, which is then recorded here.
type Spec struct {
	// Models are the model overrides in force: a declared model's name
	// and the model id it calls instead.
	Models map[string]string `json:"models,omitempty"`
	// Auto: confirmations are accepted and asks take their defaults.
	Auto bool `json:"auto,omitempty"`
	// MaxLoops caps every loop at this many iterations (0: no cap).
	MaxLoops int `json:"max_loops,omitempty"`
	// Replay is the cassette the run's model calls are answered from.
	Replay string `json:"replay,omitempty"`
}

// Ending is how a run attempt ended.
type Ending struct {
	Status  runtime.Status
	Outputs map[string]any `json:",omitempty"`
	Error   string         `json:",omitempty"`
	Reason  string         `json:",omitempty"`
	Steps   int            `json:",omitempty"`
	CostUSD float64        `json:",omitempty"`
	Tokens  int            `json:",omitempty"`
	// Pending is the question a waiting run asks, or the confirmation a
	// stopped run was refused; nil when there is none.
	Pending *runtime.Question `json:",omitempty"`
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
	// Create records a new run, held by the caller until Finish; its
	// Ending is not read.
	Create(ctx context.Context, r Run) error
	// Fork records child, a new run held by the caller as Create's is,
	// that goes on from run parent's checkpoints numbered up to upTo
	// (none when upTo is 0): it gets copies of them, under their numbers,
	// and child's inputs are parent's unless it has its own. The parent
	// is not changed.
	Fork(ctx context.Context, parent string, upTo int64, child Run) error
	// Run reads a run's record.
	Run(ctx context.Context, id string) (Run, error)
	// SetSpec records a change to how a run goes on (a resume given
	// another model override).
	SetSpec(ctx context.Context, id string, spec Spec) error
	// Claim makes the caller the one holder of a run that is not
	// running, for a resume; while another holds it, ErrClaimed.
	Claim(ctx context.Context, id string) error
	// Finish records how the holder's attempt ended and releases the run.
	Finish(ctx context.Context, id string, end Ending) error
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
