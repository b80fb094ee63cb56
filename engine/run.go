package engine

import (
	"context"
	"errors"

	"github.com/flowrun/flowrun/engine/internal/durable"
	"github.com/flowrun/flowrun/engine/internal/services"
	"github.com/flowrun/flowrun/runtime"
)

// Run is a run the engine started or goes on with, handed back once it is
// recorded and before its first node runs: its id is known at once, its
// events go to RunOptions.Sink as they happen (in order with OnDelta's
// text, which a channel read elsewhere could not keep), and Wait gives
// how it ended. It runs until it ends or the context it was started
// with is done.
type Run struct {
	e    *Engine
	id   string
	stop context.CancelCauseFunc
	done chan struct{}
	res  *runtime.Result
}

// ID is the run's id: a fork's is its new run's.
func (r *Run) ID() string { return r.id }

// Done is closed once the run has ended and is recorded, and what was
// made for it (cassette, traces) is written.
func (r *Run) Done() <-chan struct{} { return r.done }

// Wait waits for the run to end and says how it ended.
func (r *Run) Wait() *runtime.Result {
	<-r.done
	return r.res
}

// Stop stops the run at once, as Ctrl-C would, with reason: the node in
// flight is abandoned and the run ends stopped, resumable. A run of
// another process is stopped with Engine.Stop.
func (r *Run) Stop(reason string) { r.stop(&runtime.StopError{Reason: reason}) }

// Answer waits for the run to end and, when it waits on a question, goes
// on with answer to it (Engine.Answer).
func (r *Run) Answer(ctx context.Context, answer any, o ResumeOptions) (*Run, error) {
	<-r.done
	return r.e.Answer(ctx, r.id, answer, o)
}

// launch runs pr, whose services s are, until it ends or ctx is done;
// Close waits for it.
func (e *Engine) launch(ctx context.Context, s *services.Session, pr *durable.Prepared) *Run {
	ctx, stop := context.WithCancelCause(ctx)
	r := &Run{e: e, id: pr.ID(), stop: stop, done: make(chan struct{})}
	e.runs.Add(1)
	go func() {
		defer e.runs.Done()
		res := pr.Run(ctx)
		stop(nil)
		s.Release()
		r.res = res
		close(r.done)
	}()
	return r
}

// preparing types what kept a run from being recorded: the node kinds
// this host cannot run, inputs or edits that do not fit.
func preparing(err error) error {
	var unavailable *runtime.UnavailableError
	var inputs *runtime.InputsError
	var edit *durable.EditError
	switch {
	case errors.As(err, &unavailable):
		return &HostError{err}
	case errors.As(err, &inputs), errors.As(err, &edit):
		return &InputError{err}
	}
	return err
}
