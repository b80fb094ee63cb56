package durable

import (
	"context"

	"github.com/flowrun/flowrun/dsl"
	"github.com/flowrun/flowrun/journal"
	"github.com/flowrun/flowrun/runtime"
)

// InMemory is how a run that nothing records goes: no store, no log and
// no stop asked from elsewhere, only the checkpoints it is given and
// its Checkpointer.
type InMemory struct {
	// Restore are the checkpoints it goes on from, as a fork goes on from
	// its parent's, already edited; Edits the changes made, told in
	// run_started.
	Restore []*runtime.Checkpoint
	Edits   []runtime.Edit
	// Checkpointer, when set, receives a checkpoint after every node;
	// without it none is made.
	Checkpointer runtime.Checkpointer
}

// PrepareInMemory is PrepareStart for a run kept as m says, in memory:
// its kinds are checked and its inputs prepared, and nothing is recorded.
func (r *Runner) PrepareInMemory(id string, p *dsl.Pipeline, inputs map[string]any, m InMemory) (*Prepared, error) {
	in, err := r.prepare(p, inputs)
	if err != nil {
		return nil, err
	}
	return &Prepared{r: r, run: journal.Run{ID: id, Inputs: in, RemoteInputs: r.RemoteInputs}, p: p, memory: &m}, nil
}

// runInMemory runs a prepared in-memory run. Its events go to r.Sink
// alone: with none, the runtime makes none, so that a benchmark of the
// bare runtime measures no events.
func (pr *Prepared) runInMemory(ctx context.Context) *runtime.Result {
	r, m := pr.r, pr.memory
	return runtime.Run(ctx, r.Kinds, pr.p, pr.run.Inputs, runtime.Options{RunID: pr.run.ID, Edits: m.Edits, Sink: r.Sink,
		LookupEnv: r.LookupEnv, Checkpointer: m.Checkpointer, Restore: m.Restore, Human: r.Human, MaxLoops: r.MaxLoops,
		RemoteInputs: pr.run.RemoteInputs, Ledger: r.Ledger, Clock: r.Clock, Prepared: true})
}
