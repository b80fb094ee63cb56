package runtime

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"os"
	"slices"
	"sort"
	"strings"
	"sync/atomic"
	"time"

	"github.com/flowrun/flowrun/budget"
	"github.com/flowrun/flowrun/clock"
	"github.com/flowrun/flowrun/dsl"
	"github.com/flowrun/flowrun/jsonvalue"
	"github.com/flowrun/flowrun/llmconf"
)

// Executor runs one kind of node. It reads the node's kind-specific fields
// (n.Loop(), n.Branch(), ...) and returns the node's output. The runtime handles
// everything common to all kinds: when, set, retry, on_error, timeout,
// events and limits.
type Executor interface {
	Execute(ctx context.Context, s *Scope, n *dsl.Node) (Outcome, error)
}

// Outcome is what an executor returns.
type Outcome struct {
	Output any
	// Next overrides the node's next: ("" keeps it): a branch's choice.
	Next string
	// UseAssigned makes the node's output the values its set: assigned.
	UseAssigned bool
}

// Registry maps node kinds to their executors.
type Registry map[dsl.Kind]Executor

// Status is where a run (or a batch, or a batch item's run) stands.
type Status string

// Run statuses. A run ends completed, failed, stopped or waiting; the store
// also reports running and interrupted.
const (
	StatusRunning   Status = "running"
	StatusWaiting   Status = "waiting"
	StatusCompleted Status = "completed"
	StatusFailed    Status = "failed"
	StatusStopped   Status = "stopped"
	// StatusInterrupted is a run recorded as running whose process is
	// gone (killed, crashed, cut off by a closed pipe). It is never
	// written: the store reports it when it reads such a run, so every
	// process sees it at once. A resume continues it.
	StatusInterrupted Status = "interrupted"
)

// Statuses lists every status a run can have, in the order of a run's
// life.
func Statuses() []Status {
	return []Status{StatusRunning, StatusWaiting, StatusCompleted, StatusFailed, StatusStopped, StatusInterrupted}
}

// StatusNames are the names of Statuses, in the same order.
func StatusNames() []string {
	var out []string
	for _, s := range Statuses() {
		out = append(out, string(s))
	}
	return out
}

// ParseStatus reads a run status by its name; an unknown name is an error
// that suggests the closest status and lists them all.
func ParseStatus(name string) (Status, error) {
	names := StatusNames()
	if !slices.Contains(names, name) {
		return "", fmt.Errorf("%s is not a run status%s; the statuses are %s", name, dsl.Suggest(name, names), strings.Join(names, ", "))
	}
	return Status(name), nil
}

// Options configure one run.
type Options struct {
	RunID string
	// ForkOf is the run this one was forked from, told in run_started.
	ForkOf string
	// Edits are the values changed before the run went on, told in
	// run_started (the values themselves are already in the inputs and
	// the restored checkpoints).
	Edits []Edit
	Sink  EventSink
	// LookupEnv reads the names a pipeline declares under env:; os.LookupEnv
	// when nil.
	LookupEnv func(string) (string, bool)
	// Checkpointer, when set, receives a checkpoint after every finished node.
	Checkpointer Checkpointer
	// Restore holds the checkpoints of an earlier attempt at this run: the
	// nodes they name are restored, not run again.
	Restore []*Checkpoint
	// Human answers ask nodes and confirmations; without one they wait.
	Human Human
	// MaxLoops, above zero, caps every loop's iterations (--max-loops).
	MaxLoops int
	// RemoteInputs says the inputs came from a remote caller (the web UI,
	// MCP serve, a cluster job), not from the local user: a file they name
	// is then read inside the pipeline's directory only, like any other
	// (see Scope.UserFile). An image from a remote caller comes as data.
	RemoteInputs bool
	// Ledger, when set, is the cost cap of what the run is part of (a
	// batch's): every model call of the run reserves from it as well as
	// from limits.max_cost_usd.
	Ledger budget.Ledger
	// Clock is what retry backoff waits on (default clock.Real): a test
	// gives a clock.Fake so that waits pass at once.
	Clock clock.Clock
	// Prepared says kinds passed Registry.Check for p and the inputs are
	// what PrepareInputsFrom made of them, for this run: a caller that
	// had to know both before recording the run (the engine's) spares
	// Run doing them again.
	Prepared bool
}

