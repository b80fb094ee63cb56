package runtime

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"math/rand/v2"
	"runtime/debug"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/flowrun/flowrun/dsl"
	"github.com/flowrun/flowrun/errclass"
)

// Flow is how a block ended.
type Flow int

const (
	FlowNormal   Flow = iota
	FlowBreak         // next: break
	FlowContinue      // next: continue
	FlowEnd           // next: end
)

// Scope is where a block runs: its expression environment (state, node
// outputs, loop and map variables) and its place in the run. The top of a
// run, each map item and each parallel branch has its own; loops share
// their enclosing scope. A scope is used by one goroutine at a time.
type Scope struct {
	run      *run
	pipeline *dsl.Pipeline
	path     string // prefix of the paths of nodes run here, "refine[2]/"
	env      dsl.Env
	last     any            // output of the last node that finished here
	written  *[]string      // state keys written, in order, when the parent must replay them
	base     map[string]any // the state when this branch scope began, for merges
	effects  *effects       // what nodes wrote, when the run keeps checkpoints
	mem      memories
	attempt  int // the running node's attempt, from 1
	// ledID is the last node that finished here other than a branch, led
	// its output: what a question's context shows as having led to it. A
	// branch's own output ({case, next}) says only where it went; what its
	// condition read came before it. Its path is built when a question
	// needs it: not once per node.
	ledID string
	led   any
}

// refresh brings run-wide values into the environment before an evaluation.
func (s *Scope) refresh() *dsl.Env {
	s.env.Run.Step = int(s.run.steps.Load())
	cost, tokens := s.run.usage.totals()
	s.env.Run.CostUSD, s.env.Run.Tokens = cost, int(tokens)
	return &s.env
}

// evalError classes an evaluation's failure: expression, unless the
// evaluation named its class (expression_limit).
func evalError(err error) error {
	class := errclass.Of(err)
	if class == "" {
		class = errclass.Expression
	}
	return &classedError{class: class, err: err}
}

// Eval evaluates an expression in this scope.
func (s *Scope) Eval(e *dsl.Expr) (any, error) {
	v, err := e.Eval(s.refresh())
	if err != nil {
		return nil, evalError(err)
	}
	return v, nil
}

// EvalBool evaluates a condition in this scope.
func (s *Scope) EvalBool(e *dsl.Expr) (bool, error) {
	b, err := e.EvalBool(s.refresh())
	if err != nil {
		return false, evalError(err)
	}
	return b, nil
}

// EvalValue evaluates a value field in this scope.
func (s *Scope) EvalValue(v *dsl.Value) (any, error) {
	x, err := v.Eval(s.refresh())
	if err != nil {
		return nil, evalError(err)
	}
	return x, nil
}

// Render renders a template in this scope.
func (s *Scope) Render(t *dsl.Template) (string, error) {
	x, err := t.Render(s.refresh())
	if err != nil {
		return "", evalError(err)
	}
	return x, nil
}

// Emit sends an event with this run's id.
func (s *Scope) Emit(e Event) {
	e.Run = s.run.id
	s.run.sink.emit(e)
}

// Assign evaluates every value first and then writes them all, so that the
// values see the state as it was before the node's writes. It returns the
// values written, by key.
func (s *Scope) Assign(as []*dsl.Assign) (map[string]any, error) {
	return s.assign(as, true)
}

// assign is Assign; the map of values written is built only when keep is
// set (a set node's output), as most nodes' set: only writes the state.
func (s *Scope) assign(as []*dsl.Assign, keep bool) (map[string]any, error) {
	switch len(as) {
	case 0:
		return nil, nil
	case 1:
		// The common case needs no buffer: nothing else reads the state.
		v, err := s.EvalValue(as[0].Value)
		if err != nil {
			return nil, fmt.Errorf("set %s: %w", as[0].Key, err)
		}
		s.write(as[0].Key, v)
		if !keep {
			return nil, nil
		}
		return map[string]any{as[0].Key: v}, nil
	}
	var buf [8]any
	vals := buf[:0]
	for _, a := range as {
		v, err := s.EvalValue(a.Value)
		if err != nil {
			return nil, fmt.Errorf("set %s: %w", a.Key, err)
		}
		vals = append(vals, v)
	}
	for i, a := range as {
		s.write(a.Key, vals[i])
	}
	if !keep {
		return nil, nil
	}
	out := make(map[string]any, len(as))
	for i, a := range as {
		out[a.Key] = vals[i]
	}
	return out, nil
}

