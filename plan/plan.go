// Package plan bounds what a run of a compiled pipeline can do before it
// starts: per node and in total, the most model calls, output and input
// tokens, cost, sandbox runs, tool calls and wall time, each with the
// expression that bounds it.
//
// Guarantees: a figure is never below what a run with the same inputs
// does (loops run max_iterations times, every branch is taken, every
// retry and repair is spent); the cost of one model call is
// llm.WorstCase of the request the node would send, the same bound the
// cost cap reserves; a figure nothing bounds is unbounded, never a guess,
// and the plan names the node and what to set. Evaluating a bound needs
// only the run's inputs: a prompt that reads state, node outputs, items
// not made from inputs, or an input not given is data-dependent, and a
// call's input is then bounded by its model's documented context window.
package plan

import (
	"errors"
	"fmt"
	"maps"
	"slices"
	"strings"
	"time"

	"github.com/flowrun/flowrun/dsl"
	"github.com/flowrun/flowrun/errclass"
	"github.com/flowrun/flowrun/llm"
)

// Plan is the bound of one run.
type Plan struct {
	Pipeline string `json:"pipeline"`
	// Inputs are the values the bounds were evaluated with: those given,
	// then the declared defaults.
	Inputs map[string]any `json:"inputs"`
	// Given are the names of the inputs that were given, sorted.
	Given []string `json:"given,omitempty"`
	// Missing are the inputs with neither: bounds reading them stay symbolic.
	Missing []string `json:"missing_inputs,omitempty"`
	Nodes   []*Node  `json:"nodes"`
	Total   Totals   `json:"total"`
	// Unbounded says, for every figure nothing bounds, why and what to set.
	Unbounded []Reason `json:"unbounded,omitempty"`
	// Notes are what a reader of the figures should know (a prompt that
	// grows with model output).
	Notes []string `json:"notes,omitempty"`
	// MaxCostUSD is limits.max_cost_usd, 0 for none.
	MaxCostUSD float64 `json:"max_cost_usd,omitempty"`
}

// Totals are the figures of a node, or of the whole run.
type Totals struct {
	Calls        Figure `json:"model_calls"`
	OutputTokens Figure `json:"output_tokens"`
	InputTokens  Figure `json:"input_tokens"`
	USD          Figure `json:"cost_usd"`
	SandboxRuns  Figure `json:"sandbox_runs"`
	ToolCalls    Figure `json:"tool_calls"`
	WallSeconds  Figure `json:"wall_seconds"`
}

func zero() Totals {
	z := Num(0)
	return Totals{z, z, z, z, z, z, z}
}

func (t Totals) plus(u Totals) Totals {
	return Totals{t.Calls.Plus(u.Calls), t.OutputTokens.Plus(u.OutputTokens), t.InputTokens.Plus(u.InputTokens),
		t.USD.Plus(u.USD), t.SandboxRuns.Plus(u.SandboxRuns), t.ToolCalls.Plus(u.ToolCalls), t.WallSeconds.Plus(u.WallSeconds)}
}

func (t Totals) times(f Figure) Totals {
	return Totals{t.Calls.Times(f), t.OutputTokens.Times(f), t.InputTokens.Times(f),
		t.USD.Times(f), t.SandboxRuns.Times(f), t.ToolCalls.Times(f), t.WallSeconds.Times(f)}
}

// Node is the bound of one node over the whole run: what one run of it
// may do, times how often it may run (Runs).
type Node struct {
	Path string `json:"node"` // ids from the top, joined by "/"
	Kind string `json:"kind"`
	Runs Figure `json:"runs"` // the most times it runs: enclosing loops and maps
	Totals
	// PerCall is the worst case of one model call of the node
	// (llm.WorstCase), when its request is known before the run.
	PerCall *llm.Bound `json:"per_call,omitempty"`
}

// Reason is why a figure of a node is unbounded.
type Reason struct {
	Node   string `json:"node"`
	Figure string `json:"figure"`
	Why    string `json:"why"`
	Fix    string `json:"fix,omitempty"`
}

// Options are what a plan is made with.
type Options struct {
	// Inputs are the run's inputs; declared defaults fill the rest.
	Inputs map[string]any
}

