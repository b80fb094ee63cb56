// Package durable runs pipelines so that they survive: every run is
// recorded in a journal (journal.Journal: the SQLite store's, or
// JetStream's) with a checkpoint after each node, and can be resumed,
// forked from a snapshot, or continued after a failure or a kill without
// redoing finished nodes. It is the engine's: being internal to
// it, no other package can start a run here, so every run gets what the
// engine guarantees (its secrets registered, its services, its spec).
package durable

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"sync"
	"time"

	"github.com/flowrun/flowrun/budget"
	"github.com/flowrun/flowrun/clock"
	"github.com/flowrun/flowrun/dsl"
	"github.com/flowrun/flowrun/journal"
	"github.com/flowrun/flowrun/journal/sqlitejournal"
	"github.com/flowrun/flowrun/runtime"
	"github.com/flowrun/flowrun/store"
)

// Runner starts and resumes runs.
type Runner struct {
	// Journal records the runs it starts, forks and resumes: their
	// records, checkpoints and events, how they end, and the stops asked
	// of them. Nil: Store's (sqlitejournal), one per Runner.
	Journal journal.Journal
	// Store is where Resume reads runs back from (Load), and keeps what
	// only a SQLite store has: the points a fork starts from (snapshot
	// labels and checkpoint numbers) and the state edits made in a
	// checkpoint. A Runner on another journal neither forks nor edits.
	Store *store.Store
	Kinds runtime.Registry
	// Sink also receives every event (the CLI's progress view), besides the store.
	Sink runtime.EventSink
	// LookupEnv reads env: names (default os.LookupEnv). Whoever built
	// Kinds registered the secrets among them (package engine does).
	LookupEnv func(string) (string, bool)
	Human     runtime.Human
	MaxLoops  int
	// RemoteInputs: the inputs of the runs it starts come from a remote
	// caller (runtime.Options.RemoteInputs). The run's record keeps it,
	// so that a resume by any front end honours it.
	RemoteInputs bool
	// Spec is how the runs it starts, forks or resumes go on (models,
	// human policy, replay): recorded with a new run or fork, and with a
	// resumed run when it differs from the one recorded.
	Spec store.RunSpec
	// ChildOf makes the runs it starts child runs of this run (a judge's
	// of the item's run it scores; see store.Run.ChildOf).
	ChildOf string
	// Ledger, when set, is the cost cap the runs are part of (a batch's):
	// see runtime.Options.Ledger.
	Ledger budget.Ledger
	// Log, when set, keeps the runs PrepareLogged prepares in place of the
	// store: their checkpoints and events go to it, and their records are
	// the caller's (a cluster's coordinator keeps them).
	Log journal.Log
	// Clock is what the runs' retry backoff waits on (runtime.Options.Clock).
	Clock clock.Clock

	journalOnce sync.Once
}

// journal is where r records its runs.
func (r *Runner) journal() journal.Journal {
	r.journalOnce.Do(func() {
		if r.Journal == nil {
			r.Journal = sqlitejournal.New(r.Store)
		}
	})
	return r.Journal
}

// Start records a new run of p and runs it. A run whose record cannot be
// written (the store fails or its file is truncated or replaced mid-run)
// stops at its next checkpoint and ends failed, with the store's error:
// it never reports completed.
func (r *Runner) Start(ctx context.Context, p *dsl.Pipeline, inputs map[string]any) (*runtime.Result, error) {
	return r.StartAs(ctx, runtime.NewRunID(), p, inputs)
}

// StartAs is Start with a run id the caller chose (runtime.NewRunID), so
// that it can record the id elsewhere before the run exists: a batch
// links its item to the run first, and a kill in between leaves a link to
// a run that never started, never a run that no item knows.
func (r *Runner) StartAs(ctx context.Context, id string, p *dsl.Pipeline, inputs map[string]any) (*runtime.Result, error) {
	pr, err := r.PrepareStart(ctx, id, p, inputs)
	if err != nil {
		return nil, err
	}
	return pr.Run(ctx), nil
}

// Prepared is a run recorded in a journal (a new run, a fork, or a run
// claimed to go on), with its node kinds checked and its inputs prepared,
// each once: everything Start and Continue do before the run's first
// node, so that a caller knows the run's id, and every reason it cannot
// run, before it runs.
type Prepared struct {
	r *Runner
	// run is the run's id, inputs and whether they are a remote caller's.
	run  journal.Run
	rec  *runLog
	told runtime.Options
	p    *dsl.Pipeline
	// held is the journal that holds the run until it ends; nil for a run
	// kept in a Log alone, whose holder is its caller.
	held    journal.Journal
	restore []*runtime.Checkpoint
	memory  *InMemory // set for a run nothing records
}