// write is a set: of one variable: an update combined with the current
// value when the variable declares a merge, else the new value.
func (s *Scope) write(key string, v any) {
	if m := s.pipeline.MergeOf(key); m != dsl.MergeNone {
		v = m.Apply(s.env.State[key], v)
	}
	s.SetState(key, v)
}

// SetState writes one state variable.
func (s *Scope) SetState(key string, v any) {
	s.env.State[key] = v
	if s.written != nil {
		*s.written = append(*s.written, key)
	}
	if s.effects != nil {
		s.effects.state = append(s.effects.state, key)
	}
}

// setOutput records a node's output in this scope.
func (s *Scope) setOutput(id string, v any) {
	s.env.Nodes[id] = v
	if s.effects != nil {
		s.effects.nodes = append(s.effects.nodes, id)
	}
}

// Output returns the output of a node that ran in this scope.
func (s *Scope) Output(id string) any { return s.env.Nodes[id] }

// LastOutput is the output of the last node that finished in this scope.
func (s *Scope) LastOutput() any { return s.last }

// Path is the path a node with this id has in this scope.
func (s *Scope) Path(id string) string { return s.path + id }

// Loop is the innermost running loop's variables.
func (s *Scope) Loop() dsl.LoopInfo { return s.env.Loop }

// SetLoop sets the loop variables and returns the previous ones.
func (s *Scope) SetLoop(l dsl.LoopInfo) dsl.LoopInfo {
	prev := s.env.Loop
	s.env.Loop = l
	return prev
}

// Child is a new scope for one map item or parallel branch, named by path
// segment seg ("fan[3]/"). It starts from this scope's state and node
// outputs; what it writes stays in it until the parent applies it.
func (s *Scope) Child(seg string, trackWrites bool) *Scope {
	c := &Scope{run: s.run, pipeline: s.pipeline, path: s.path + seg, env: s.env}
	c.env.State = maps.Clone(s.env.State)
	c.env.Nodes = maps.Clone(s.env.Nodes)
	if trackWrites {
		c.written = new([]string)
		if s.pipeline.HasMerges() {
			c.base = maps.Clone(s.env.State)
		}
	}
	if s.effects != nil {
		c.effects = &effects{}
	}
	c.mem = s.mem.clone()
	return c
}

// Join applies a branch scope's state writes, in the order it made them,
// and makes its node outputs visible here.
func (s *Scope) Join(c *Scope) {
	s.JoinState(c)
	for k, v := range c.env.Nodes {
		if s.env.Nodes[k] != nil || v != nil {
			s.setOutput(k, v)
		}
	}
	s.joinMemories(c)
}

// JoinState applies a branch scope's state writes, in the order it made
// them; a variable that declares a merge combines what the branch added.
func (s *Scope) JoinState(c *Scope) {
	if c.written == nil {
		return
	}
	done := map[string]bool{}
	for _, k := range *c.written {
		m := s.pipeline.MergeOf(k)
		switch {
		case m == dsl.MergeNone:
			s.SetState(k, c.env.State[k])
		case !done[k]:
			done[k] = true
			s.SetState(k, m.Join(s.env.State[k], c.base[k], c.env.State[k]))
		}
	}
}

// SetItem sets a map item's variables.
func (s *Scope) SetItem(item any, index int) {
	s.env.Item, s.env.Index = item, index
}

// RunPipeline runs another pipeline as part of this run (a call node):
// same step budget, limits and event stream; its own state. Its nodes are
// checkpointed under this scope's path plus seg.
func (s *Scope) RunPipeline(ctx context.Context, p *dsl.Pipeline, inputs map[string]any, seg string) (map[string]any, error) {
	return s.runPipeline(ctx, p, inputs, seg, true)
}