// Make bounds a run of p with the given inputs.
func Make(p *dsl.Pipeline, o Options) *Plan {
	inputs, missing := withDefaults(p, o.Inputs)
	w := &walker{p: p, fed: fedState(p), pl: &Plan{Pipeline: p.Name, Inputs: inputs, Given: slices.Sorted(maps.Keys(o.Inputs)),
		Missing: missing, MaxCostUSD: p.Limits.MaxCostUSD}}
	w.pl.Total = w.block(p, scope{inputs: inputs}, p.Nodes, "", Num(1))
	w.path = "pipeline"
	switch {
	case p.Limits.Timeout > 0:
		w.pl.Total.WallSeconds = Sym("limits.timeout", p.Limits.Timeout.Seconds(), true)
	case w.pl.Total.WallSeconds.IsUnbounded():
		w.unbounded("wall time", "a model call or tool takes as long as its server", "set limits.timeout")
	}
	return w.pl
}

// stateRead is the first state variable src reads, or "".
func stateRead(src string) string {
	for _, r := range roots(src) {
		if name, ok := strings.CutPrefix(r, "state."); ok {
			return name
		}
	}
	return ""
}

// fedState are p's state variables that a node sets from an expression
// reading node outputs, with that node's id: read in a loop, they grow
// with model output.
func fedState(p *dsl.Pipeline) map[string]string {
	fed := map[string]string{}
	var walk func(b dsl.Block)
	walk = func(b dsl.Block) {
		for _, n := range b {
			for _, a := range n.Set {
				for _, e := range a.Value.Exprs() {
					if slices.ContainsFunc(roots(e.Src), func(r string) bool { return strings.HasPrefix(r, "nodes.") }) {
						fed[a.Key] = n.ID
					}
				}
			}
			for _, body := range dsl.Bodies(n) {
				walk(body.Body)
			}
		}
	}
	walk(p.Nodes)
	return fed
}

func withDefaults(p *dsl.Pipeline, given map[string]any) (map[string]any, []string) {
	inputs := maps.Clone(given)
	if inputs == nil {
		inputs = map[string]any{}
	}
	var missing []string
	for _, in := range p.Inputs {
		if _, ok := inputs[in.Name]; ok {
			continue
		}
		if in.HasDefault {
			inputs[in.Name] = in.Default
		} else {
			missing = append(missing, in.Name)
		}
	}
	return inputs, missing
}

// scope is what is known where a node runs.
type scope struct {
	inputs map[string]any
	// items are a map's items when only inputs make them; nil otherwise.
	items []any
	// itemsFrom is the state variable a map's over expression reads, if any.
	itemsFrom string
	inLoop    bool // a loop encloses it: a memory carries replies across iterations
}

type walker struct {
	p    *dsl.Pipeline
	pl   *Plan
	path string // of the node being bounded, for the reasons it gives
	// fed are the state variables a node sets from node outputs, by
	// name: the node that does.
	fed map[string]string
}

// block bounds a list of nodes run runs times.
func (w *walker) block(p *dsl.Pipeline, sc scope, b dsl.Block, prefix string, runs Figure) Totals {
	sum := zero()
	for _, n := range b {
		sum = sum.plus(w.node(p, sc, n, prefix+n.ID, runs))
	}
	return sum
}

func (w *walker) node(p *dsl.Pipeline, sc scope, n *dsl.Node, path string, runs Figure) Totals {
	inputs := sc.inputs
	w.path = path
	row := &Node{Path: path, Kind: string(n.Kind), Runs: runs, Totals: zero()}
	w.pl.Nodes = append(w.pl.Nodes, row)
	attempts := Num(1)
	if n.Retry != nil {
		attempts = Num(float64(max(n.Retry.MaxAttempts, 1)))
	}
	var once Totals
	switch n.Kind {
	case dsl.KindLLM:
		once = w.llm(p, sc, n, n.LLM(), row)
	case dsl.KindAgent:
		once = w.agent(p, n, n.Agent(), row)
	case dsl.KindCode:
		once = zero()
		once.SandboxRuns = attempts
		once.WallSeconds = w.codeTimeout(p, n).Times(attempts)
	case dsl.KindTool:
		once = w.tool(p, inputs, n, row, attempts)
	case dsl.KindCall:
		once = w.call(inputs, n.Call(), path, attempts)
	case dsl.KindLoop:
		return w.loop(p, sc, n, path, runs)
	case dsl.KindMap:
		m := n.Map()
		items, known := w.length(sc, m.Over)
		body := sc
		body.items, body.itemsFrom = known, stateRead(m.Over.Src)
		return w.block(p, body, m.Body, path+"/", runs.Times(items))
	case dsl.KindParallel:
		sum := zero()
		for _, br := range n.Parallel().Branches {
			sum = sum.plus(w.block(p, sc, br.Body, path+"/"+br.Name+"/", runs))
		}
		return sum
	default:
		return zero() // set, branch and ask call nothing and cost nothing
	}
	switch {
	case n.Timeout > 0:
		once.WallSeconds = Num(n.Timeout.Seconds()).Times(attempts)
	case n.Kind != dsl.KindCode && n.Kind != dsl.KindCall:
		// A model or tool waits as long as its server takes.
		once.WallSeconds = Unbounded()
	}
	w.path = path
	row.Totals = once.times(runs)
	return row.Totals
}