// ID is the prepared run's id.
func (pr *Prepared) ID() string { return pr.run.ID }

// Run runs the prepared run to its end; call it once.
func (pr *Prepared) Run(ctx context.Context) *runtime.Result {
	if pr.memory != nil {
		return pr.runInMemory(ctx)
	}
	return pr.execute(ctx)
}

// PrepareStart is StartAs up to the run's first node: a
// *runtime.UnavailableError says r's Kinds cannot run p, a
// *runtime.InputsError that inputs do not fit it, and nothing is recorded
// for either.
func (r *Runner) PrepareStart(ctx context.Context, id string, p *dsl.Pipeline, inputs map[string]any) (*Prepared, error) {
	in, err := r.prepare(p, inputs)
	if err != nil {
		return nil, err
	}
	run, err := NewRunRecord(id, p, in)
	if err != nil {
		return nil, err
	}
	run.RemoteInputs, run.Spec, run.ChildOf = r.RemoteInputs, r.Spec, r.ChildOf
	j := r.journal()
	if err := j.Create(ctx, run); err != nil {
		return nil, err
	}
	return &Prepared{r: r, run: run, rec: &runLog{log: j, id: id}, p: p, held: j}, nil
}

// PrepareLogged is PrepareStart for a run kept in r.Log: a new run, or
// one that goes on from the checkpoints the log holds of it (a cluster's
// item that another worker began). Nothing is recorded in the store.
func (r *Runner) PrepareLogged(ctx context.Context, id string, p *dsl.Pipeline, inputs map[string]any) (*Prepared, error) {
	in, err := r.prepare(p, inputs)
	if err != nil {
		return nil, err
	}
	restore, err := r.Log.Checkpoints(ctx, id, 0)
	if err != nil {
		return nil, err
	}
	run := journal.Run{ID: id, Inputs: in, RemoteInputs: r.RemoteInputs}
	return &Prepared{r: r, run: run, rec: &runLog{log: r.Log, id: id}, p: p, restore: restore}, nil
}

// prepare checks that r's Kinds can run p and prepares the inputs of a
// new run of it: what every new run does once before anything is
// recorded for it.
func (r *Runner) prepare(p *dsl.Pipeline, inputs map[string]any) (map[string]any, error) {
	if err := r.Kinds.Check(p); err != nil {
		return nil, err
	}
	return runtime.PrepareInputsFrom(p, inputs, r.RemoteInputs)
}

// runLog is one run's part of a journal.Log (a Journal's, or a Log
// alone): where its checkpoints and events go as it runs.
type runLog struct {
	log journal.Log
	id  string
}

func (l *runLog) Save(ctx context.Context, cp *runtime.Checkpoint) error {
	return l.log.Save(ctx, l.id, cp)
}

// Event drops an event the log would not take, as a killed process
// loses its last few: a run's events are its timeline, not its state.
func (l *runLog) Event(e runtime.Event) { _ = l.log.Event(context.Background(), l.id, e) }

func (l *runLog) Flush(ctx context.Context) error { return l.log.Flush(ctx, l.id) }

// NewRunRecord is the record of a new run of p: the pipeline with every
// file its load read, and the run's inputs.
func NewRunRecord(id string, p *dsl.Pipeline, inputs map[string]any) (journal.Run, error) {
	main := filepath.ToSlash(filepath.Base(p.Path))
	files := make(map[string]string, len(p.Sources))
	for _, s := range p.Sources {
		files[s.Path] = s.Content
	}
	// The text the load read, not the file as it is now: it is what runs.
	// A pipeline loaded as part of another (a batch's judge pipeline)
	// kept no text of its own, and is read.
	src, read := files[main]
	switch {
	case p.Generated != "":
		src = p.Generated
	case !read:
		b, err := os.ReadFile(p.Path)
		if err != nil {
			return journal.Run{}, fmt.Errorf("reading %s: %w", p.Path, err)
		}
		src = string(b)
	}
	abs, _ := filepath.Abs(p.Path)
	return journal.Run{ID: id, Pipeline: p.Path, PipelineAbs: abs, PipelineName: p.Name,
		PipelineHash: p.Hash, PipelineSrc: src, PipelineFiles: files, Inputs: inputs}, nil
}