// RunTool runs a pipeline that implements a tool an agent called. It is
// not checkpointed: the agent node is the unit that resumes, and a tool
// call's arguments may differ the next time the model is asked.
func (s *Scope) RunTool(ctx context.Context, p *dsl.Pipeline, args map[string]any, seg string) (map[string]any, error) {
	return s.runPipeline(ctx, p, args, seg, false)
}

// ToolScope is where a tool implemented by one model call (an llm tool)
// runs: its templates see the call's arguments as inputs, and run and env
// as here, but no state or node outputs; its model calls are addressed
// under this scope's path plus seg. It writes nothing back.
func (s *Scope) ToolScope(seg string, args map[string]any) *Scope {
	c := &Scope{run: s.run, pipeline: s.pipeline, path: s.path + seg, attempt: s.attempt}
	c.env.Inputs, c.env.Loop, c.env.Run, c.env.Env = args, s.env.Loop, s.env.Run, s.env.Env
	return c
}

func (s *Scope) runPipeline(ctx context.Context, p *dsl.Pipeline, inputs map[string]any, seg string, journaled bool) (map[string]any, error) {
	in, err := PrepareInputs(p, inputs)
	if err != nil {
		return nil, Errorf(errclass.Critical, "%w", err)
	}
	sub := s.run.topScope(p, in, s.path+seg)
	if !journaled {
		sub.effects = nil
	}
	if _, err := sub.RunBlock(ctx, p.Nodes); err != nil {
		return nil, err
	}
	out, err := sub.outputs(p)
	if err != nil {
		return nil, evalError(err)
	}
	return out, nil
}

// RunBlockAt runs a block with seg appended to this scope's path, the way a
// loop runs its body once per iteration.
func (s *Scope) RunBlockAt(ctx context.Context, seg string, b dsl.Block) (Flow, error) {
	prev := s.path
	s.path += seg
	defer func() { s.path = prev }()
	return s.RunBlock(ctx, b)
}

// RunIteration runs a loop's body once: RunBlockAt with the segment
// "id[iteration]/", built in one allocation.
func (s *Scope) RunIteration(ctx context.Context, id string, iteration int, b dsl.Block) (Flow, error) {
	var p strings.Builder
	p.Grow(len(s.path) + len(id) + 23)
	p.WriteString(s.path)
	p.WriteString(id)
	p.WriteByte('[')
	var digits [20]byte
	p.Write(strconv.AppendInt(digits[:0], int64(iteration), 10))
	p.WriteString("]/")
	prev := s.path
	s.path = p.String()
	defer func() { s.path = prev }()
	return s.RunBlock(ctx, b)
}

// RunBlock runs sibling nodes in order, following next: jumps.
func (s *Scope) RunBlock(ctx context.Context, b dsl.Block) (Flow, error) {
	for i := 0; i < len(b); {
		next, err := s.runNode(ctx, b[i])
		if err != nil {
			return FlowNormal, err
		}
		switch next {
		case "":
			i++
		case dsl.NextEnd:
			return FlowEnd, nil
		case dsl.NextBreak:
			return FlowBreak, nil
		case dsl.NextContinue:
			return FlowContinue, nil
		default:
			j := i + 1
			for j < len(b) && b[j].ID != next {
				j++
			}
			i = j
		}
	}
	return FlowNormal, nil
}

// stopCheck turns a finished run context into the reason the run stops.
func stopCheck(ctx context.Context) error {
	if ctx.Err() == nil {
		return nil
	}
	var stop *StopError
	if errors.As(context.Cause(ctx), &stop) {
		return stop
	}
	return &StopError{Reason: "cancelled"}
}

// CountStep counts a step that is not a node, an MCP tool call, toward
// limits.max_steps (and in the checkpoint of the node making it, so that a
// resumed run counts it again), and stops the run past the limit.
func (s *Scope) CountStep(ctx context.Context, what string) error {
	countStep(ctx)
	if step := s.run.steps.Add(1); s.run.maxSteps > 0 && step > s.run.maxSteps {
		return &StopError{Reason: fmt.Sprintf("limits.max_steps (%d) reached before %s", s.run.maxSteps, what), Limit: "limits.max_steps"}
	}
	return nil
}