func (w *walker) loop(p *dsl.Pipeline, sc scope, n *dsl.Node, path string, runs Figure) Totals {
	l := n.Loop()
	iterations := Num(float64(l.MaxIterations))
	if l.MaxExpr != nil {
		iterations = w.evalInputs(sc.inputs, l.MaxExpr, "loop iterations")
	}
	sc.inLoop = true
	return w.block(p, sc, l.Body, path+"/", runs.Times(iterations))
}

// codeTimeout is the wall time of one sandbox run: the node's limits,
// else the pipeline's sandbox: defaults.
func (w *walker) codeTimeout(p *dsl.Pipeline, n *dsl.Node) Figure {
	for _, d := range []time.Duration{n.Timeout, n.Code().Limits.Timeout, p.Sandbox.Timeout} {
		if d > 0 {
			return Num(d.Seconds())
		}
	}
	w.unbounded("wall time", "the code node has no timeout", "set timeout: on the node or sandbox: {timeout: 30s}")
	return Unbounded()
}

// tool bounds a tool node: a pipeline tool adds its plan, an llm tool
// its call, with the node's args as the inputs they see.
func (w *walker) tool(p *dsl.Pipeline, inputs map[string]any, n *dsl.Node, row *Node, attempts Figure) Totals {
	t := zero()
	t.ToolCalls = attempts
	name := n.Tool().Name
	args, _ := n.Tool().Args.Eval(&dsl.Env{Inputs: inputs})
	given, _ := args.(map[string]any)
	decl := p.Tools[name]
	switch {
	case decl != nil && decl.Pipeline != nil:
		callee := Make(decl.Pipeline, Options{Inputs: given})
		w.adopt(row.Path, callee)
		t = t.plus(callee.Total.times(attempts))
	case decl != nil && decl.LLM != nil:
		if given == nil {
			given = map[string]any{}
		}
		t = t.plus(w.llm(p, scope{inputs: given}, n, decl.LLM, row).times(attempts))
	case name == "python_execute" || name == "code_execute":
		t.SandboxRuns = attempts
	}
	return t
}

// call takes the callee's plan, evaluated with the inputs the call
// passes where they depend on the caller's inputs alone.
func (w *walker) call(inputs map[string]any, c *dsl.Call, path string, attempts Figure) Totals {
	given := map[string]any{}
	for _, f := range c.Inputs {
		if v, err := f.Value.Eval(&dsl.Env{Inputs: inputs}); err == nil {
			given[f.Name] = v
		}
	}
	callee := Make(c.Pipeline, Options{Inputs: given})
	w.adopt(path, callee)
	// The callee's bounds read its own inputs: name them by the call.
	id := path[strings.LastIndexByte(path, '/')+1:]
	return callee.Total.renamed(func(x string) string { return strings.ReplaceAll(x, "inputs.", id+".inputs.") }).times(attempts)
}

// adopt keeps what a callee's plan says, under the calling node's path.
func (w *walker) adopt(path string, callee *Plan) {
	for _, r := range callee.Unbounded {
		if r.Node == "pipeline" {
			r.Node = path
		} else {
			r.Node = path + "/" + r.Node
		}
		w.pl.Unbounded = append(w.pl.Unbounded, r)
	}
	w.pl.Notes = append(w.pl.Notes, callee.Notes...)
}

func (w *walker) unbounded(figure, why, fix string) {
	r := Reason{Node: w.path, Figure: figure, Why: why, Fix: fix}
	if !slices.Contains(w.pl.Unbounded, r) {
		w.pl.Unbounded = append(w.pl.Unbounded, r)
	}
}

func (w *walker) note(s string) {
	if !slices.Contains(w.pl.Notes, s) {
		w.pl.Notes = append(w.pl.Notes, s)
	}
}