// Result is how a run ended.
type Result struct {
	RunID   string
	Status  Status
	Outputs map[string]any
	Err     error  // why it failed
	Reason  string // why it stopped
	// Limit names the pipeline's limit that stopped it, if one did. A
	// limit counts over the whole run, resumes included: resuming alone
	// stops again.
	Limit   string
	Steps   int
	CostUSD float64
	Tokens  int64
	// Pending is the question a waiting run needs answered, or the
	// confirmation a stopped run was refused (answering yes continues it).
	Pending *Question
}

// UnavailableError says a pipeline uses node kinds this build cannot run.
// Nodes holds one error a node, each wrapping its executor's refusal (a
// *sandbox.UnavailableError, say), so that a caller can tell what to
// install from the errors rather than from their text.
type UnavailableError struct{ Nodes []error }

func (e *UnavailableError) Error() string {
	lines := make([]string, len(e.Nodes))
	for i, err := range e.Nodes {
		lines[i] = err.Error()
	}
	return "cannot run this pipeline:\n  " + strings.Join(lines, "\n  ")
}

// Unwrap lets errors.As find the nodes' own errors.
func (e *UnavailableError) Unwrap() []error { return e.Nodes }

// NodeChecker is an executor that can tell before a run starts that it
// could not run a node of pipeline p in this build (say, an agent listing
// a tool the build lacks), so that the run fails before any model call.
type NodeChecker interface {
	CheckNode(p *dsl.Pipeline, n *dsl.Node) error
}

// Check reports, before anything runs, the nodes (in p and every pipeline
// it calls) whose kind has no executor or that their executor refuses
// (NodeChecker).
func (r Registry) Check(p *dsl.Pipeline) error {
	var missing []error
	dsl.Walk(p, func(p *dsl.Pipeline, n *dsl.Node) {
		if r[n.Kind] == nil {
			missing = append(missing, fmt.Errorf("%s: node %q: node kind %s is not available in this build yet", n.Pos, n.ID, n.Kind))
			return
		}
		if c, ok := r[n.Kind].(NodeChecker); ok {
			if err := c.CheckNode(p, n); err != nil {
				missing = append(missing, fmt.Errorf("%s: node %q: %w", n.Pos, n.ID, err))
			}
		}
	})
	if len(missing) > 0 {
		return &UnavailableError{Nodes: missing}
	}
	return nil
}

// run is what every scope of one run shares.
type run struct {
	id        string
	kinds     Registry
	sink      lockedSink
	steps     atomic.Int64
	maxSteps  int64
	timeout   time.Duration
	lookupEnv func(string) (string, bool)
	journal   *journal
	usage     *usage
	human     Human
	maxLoops  int
	clock     clock.Clock
	userFiles []string // text the user gave as the top pipeline's inputs
}