// runNode runs one node with its policies and returns where to go next.
func (s *Scope) runNode(ctx context.Context, n *dsl.Node) (string, error) {
	if err := stopCheck(ctx); err != nil {
		return "", err
	}
	// The node's when: and set: expressions stop when the run does.
	prev := s.env.SetContext(ctx)
	defer s.env.SetContext(prev)
	var m mark
	if s.effects != nil {
		if cp := s.run.journal.lookup(s.Path(n.ID)); cp != nil {
			return s.restore(n, cp), nil
		}
		m = s.effects.begin()
		defer s.effects.end()
		ctx = &stepCounter{Context: ctx}
	}
	if n.When != nil {
		ok, err := s.EvalBool(n.When)
		if err != nil {
			return s.fail(ctx, n, err, time.Time{}, m)
		}
		if !ok {
			s.setOutput(n.ID, nil)
			s.emitNode(EventNodeSkipped, n, Event{})
			return "", nil
		}
	}
	if n.Confirm {
		if err := s.confirm(ctx, n); err != nil {
			return "", err
		}
	}
	step := s.run.steps.Add(1)
	countStep(ctx)
	if s.run.maxSteps > 0 && step > s.run.maxSteps {
		return "", &StopError{Reason: fmt.Sprintf("limits.max_steps (%d) reached before node %q", s.run.maxSteps, s.Path(n.ID)), Limit: "limits.max_steps"}
	}
	exec := s.run.kinds[n.Kind]
	if exec == nil {
		return "", &NodeError{Path: s.Path(n.ID), Class: errclass.Critical, Err: fmt.Errorf("node kind %s is not available in this build yet", n.Kind)}
	}
	var start time.Time // only events need the time
	if s.run.sink.sink != nil {
		start = time.Now()
		s.emitNode(EventNodeStarted, n, Event{Time: start})
	}
	attempts := 1
	if n.Retry != nil {
		attempts = n.Retry.MaxAttempts
	}
	defer func(prev int) { s.attempt = prev }(s.attempt)
	for attempt := 1; ; attempt++ {
		s.attempt = attempt
		out, err := s.try(ctx, exec, n)
		if err == nil {
			return s.succeed(ctx, n, out, start, m)
		}
		if stop := stopCheck(ctx); stop != nil {
			return "", stop
		}
		if EndsRun(err) {
			return "", err
		}
		class := classOf(err)
		if attempt >= attempts || !retryable(class, n.Retry.RetryOn) || retriesSpent(err) {
			return s.fail(ctx, n, err, start, m)
		}
		wait := backoff(n.Retry.Backoff, attempt)
		s.emitNode(EventNodeRetry, n, Event{Attempt: attempt + 1, Error: err.Error(), Class: class, DurationMS: ms(wait)})
		if s.run.clock.Sleep(ctx, wait) != nil {
			return "", stopCheck(ctx)
		}
	}
}

// retriesSpent reports an error whose own layer already retried it under
// the node's policy (a model call's recoverable error): running the node
// again would multiply the attempts the user asked for.
func retriesSpent(err error) bool {
	var spent interface{ RetriesSpent() bool }
	return errors.As(err, &spent) && spent.RetriesSpent()
}

// emitNode sends a node event. With no sink it costs nothing, not even the
// node's path.
func (s *Scope) emitNode(typ string, n *dsl.Node, e Event) {
	if s.run.sink.sink == nil {
		return
	}
	e.Type, e.Path, e.Node, e.Kind = typ, s.Path(n.ID), n.ID, string(n.Kind)
	s.Emit(e)
}

func (s *Scope) try(ctx context.Context, exec Executor, n *dsl.Node) (Outcome, error) {
	if n.Timeout <= 0 {
		return execute(ctx, exec, s, n)
	}
	nctx, cancel := context.WithTimeout(ctx, n.Timeout)
	defer cancel()
	out, err := execute(nctx, exec, s, n)
	if err != nil && nctx.Err() != nil && ctx.Err() == nil {
		err = Errorf(errclass.Timeout, "timed out after %s (timeout: %s)", n.Timeout, n.Timeout)
	}
	return out, err
}