// modelTries is how many times one model turn of n may be sent: the
// node's retry, else the model's, else the client's default. A try that
// times out after sending may be billed, so each one counts.
func modelTries(n *dsl.Node, p *dsl.Pipeline, model string) int {
	if n.Retry != nil {
		return max(n.Retry.MaxAttempts, 1)
	}
	if m := p.Models[model]; m != nil && m.Retry != nil && m.Retry.MaxAttempts > 0 {
		return m.Retry.MaxAttempts
	}
	return llm.DefaultMaxAttempts
}

// reruns is how many times the runtime may run a model node: the client
// spends the retries of a model call's recoverable errors itself, so the
// node runs again only for invalid output (a structured reply that stays
// invalid, an agent's tool calls that do), when its retry_on allows.
func reruns(n *dsl.Node, canBeInvalid bool) int {
	if n.Retry == nil || !canBeInvalid {
		return 1
	}
	on := n.Retry.RetryOn
	if len(on) == 0 {
		on = errclass.Retryable()
	}
	if !slices.Contains(on, errclass.InvalidOutput) {
		return 1
	}
	return max(n.Retry.MaxAttempts, 1)
}

func maxTokens(p *dsl.Pipeline, l *dsl.LLM) int {
	if l.MaxTokens > 0 {
		return l.MaxTokens
	}
	if m := p.Models[l.Model]; m != nil {
		return m.MaxTokens
	}
	return 0
}

// perCall fills what calls of n may do into t, given the worst case of
// one (b, err from llm.WorstCase), or why its input is not known before
// the run (unknown); then a call's input is bounded by the model's
// context window, when that is documented.
func (w *walker) perCall(p *dsl.Pipeline, n *dsl.Node, l *dsl.LLM, calls Figure, b llm.Bound, err error, unknown string) (Totals, *llm.Bound) {
	t := zero()
	t.Calls = calls
	m := p.Models[l.Model]
	// A model that bills nothing (an offline one) costs $0 whatever its
	// tokens.
	free := false
	if m != nil {
		price, priced := llm.PriceOf(m, m.Model)
		free = priced && price.InputPerMTok == 0 && price.OutputPerMTok == 0
	}
	var noPrice *llm.NoPriceError
	switch {
	case errors.As(err, &noPrice):
		w.unbounded("cost", fmt.Sprintf("model %s (%s) has no price, so a cost cap cannot hold for its calls", noPrice.Name, noPrice.Model),
			fmt.Sprintf("give model %s a price: {input_per_mtok, output_per_mtok}", l.Model))
		t.USD = Unbounded()
	case free && maxTokens(p, l) == 0:
		w.unbounded("output tokens", "no max_tokens: a reply has no length bound",
			fmt.Sprintf("set max_tokens on node %s or on model %s", n.ID, l.Model))
		t.OutputTokens = Unbounded()
	case errors.Is(err, llm.ErrNoMaxTokens), maxTokens(p, l) == 0:
		w.unbounded("output tokens and cost", "no max_tokens: a reply has no length bound",
			fmt.Sprintf("set max_tokens on node %s or on model %s", n.ID, l.Model))
		t.OutputTokens, t.USD = Unbounded(), Unbounded()
	}
	out := maxTokens(p, l)
	if !t.OutputTokens.IsUnbounded() {
		t.OutputTokens = calls.Times(Num(float64(out)))
	}
	if unknown == "" {
		t.InputTokens = calls.Times(Num(float64(b.InputTokens)))
		if err == nil {
			t.USD = calls.Times(Num(b.USD))
			return t, &b
		}
		return t, nil
	}
	window, ok := 0, false
	if m != nil {
		window, ok = llm.ContextWindow(m.Model)
	}
	switch {
	case !ok && free:
		w.unbounded("input tokens", unknown, "")
		t.InputTokens = Unbounded()
		return t, nil
	case !ok:
		w.unbounded("input tokens and cost", unknown, "")
		t.InputTokens, t.USD = Unbounded(), Unbounded()
		return t, nil
	}
	w.note(fmt.Sprintf("%s: input tokens ≤ %s's context window, %d a call: %s", w.path, m.Model, window, unknown))
	t.InputTokens = calls.Times(Num(float64(window)))
	if price, priced := llm.PriceOf(m, m.Model); priced && !t.USD.IsUnbounded() {
		t.USD = calls.Times(Num((float64(window)*price.InputPerMTok + float64(out)*price.OutputPerMTok) / 1e6))
	}
	return t, nil
}