// Run executes p with the given inputs. Inputs are checked against their
// declarations first; a bad input fails the run before any node starts.
func Run(ctx context.Context, kinds Registry, p *dsl.Pipeline, inputs map[string]any, opts Options) *Result {
	r := &run{id: opts.RunID, kinds: kinds, sink: lockedSink{sink: opts.Sink}, lookupEnv: opts.LookupEnv,
		maxSteps: int64(p.Limits.MaxSteps), timeout: p.Limits.Timeout, human: opts.Human, maxLoops: opts.MaxLoops, clock: opts.Clock}
	if r.id == "" {
		r.id = NewRunID()
	}
	if r.lookupEnv == nil {
		r.lookupEnv = os.LookupEnv
	}
	if r.clock == nil {
		r.clock = clock.Real{}
	}
	r.journal = newJournal(opts.Checkpointer, opts.Restore)
	last := latest(opts.Restore)
	r.steps.Store(last.Steps)
	r.usage = newUsage(p.Limits.MaxCostUSD, last.CostUSD, last.Tokens, opts.Ledger)
	res := &Result{RunID: r.id}
	finish := func() *Result {
		res.Steps = int(r.steps.Load())
		res.CostUSD, res.Tokens = r.usage.totals()
		r.sink.emit(Event{Type: EventRunFinished, Run: r.id, Pipeline: p.Name, Status: res.Status,
			Outputs: res.Outputs, Error: errString(res.Err), Message: res.Reason, CostUSD: res.CostUSD, Tokens: res.Tokens})
		return res
	}
	r.sink.emit(Event{Type: EventRunStarted, Run: r.id, Pipeline: p.Name, ForkOf: opts.ForkOf, Edits: opts.Edits, Restored: last.Seq})
	in, err := inputs, error(nil)
	if !opts.Prepared {
		in, err = prepare(kinds, p, inputs, opts.RemoteInputs)
	}
	if err != nil {
		res.Status, res.Err = StatusFailed, err
		return finish()
	}
	for _, d := range p.Inputs {
		if v, ok := in[d.Name].(string); ok && v != "" && (!d.HasDefault || d.Default != v) && !opts.RemoteInputs {
			r.userFiles = append(r.userFiles, v)
		}
	}
	if r.timeout > 0 {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeoutCause(ctx, r.timeout, &StopError{Reason: fmt.Sprintf("limits.timeout (%s) reached", r.timeout), Limit: "limits.timeout"})
		defer cancel()
	}
	s := r.topScope(p, in, "")
	_, err = s.RunBlock(ctx, p.Nodes)
	outputs, oerr := s.outputs(p)
	var stop *StopError
	var wait *WaitError
	var declined *DeclinedError
	switch {
	case errors.As(err, &declined):
		res.Status, res.Pending, res.Outputs = StatusStopped, &declined.Question, nil
		res.Reason = declined.Error()
	case errors.As(err, &wait):
		res.Status, res.Pending, res.Outputs = StatusWaiting, &wait.Question, nil
		res.Reason = wait.Error()
	case errors.As(err, &stop):
		res.Status, res.Reason, res.Limit, res.Outputs = StatusStopped, r.usage.stopReason(stop), stop.Limit, outputs
	case err != nil:
		res.Status, res.Err = StatusFailed, err
	case oerr != nil:
		res.Status, res.Err = StatusFailed, oerr
	default:
		res.Status, res.Outputs = StatusCompleted, outputs
	}
	return finish()
}

// prepare checks that kinds can run p and prepares its inputs.
func prepare(kinds Registry, p *dsl.Pipeline, inputs map[string]any, remote bool) (map[string]any, error) {
	if err := kinds.Check(p); err != nil {
		return nil, err
	}
	return PrepareInputsFrom(p, inputs, remote)
}

func errString(err error) string {
	if err == nil {
		return ""
	}
	return err.Error()
}

func (r *run) topScope(p *dsl.Pipeline, inputs map[string]any, path string) *Scope {
	s := &Scope{run: r, pipeline: p, path: path}
	s.env.Inputs = inputs
	s.env.State = make(map[string]any, len(p.State))
	for _, v := range p.State {
		s.env.State[v.Name] = v.Initial
	}
	s.env.Nodes = map[string]any{}
	s.env.Run.ID = r.id
	if r.journal != nil {
		s.effects = &effects{}
	}
	if len(p.Env) > 0 {
		s.env.Env = map[string]any{}
		for _, name := range p.Env {
			if v, ok := r.lookupEnv(name); ok {
				s.env.Env[name] = v
			} else {
				s.env.Env[name] = nil
			}
		}
	}
	return s
}

// outputs evaluates the pipeline's outputs: in a top scope.
func (s *Scope) outputs(p *dsl.Pipeline) (map[string]any, error) {
	out := make(map[string]any, len(p.Outputs))
	var errs []error
	for _, o := range p.Outputs {
		v, err := o.Value.Eval(s.refresh())
		if err != nil {
			errs = append(errs, fmt.Errorf("output %q: %w", o.Name, err))
			continue
		}
		out[o.Name] = v
	}
	return out, errors.Join(errs...)
}