// execute runs an executor, turning a panic into the node's failure: one
// node's bug must not take down the process, and with it a server's
// other runs.
func execute(ctx context.Context, exec Executor, s *Scope, n *dsl.Node) (out Outcome, err error) {
	// The executor's expressions stop when the node's context ends.
	prev := s.env.SetContext(ctx)
	defer s.env.SetContext(prev)
	defer func() {
		if v := recover(); v != nil {
			out, err = Outcome{}, &PanicError{Value: v, Stack: string(debug.Stack())}
		}
	}()
	return exec.Execute(ctx, s, n)
}

// EndsRun reports errors that end or pause the run rather than fail a
// node: they are never retried, routed by on_error or skipped by a map.
func EndsRun(err error) bool {
	var stop *StopError
	var wait *WaitError
	var declined *DeclinedError
	return errors.As(err, &stop) || errors.As(err, &wait) || errors.As(err, &declined)
}

func classOf(err error) errclass.Class {
	var ne *NodeError
	if errors.As(err, &ne) {
		return ne.Class
	}
	return ClassOf(err)
}

// backoff doubles the base wait per attempt, with up to 50% jitter so that
// many items retrying together do not retry in lockstep.
func backoff(base time.Duration, attempt int) time.Duration {
	if base <= 0 {
		base = 500 * time.Millisecond
	}
	d := base << min(attempt-1, 10)
	return d + time.Duration(rand.Int64N(int64(d)/2+1))
}

func ms(d time.Duration) float64 { return float64(d.Microseconds()) / 1000 }

func since(start time.Time) float64 {
	if start.IsZero() {
		return 0
	}
	return ms(time.Since(start))
}

func (s *Scope) succeed(ctx context.Context, n *dsl.Node, out Outcome, start time.Time, m mark) (string, error) {
	s.setOutput(n.ID, out.Output)
	vals, err := s.assign(n.Set, out.UseAssigned)
	if err != nil {
		return s.fail(ctx, n, err, start, m)
	}
	if out.UseAssigned {
		out.Output = vals
		s.env.Nodes[n.ID] = vals
	}
	s.finished(n, out.Output)
	next := n.Next
	if out.Next != "" {
		next = out.Next
	}
	if err := s.checkpoint(ctx, n, out.Output, next, m); err != nil {
		return "", err
	}
	if s.run.sink.sink != nil {
		s.emitNode(EventNodeFinished, n, Event{DurationMS: since(start), Output: out.Output})
	}
	if err := s.run.usage.overBudget(); err != nil {
		return "", err
	}
	return next, nil
}

// checkpoint saves a finished node's effects.
func (s *Scope) checkpoint(ctx context.Context, n *dsl.Node, output any, next string, m mark) error {
	if s.effects == nil {
		return nil
	}
	cp := &Checkpoint{Path: s.Path(n.ID), Output: output, Next: next, Pure: s.pure(n)}
	cp.CostUSD, cp.Tokens = s.run.usage.totals()
	if appended := s.effects.memory[m.memory:]; len(appended) > 0 {
		added := map[string]int{}
		for _, name := range appended {
			added[name]++
		}
		cp.Memories = make(map[string][]json.RawMessage, len(added))
		for name, k := range added {
			msgs := s.mem.msgs[name]
			cp.Memories[name] = msgs[len(msgs)-k:]
		}
	}
	for _, k := range s.effects.state[m.state:] {
		if cp.State == nil {
			cp.State = map[string]any{}
		}
		cp.State[k] = s.env.State[k]
	}
	for _, id := range s.effects.nodes[m.nodes:] {
		if id == n.ID {
			continue
		}
		if cp.Nodes == nil {
			cp.Nodes = map[string]any{}
		}
		cp.Nodes[id] = s.env.Nodes[id]
	}
	var own int64
	if c, ok := ctx.Value(stepCounterKey{}).(*stepCounter); ok {
		own = c.steps.Load()
	}
	if err := s.run.journal.commit(ctx, cp, own); err != nil {
		// A run that cannot record its progress cannot promise a resume.
		return &StopError{Reason: fmt.Sprintf("saving the checkpoint after %q failed: %v", cp.Path, err)}
	}
	return nil
}