// ResumeOptions say how to resume.
type ResumeOptions struct {
	// AllowChanged resumes even if the pipeline file changed since the run started.
	AllowChanged bool
	// From forks: a new run continues from this snapshot label or checkpoint
	// number of the given run, which is left untouched.
	From string
	// Edits are values to go on with in place of the recorded ones (see
	// Continue).
	Edits []runtime.Edit
}

// Resume continues a run from its last checkpoint (or forks it, with
// From). Finished nodes are restored, not run again; a failed node runs
// again with the same inputs.
func (r *Runner) Resume(ctx context.Context, runID string, opts ResumeOptions) (*runtime.Result, error) {
	prev, p, err := Load(ctx, r.Store, runID, opts.AllowChanged)
	if err != nil {
		return nil, err
	}
	return r.Continue(ctx, prev, p, opts.From, opts.Edits)
}

// Load reads run runID and loads its pipeline as it is now, refusing a
// pipeline changed since the run started unless allowChanged: what a
// resume needs before it can build the node kinds for that pipeline.
func Load(ctx context.Context, st *store.Store, runID string, allowChanged bool) (*store.Run, *dsl.Pipeline, error) {
	prev, err := st.Run(ctx, runID)
	if err != nil {
		return nil, nil, err
	}
	p, ds := dsl.Load(prev.PipelineAbs)
	if p == nil {
		return nil, nil, fmt.Errorf("run %s: its pipeline %s no longer loads:\n%s", runID, prev.Pipeline, ds)
	}
	if p.Hash != prev.PipelineHash && !allowChanged {
		return nil, nil, changed(runID, prev, p)
	}
	return prev, p, nil
}

// Continue resumes run prev, whose pipeline Load loaded as p, with r's
// Kinds; from, when set, forks it from that snapshot label or checkpoint
// number into a new run and leaves prev untouched. edits, checked
// against p's declarations first (see CheckEdits), change state
// variables at the checkpoint the run goes on from and, in a fork,
// inputs; run_started records them.
func (r *Runner) Continue(ctx context.Context, prev *store.Run, p *dsl.Pipeline, from string, edits []runtime.Edit) (*runtime.Result, error) {
	pr, err := r.PrepareContinue(ctx, sqlitejournal.FromStore(prev), p, from, edits)
	if err != nil {
		return nil, err
	}
	return pr.Run(ctx), nil
}

// PrepareContinue is Continue, of run prev as r's Journal records it,
// up to the run's first node: the fork is recorded, or the run claimed,
// and the edits made.
func (r *Runner) PrepareContinue(ctx context.Context, prev journal.Run, p *dsl.Pipeline, from string, edits []runtime.Edit) (*Prepared, error) {
	if err := r.Kinds.Check(p); err != nil {
		return nil, err
	}
	runID, forkOf := prev.ID, prev.ParentRun
	remote := prev.RemoteInputs || r.RemoteInputs
	if r.Store == nil && (from != "" || len(edits) > 0) {
		return nil, fmt.Errorf("run %s: forks and edits are made in a SQLite run store, and this journal is not one", runID)
	}
	var upTo int64
	if from != "" {
		seq, err := r.Store.Point(ctx, runID, from)
		if err != nil {
			return nil, err
		}
		upTo = seq
	} else if _, inputs := splitEdits(edits); len(inputs) > 0 {
		return nil, &EditError{errors.New("inputs can be edited only in a fork, which starts a new run with them: name the checkpoint to fork from")}
	}
	j := r.journal()
	inputs, editSeq := prev.Inputs, int64(0)
	if len(edits) > 0 {
		points, err := j.Checkpoints(ctx, runID, upTo)
		if err != nil {
			return nil, err
		}
		if from != "" && upTo == 0 {
			points = nil
		}
		if inputs, editSeq, err = applyEdits(p, prev.Inputs, points, edits); err != nil {
			return nil, err
		}
	}
	inputs, err := runtime.PrepareInputsFrom(p, inputs, remote)
	if _, edited := splitEdits(edits); err != nil && len(edited) > 0 {
		return nil, &EditError{err}
	}
	if err != nil {
		return nil, err
	}
	// From here the journal holds the run; a failure before it runs
	// releases it, ended as release says.
	var release journal.Ending
	if from != "" {
		child, err := NewRunRecord(runtime.NewRunID(), p, inputs)
		if err != nil {
			return nil, err
		}
		child.Pipeline, child.RemoteInputs, child.Spec = prev.Pipeline, prev.RemoteInputs, r.Spec
		if err := j.Fork(ctx, runID, upTo, child); err != nil {
			return nil, err
		}
		forkOf, runID = runID, child.ID
		release = journal.Ending{Status: runtime.StatusFailed}
	} else {
		if prev.Status == runtime.StatusCompleted {
			return nil, &CompletedError{Run: runID}
		}
		if err := j.Claim(ctx, runID); err != nil {
			return nil, err
		}
		release = prev.Ending
	}
	restore, err := r.goOn(ctx, j, prev, runID, editSeq, edits)
	if err != nil {
		if release.Status == runtime.StatusFailed {
			release.Error = err.Error()
		}
		return nil, errors.Join(err, j.Finish(context.WithoutCancel(ctx), runID, release))
	}
	run := journal.Run{ID: runID, Inputs: inputs, RemoteInputs: remote}
	return &Prepared{r: r, run: run, rec: &runLog{log: j, id: runID}, told: runtime.Options{ForkOf: forkOf, Edits: edits},
		p: p, held: j, restore: restore}, nil
}