// PrepareInputs checks the local user's inputs against p's declarations
// and applies defaults. Unknown and missing inputs, wrong types, and path
// inputs naming files that do not exist are errors.
func PrepareInputs(p *dsl.Pipeline, given map[string]any) (map[string]any, error) {
	return prepareInputs(p, given, func(path string) error {
		if _, err := os.Stat(path); err != nil {
			return fmt.Errorf("file %q does not exist", path)
		}
		return nil
	})
}

// PrepareInputsFrom is PrepareInputs, or, when remote, its form for inputs
// from a remote caller (Options.RemoteInputs): a path input is then a
// data, http or https URL, or names a file inside the pipeline's
// directory; nothing outside it is looked at, so the error is the same
// whether a file is there or not.
func PrepareInputsFrom(p *dsl.Pipeline, given map[string]any, remote bool) (map[string]any, error) {
	if !remote {
		return PrepareInputs(p, given)
	}
	return prepareInputs(p, given, func(path string) error {
		if llmconf.IsImageURL(path) {
			return nil
		}
		if err := p.Files.Check(path); err != nil {
			return fmt.Errorf("%q: %w (a remote caller gives a file as data, or names one inside the pipeline's directory)", path, err)
		}
		return nil
	})
}

// prepareInputs checks given inputs with checkPath for path inputs.
func prepareInputs(p *dsl.Pipeline, given map[string]any, checkPath func(string) error) (map[string]any, error) {
	out := make(map[string]any, len(p.Inputs))
	declared := map[string]*dsl.Input{}
	var names []string
	for _, in := range p.Inputs {
		declared[in.Name] = in
		names = append(names, in.Name)
	}
	var errs, missing []string
	unknown := make([]string, 0)
	for k := range given {
		if declared[k] == nil {
			unknown = append(unknown, k)
		}
	}
	sort.Strings(unknown)
	for _, k := range unknown {
		errs = append(errs, fmt.Sprintf("unknown input %q%s (the pipeline declares: %s)", k, dsl.Suggest(k, names), strings.Join(names, ", ")))
	}
	for _, in := range p.Inputs {
		v, ok := given[in.Name]
		if !ok {
			if !in.HasDefault {
				errs = append(errs, fmt.Sprintf("missing input %q (%s)", in.Name, in.Type))
				missing = append(missing, in.Name)
				continue
			}
			v = in.Default
		}
		if err := jsonvalue.Validate(in.Schema, v); err != nil {
			msg := fmt.Sprintf("input %q: %v", in.Name, err)
			if in.Description != "" { // the declaration says what a valid value is
				msg += "\n    " + strings.TrimSpace(in.Description)
			}
			errs = append(errs, msg)
			continue
		}
		if in.Format == "path" {
			if path, ok := v.(string); ok && path != "" {
				if err := checkPath(path); err != nil {
					errs = append(errs, fmt.Sprintf("input %q: %v", in.Name, err))
					continue
				}
			}
		}
		out[in.Name] = v
	}
	if len(errs) > 0 {
		return nil, &InputsError{Pipeline: p.Path, Problems: errs, Missing: missing}
	}
	return out, nil
}

// InputsError is a run's inputs that do not fit its pipeline's
// declaration, each problem a line.
type InputsError struct {
	Pipeline string
	Problems []string
	Missing  []string // the required inputs not given, so a front end can ask for them
}

func (e *InputsError) Error() string {
	return fmt.Sprintf("invalid inputs for %s:\n  %s", e.Pipeline, strings.Join(e.Problems, "\n  "))
}

// NewRunID returns a sortable, unique run id: UTC time and 4 random bytes.
func NewRunID() string {
	var b [4]byte
	_, _ = rand.Read(b[:])
	return time.Now().UTC().Format("20060102T150405") + "-" + hex.EncodeToString(b[:])
}