// RecordInFlight records, durably when it returns, value under key for
// node n: an effect the node started and has not finished, such as a
// model call running on a server. If the run is killed or stopped before
// the node finishes, the node run again on resume, on this machine or
// another, reads it back with InFlight and re-attaches to the effect
// instead of starting it again. A later record under the same key
// replaces it. ctx may outlive the node's (a cancellation is recorded
// after the node's context ended). Nothing is recorded where nothing is
// checkpointed.
func (s *Scope) RecordInFlight(ctx context.Context, n *dsl.Node, key string, value any) error {
	if s.effects == nil {
		return nil
	}
	b, err := json.Marshal(value)
	if err != nil {
		return fmt.Errorf("node %q: in-flight record %s: %w", n.ID, key, err)
	}
	path := s.Path(n.ID)
	cp := &Checkpoint{Path: path + InFlightSuffix, InFlight: &InFlight{Key: path + "#" + key, Value: b}}
	cp.CostUSD, cp.Tokens = s.run.usage.totals()
	if err := s.run.journal.commit(ctx, cp, 0); err != nil {
		return fmt.Errorf("node %q: recording %s: %w", n.ID, key, err)
	}
	return nil
}

// InFlight returns what RecordInFlight last recorded under key for node
// n, in this run or an earlier attempt at it.
func (s *Scope) InFlight(n *dsl.Node, key string) (json.RawMessage, bool) {
	if s.effects == nil {
		return nil, false
	}
	return s.run.journal.inFlightRecord(s.Path(n.ID) + "#" + key)
}

// pure says whether node n, finished, has had no effect outside the run:
// its executor says so, and it asked for no confirmation.
func (s *Scope) pure(n *dsl.Node) bool {
	p, ok := s.run.kinds[n.Kind].(PureExecutor)
	return ok && !n.Confirm && p.Pure(n)
}

// restore applies the checkpoint of a node that finished in an earlier
// attempt instead of running it again.
func (s *Scope) restore(n *dsl.Node, cp *Checkpoint) string {
	for k, v := range cp.State {
		s.SetState(k, v)
	}
	for id, v := range cp.Nodes {
		s.setOutput(id, v)
	}
	names := make([]string, 0, len(cp.Memories))
	for name := range cp.Memories {
		names = append(names, name)
	}
	slices.Sort(names)
	for _, name := range names {
		s.AppendMemory(name, cp.Memories[name]...)
	}
	s.setOutput(n.ID, cp.Output)
	s.finished(n, cp.Output)
	s.emitNode(EventNodeRestored, n, Event{})
	return cp.Next
}

// finished records n's output as the last here, and, but for a branch's,
// as what led to what follows.
func (s *Scope) finished(n *dsl.Node, output any) {
	s.last = output
	if n.Kind != dsl.KindBranch {
		s.led, s.ledID = output, n.ID
	}
}

// fail applies on_error to a node's failure. A handled failure is a
// finished node and is checkpointed as one.
func (s *Scope) fail(ctx context.Context, n *dsl.Node, err error, start time.Time, m mark) (string, error) {
	ne := &NodeError{}
	if !errors.As(err, &ne) {
		ne = &NodeError{Path: s.Path(n.ID), Class: ClassOf(err), Err: err}
	}
	handled := n.OnError.Handled()
	failed := Event{DurationMS: since(start), Error: ne.Err.Error(), Class: ne.Class}
	if handled {
		failed.Message = "on_error: " + string(n.OnError)
	}
	var pe *PanicError
	if errors.As(err, &pe) {
		failed.Detail = pe.Stack
	}
	s.emitNode(EventNodeFailed, n, failed)
	if !handled {
		return "", ne
	}
	out := map[string]any{"error": map[string]any{"class": string(ne.Class), "message": ne.Err.Error(), "path": ne.Path}}
	s.setOutput(n.ID, out)
	next := n.OnError.Target()
	if err := s.checkpoint(ctx, n, out, next, m); err != nil {
		return "", err
	}
	return next, nil
}