// goOn makes ready run runID, which j holds, to go on from prev (itself,
// or the run it forks): its spec recorded where r's differs, the state
// edits made in its checkpoint editSeq (when above 0). It returns the
// checkpoints the run goes on from.
func (r *Runner) goOn(ctx context.Context, j journal.Journal, prev journal.Run, runID string, editSeq int64, edits []runtime.Edit) ([]*runtime.Checkpoint, error) {
	if runID == prev.ID && !reflect.DeepEqual(prev.Spec, r.Spec) {
		if err := j.SetSpec(ctx, runID, r.Spec); err != nil {
			return nil, err
		}
	}
	if editSeq > 0 {
		state, _ := splitEdits(edits)
		if err := r.Store.EditState(ctx, runID, editSeq, state); err != nil {
			return nil, err
		}
	}
	return j.Checkpoints(ctx, runID, 0)
}

// execute runs the prepared run, recording into its log; told says what
// run_started tells of where it came from (ForkOf, Edits).
func (pr *Prepared) execute(ctx context.Context) *runtime.Result {
	r, run, rec := pr.r, pr.run, pr.rec
	sink := &tee{rec: rec, show: r.Sink}
	ctx, stop := context.WithCancelCause(ctx)
	watched := pr.watchStop(ctx, stop)
	res := runtime.Run(ctx, r.Kinds, pr.p, run.Inputs, runtime.Options{RunID: run.ID, ForkOf: pr.told.ForkOf, Edits: pr.told.Edits, Sink: sink,
		LookupEnv: r.LookupEnv, Checkpointer: rec, Restore: pr.restore, Human: r.Human, MaxLoops: r.MaxLoops, RemoteInputs: run.RemoteInputs,
		Ledger: r.Ledger, Clock: r.Clock, Prepared: true})
	stop(nil)
	<-watched
	// The run's record must be written even when ctx was cancelled (Ctrl-C).
	bg := context.WithoutCancel(ctx)
	var recording error
	if err := rec.Flush(bg); err != nil {
		recording = err
		recordingFailed(res, err)
	}
	// A run whose recording failed already says why; its Finish, which
	// fails on the same store, would only say it again.
	if pr.held != nil {
		if err := pr.held.Finish(bg, run.ID, Ending(res)); err != nil && recording == nil {
			recording = err
			recordingFailed(res, err)
		}
	}
	sink.finish(res, recording != nil)
	return res
}

// Ending is how a run that ended with res is recorded in its journal.
func Ending(res *runtime.Result) journal.Ending {
	end := journal.Ending{Status: res.Status, Outputs: res.Outputs, Reason: res.Reason, Steps: res.Steps,
		CostUSD: res.CostUSD, Tokens: int(res.Tokens), Pending: res.Pending}
	if res.Err != nil {
		end.Error = res.Err.Error()
	}
	return end
}

// stopPoll is how often a run looks for a stop asked by another process.
const stopPoll = 250 * time.Millisecond

// watchStop cancels ctx with the reason of a stop another process asks
// for in the run's journal (journal.Journal.RequestStop, the web UI), as
// Ctrl-C would: the node in flight is abandoned and the run ends stopped,
// resumable. It returns once ctx is done. A failed read is retried at the
// next tick: a journal that keeps failing fails the run through its log.
func (pr *Prepared) watchStop(ctx context.Context, stop context.CancelCauseFunc) <-chan struct{} {
	done := make(chan struct{})
	if pr.held == nil {
		// A run kept in a log is stopped by its caller, through ctx.
		close(done)
		return done
	}
	go func() {
		defer close(done)
		tick := time.NewTicker(stopPoll)
		defer tick.Stop()
		for {
			select {
			case <-ctx.Done():
				return
			case <-tick.C:
			}
			if reason, err := pr.held.StopRequested(ctx, pr.run.ID); err == nil && reason != "" {
				stop(&runtime.StopError{Reason: reason})
				return
			}
		}
	}()
	return done
}

