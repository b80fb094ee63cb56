// Package sqlitejournal is the journal of runs kept in a SQLite run
// store (package store).
package sqlitejournal

import (
	"context"
	"errors"
	"fmt"
	"sync"

	"github.com/flowrun/flowrun/journal"
	"github.com/flowrun/flowrun/runtime"
	"github.com/flowrun/flowrun/store"
)

// Journal keeps runs in a store. The store knows a run's holder by
// process only, so the runs this process holds are tracked here too:
// two resumers in one process must not both win. That makes one Journal
// per store in a process the rule: two would each let a resumer win.
type Journal struct {
	s *store.Store

	mu   sync.Mutex
	held map[string]*store.Recorder
}

// New returns the journal of the runs in s.
func New(s *store.Store) *Journal {
	return &Journal{s: s, held: map[string]*store.Recorder{}}
}

var _ journal.Journal = (*Journal)(nil)

func (j *Journal) Create(ctx context.Context, r journal.Run) error {
	if err := j.s.CreateRun(ctx, ToStore(r)); err != nil {
		return err
	}
	return j.hold(ctx, r.ID)
}

func (j *Journal) Fork(ctx context.Context, parent string, upTo int64, child journal.Run) error {
	if err := j.s.Fork(ctx, parent, upTo, ToStore(child)); err != nil {
		return err
	}
	return j.hold(ctx, child.ID)
}

func (j *Journal) SetSpec(ctx context.Context, id string, spec journal.Spec) error {
	return j.s.SetSpec(ctx, id, spec)
}

// ToStore is r as the store records it: each field has its column, so
// that FromStore reads back all of it.
func ToStore(r journal.Run) *store.Run {
	return &store.Run{ID: r.ID, Pipeline: r.Pipeline, PipelineAbs: r.PipelineAbs, PipelineName: r.PipelineName,
		PipelineHash: r.PipelineHash, PipelineSrc: r.PipelineSrc, PipelineFiles: r.PipelineFiles, Inputs: r.Inputs,
		RemoteInputs: r.RemoteInputs, Spec: r.Spec, ParentRun: r.ParentRun, ParentSeq: r.ParentSeq, ChildOf: r.ChildOf}
}

// FromStore is the journal's record of run r: the store's record less
// what only the store keeps (its holder's pid, its times).
func FromStore(r *store.Run) journal.Run {
	return journal.Run{ID: r.ID, Pipeline: r.Pipeline, PipelineAbs: r.PipelineAbs, PipelineName: r.PipelineName,
		PipelineHash: r.PipelineHash, PipelineSrc: r.PipelineSrc, PipelineFiles: r.PipelineFiles, Inputs: r.Inputs,
		RemoteInputs: r.RemoteInputs, Spec: r.Spec, ParentRun: r.ParentRun, ParentSeq: r.ParentSeq, ChildOf: r.ChildOf,
		Ending: journal.Ending{Status: r.Status, Outputs: r.Outputs, Error: r.Error, Reason: r.Reason, Steps: r.Steps,
			CostUSD: r.CostUSD, Tokens: r.Tokens, Pending: r.Pending}}
}

func (j *Journal) Run(ctx context.Context, id string) (journal.Run, error) {
	r, err := j.s.Run(ctx, id)
	if err != nil {
		return journal.Run{}, err
	}
	return FromStore(r), nil
}

func (j *Journal) Claim(ctx context.Context, id string) error {
	j.mu.Lock()
	_, taken := j.held[id]
	if !taken {
		j.held[id] = nil // reserved while the store is asked
	}
	j.mu.Unlock()
	if taken {
		return fmt.Errorf("run %s: %w in this process", id, journal.ErrClaimed)
	}
	// The store's errors are journal.ErrClaimed and journal.ErrNotFound
	// as they are, and name the holder's pid or the ids close to id.
	if _, err := j.s.Claim(ctx, id); err != nil {
		j.release(id)
		return err
	}
	if err := j.hold(ctx, id); err != nil {
		j.release(id)
		return err
	}
	return nil
}

// hold opens the recorder the holder of run id saves through.
func (j *Journal) hold(ctx context.Context, id string) error {
	rec, err := j.s.Recorder(ctx, id)
	if err != nil {
		return fmt.Errorf("run %s: opening its recorder: %w", id, err)
	}
	j.mu.Lock()
	j.held[id] = rec
	j.mu.Unlock()
	return nil
}

func (j *Journal) release(id string) {
	j.mu.Lock()
	delete(j.held, id)
	j.mu.Unlock()
}

// recorder returns the recorder of a run this process holds.
func (j *Journal) recorder(id string) (*store.Recorder, error) {
	j.mu.Lock()
	defer j.mu.Unlock()
	rec := j.held[id]
	if rec == nil {
		return nil, fmt.Errorf("run %s is not held by this process: create or claim it first", id)
	}
	return rec, nil
}

// Finish records the ending even when what the run buffered cannot be
// committed: a run left running by a process that lives on could not be
// claimed again until it ended. The commit's error comes first.
func (j *Journal) Finish(ctx context.Context, id string, end journal.Ending) error {
	if _, err := j.recorder(id); err != nil {
		return err
	}
	flushed := j.Flush(ctx, id)
	j.release(id)
	if err := j.s.Finish(ctx, id, end); err != nil && !errors.Is(flushed, err) {
		return errors.Join(flushed, err)
	}
	return flushed
}

// Save numbers cp after the run's last checkpoint, as the store's
// recorder does, and stores it.
func (j *Journal) Save(ctx context.Context, id string, cp *runtime.Checkpoint) error {
	rec, err := j.recorder(id)
	if err != nil {
		return err
	}
	return rec.Save(ctx, cp)
}

// Checkpoints commits what this process journaled for the run first: the
// store reads in only the journals of processes that died.
func (j *Journal) Checkpoints(ctx context.Context, id string, upTo int64) ([]*runtime.Checkpoint, error) {
	if err := j.Flush(ctx, id); err != nil {
		return nil, err
	}
	return j.s.Checkpoints(ctx, id, upTo)
}

func (j *Journal) Event(ctx context.Context, id string, e runtime.Event) error {
	rec, err := j.recorder(id)
	if err != nil {
		return err
	}
	rec.Event(e)
	return nil
}

// Events commits the events this process buffered for the run first, so
// that its own reads see them.
func (j *Journal) Events(ctx context.Context, id string) ([]runtime.Event, error) {
	if err := j.Flush(ctx, id); err != nil {
		return nil, err
	}
	return j.s.Events(ctx, id)
}

// Flush commits what the recorder of run id holds, if this process holds
// the run. Its error names the store, not the run: whoever runs the run
// names it.
func (j *Journal) Flush(ctx context.Context, id string) error {
	j.mu.Lock()
	rec := j.held[id]
	j.mu.Unlock()
	if rec == nil {
		return nil
	}
	return rec.Flush(ctx)
}

func (j *Journal) RequestStop(ctx context.Context, id, reason string) error {
	return j.s.RequestStop(ctx, id, reason)
}

func (j *Journal) StopRequested(ctx context.Context, id string) (string, error) {
	return j.s.StopRequested(ctx, id)
}