// recordingFailed makes a run whose record could not be written a failed
// run: what it did is not all in the store, so it must not look
// completed. Its error says why, after the run's own error if it had one.
func recordingFailed(res *runtime.Result, err error) {
	err = fmt.Errorf("recording the run: %w", err)
	if res.Status == runtime.StatusFailed && res.Err != nil {
		err = errors.Join(res.Err, err)
	}
	res.Status, res.Err, res.Reason = runtime.StatusFailed, err, ""
	res.Outputs, res.Pending = nil, nil
}

// tee records every event and shows it; it shows the run's end only once
// the run is recorded, as it was recorded.
type tee struct {
	rec  *runLog
	show runtime.EventSink
	end  *runtime.Event
}

func (t *tee) Event(e runtime.Event) {
	t.rec.Event(e)
	if t.show == nil {
		return
	}
	if e.Type == runtime.EventRunFinished {
		t.end = &e
		return
	}
	t.show.Event(e)
}

// finish shows the run's end; failed says recording it failed, which
// makes the run failed whatever the runtime said.
func (t *tee) finish(res *runtime.Result, failed bool) {
	if t.show == nil || t.end == nil {
		return
	}
	e := *t.end
	if failed {
		e.Status, e.Error, e.Message, e.Outputs = res.Status, res.Err.Error(), "", nil
	}
	t.show.Event(e)
}

// ChangedError says files of a run's pipeline changed since it started.
type ChangedError struct {
	Run, Path string
	Changes   []string // per file: its path and what differs
}

func (e *ChangedError) Error() string {
	return fmt.Sprintf("run %s: %s changed since the run started; resuming could mix two versions of the pipeline.\n%s",
		e.Run, e.Path, strings.Join(e.Changes, "\n"))
}

// CompletedError says a run to resume has completed: only a fork of it
// (from one of its snapshots or checkpoints) runs part of it again.
type CompletedError struct{ Run string }

func (e *CompletedError) Error() string { return fmt.Sprintf("run %s already completed", e.Run) }

// changed says which of the files a run's pipeline read have changed. A run
// recorded before the store kept every file has only its pipeline file.
func changed(runID string, prev *store.Run, p *dsl.Pipeline) *ChangedError {
	return &ChangedError{Run: runID, Path: prev.Pipeline, Changes: Changes(prev, p)}
}

// Changes names, file by file and line by line, what differs between the
// files run prev's pipeline read and what pipeline p read now.
func Changes(prev *store.Run, p *dsl.Pipeline) []string {
	var was []dsl.Source
	for path, content := range prev.PipelineFiles {
		was = append(was, dsl.Source{Path: path, Content: content})
	}
	now := p.Sources
	if len(was) == 0 {
		main := filepath.ToSlash(filepath.Base(p.Path))
		was = []dsl.Source{{Path: main, Content: prev.PipelineSrc}}
		for _, s := range p.Sources {
			if s.Path == main {
				now = []dsl.Source{s}
			}
		}
	}
	return dsl.SourceChanges(was, now, diffLines)
}

// diffLines names the lines that differ between two versions of a file,
// at most ten of them.
func diffLines(old, cur string) string {
	a, b := strings.Split(old, "\n"), strings.Split(cur, "\n")
	var out []string
	for i := 0; i < max(len(a), len(b)) && len(out) < 10; i++ {
		var x, y string
		if i < len(a) {
			x = a[i]
		}
		if i < len(b) {
			y = b[i]
		}
		if x != y {
			out = append(out, fmt.Sprintf("  line %d: was %q, now %q", i+1, x, y))
		}
	}
	if len(a) != len(b) {
		out = append(out, fmt.Sprintf("  the file had %d lines and now has %d", len(a), len(b)))
	}
	return strings.Join(out, "\n")
}

// Recorded is run's pipeline as the run recorded it, even when its file
// changed since (the files it refers to are read as they are now), or as
// the file is now when the recorded text no longer loads; nil with the
// diagnostics when neither loads.
func Recorded(run *store.Run) (*dsl.Pipeline, dsl.Diagnostics) {
	p, ds := dsl.LoadSource(run.PipelineAbs, []byte(run.PipelineSrc))
	if p == nil {
		p, ds = dsl.Load(run.PipelineAbs)
	}
	return p, ds
}
