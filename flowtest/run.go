package flowtest

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/expr-lang/expr"
	"github.com/expr-lang/expr/ast"
	"github.com/expr-lang/expr/parser"

	"github.com/flowrun/flowrun/clock"
	"github.com/flowrun/flowrun/dsl"
	"github.com/flowrun/flowrun/engine"
	"github.com/flowrun/flowrun/errclass"
	"github.com/flowrun/flowrun/figures"
	"github.com/flowrun/flowrun/llm"
	"github.com/flowrun/flowrun/mcpclient"
	"github.com/flowrun/flowrun/runtime"
)

// Result is how one case went.
type Result struct {
	File     *File
	Case     *Case
	Pass     bool
	Problems []string // each a failed expectation with expected and actual
	// Missing, when set, says what the case needs that is not installed
	// here (the sandbox's Python, say): the case did not run, even one
	// that expects a failure (it would pass for the wrong reason), and
	// Problems is empty.
	Missing  error
	Status   runtime.Status
	Route    []string
	Outputs  map[string]any
	Events   []runtime.Event
	Duration time.Duration
}

// Runner runs cases, each as a run of package engine kept in memory
// (no store is opened), with its doubles standing in for the services:
// code nodes that have no mock run in one sandbox that the cases share,
// made at the first case. Close stops it.
type Runner struct {
	once sync.Once
	e    *engine.Engine
}

// engine is the runner's engine, made at its first case.
func (r *Runner) engine() *engine.Engine {
	r.once.Do(func() {
		// engine.New refuses only a negative cache TTL, not given here.
		r.e, _ = engine.New(engine.Options{ShareSandbox: true, LookupEnv: noEnv})
	})
	return r.e
}

// Close waits for the cases' runs and stops the sandbox they shared.
func (r *Runner) Close() error {
	r.once.Do(func() {})
	if r.e == nil {
		return nil
	}
	return r.e.Close()
}

// noEnv is a case's environment: nothing in it, so that no case depends
// on the machine it runs on.
func noEnv(string) (string, bool) { return "", false }

// Run runs one case of f. Models are mocked at the model client's
// Responder, so that the client's retries, structured output checks and
// pricing apply to mocked replies as to a server's; every wait (retry
// backoff, rate limits) is on a fake clock, so none takes time.
func (r *Runner) Run(ctx context.Context, f *File, c *Case) *Result {
	began := time.Now()
	res := &Result{File: f, Case: c}
	served := &mockState{mocks: c.Mocks, next: map[string]int{}}
	tools := &mcpMocks{state: served, mocks: c.Tools, named: f.mcpNamed, cassette: c.Cassette != ""}
	inputs, restore, edits, err := c.start(f.Pipeline)
	if err != nil {
		res.Problems = append(res.Problems, err.Error())
		return res
	}
	sink := &collector{}
	doubles := &engine.Doubles{Respond: served, Replay: c.Cassette, Clock: clock.NewFake(began), MCP: tools, Tools: agentToolMocks{tools},
		Kinds: func(kinds runtime.Registry) runtime.Registry {
			for _, k := range []dsl.Kind{dsl.KindTool, dsl.KindCode} {
				kinds[k] = mockedExecutor{inner: kinds[k], state: served}
			}
			return kinds
		}}
	run, err := r.engine().Start(ctx, f.Pipeline, inputs, engine.RunOptions{Sink: sink, Human: answers(c.Answers),
		Doubles: doubles, InMemory: &engine.InMemory{Restore: restore, Edits: edits}})
	var ended *runtime.Result
	var config *engine.ConfigError
	switch {
	case errors.As(err, &config):
		// The case's cassette does not load, say: nothing ran.
		res.Problems = append(res.Problems, err.Error())
		return res
	case err != nil:
		// It could not start: the kinds it needs are not here, or its
		// inputs do not fit; the case says which as for a failed run.
		ended = &runtime.Result{Status: runtime.StatusFailed, Err: err}
	default:
		ended = run.Wait()
	}
	res.Events, res.Status, res.Outputs = sink.events, ended.Status, ended.Outputs
	if missing := missingPart(ended); missing != nil {
		res.Missing = missing
		res.Duration = time.Since(began)
		return res
	}
	for _, e := range sink.events {
		if e.Type == runtime.EventNodeStarted {
			res.Route = append(res.Route, e.Path)
		}
	}
	res.Problems = append(res.Problems, tools.problems...)
	res.Problems = append(res.Problems, check(c, ended, res.Route)...)
	res.Problems = append(res.Problems, checkEvents(c.Expect.Events, sink.events)...)
	res.Pass = len(res.Problems) == 0
	res.Duration = time.Since(began)
	return res
}

type collector struct{ events []runtime.Event }

func (c *collector) Event(e runtime.Event) { c.events = append(c.events, e) }

// mockState hands out each node's mocked replies in call order.
type mockState struct {
	mu      sync.Mutex
	mocks   map[string]*Mock
	next    map[string]int
	replies int // model replies given, which number their tool calls
}

// take returns the next reply for a node at run path path: from the mock
// of that very iteration or item when the case has one, else from the
// node's.
func (m *mockState) take(path string) (*Reply, error) {
	static := Strip(path)
	if mock := m.mocks[path]; mock != nil && path != static {
		return m.serve(mock, path, fmt.Sprintf("node %q", path))
	}
	return m.serve(m.mocks[static], static, fmt.Sprintf("node %q (%s)", static, path))
}

// serve returns mock's next reply; key counts its calls, what names it.
func (m *mockState) serve(mock *Mock, key, what string) (*Reply, error) {
	if mock == nil {
		return nil, nil
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	i := m.next[key]
	m.next[key]++
	if mock.Repeat {
		return mock.Replies[0], nil
	}
	if i >= len(mock.Replies) {
		return nil, fmt.Errorf("flowrun test: %s was called %d times but its mock (%s) has %d replies", what, i+1, mock.Pos, len(mock.Replies))
	}
	return mock.Replies[i], nil
}

// Respond answers a model call from its node's mocks.
func (m *mockState) Respond(_ context.Context, k llm.Key) (llm.Reply, error) {
	rep, err := m.take(k.Node)
	if err != nil {
		return llm.Reply{}, err
	}
	if rep == nil {
		return llm.Reply{}, llm.NoAnswer(fmt.Sprintf("flowrun test: no mock for node %q (%s): add one under mocks: %s", Strip(k.Node), k.Node, Strip(k.Node)))
	}
	if rep.Error != "" {
		return llm.Reply{}, runtime.Errorf(errclass.Class(rep.Error), "%s", orDefault(rep.Message, "mocked "+rep.Error+" error"))
	}
	out := llm.Reply{Text: rep.Text, Usage: llm.Usage{Prompt: rep.Usage.Prompt, Completion: rep.Usage.Completion, Total: rep.Usage.Prompt + rep.Usage.Completion}}
	if rep.HasJSON {
		b, err := json.Marshal(rep.JSON)
		if err != nil {
			return llm.Reply{}, fmt.Errorf("flowrun test: the mock of node %q: %w", k.Node, err)
		}
		out.Text = string(b)
	}
	m.mu.Lock()
	m.replies++
	n := m.replies
	m.mu.Unlock()
	for i, c := range rep.Calls {
		args, err := json.Marshal(c.Args)
		if err != nil {
			return llm.Reply{}, fmt.Errorf("flowrun test: the mock of node %q: call %s: %w", k.Node, c.Name, err)
		}
		out.ToolCalls = append(out.ToolCalls, llm.ToolCall{ID: fmt.Sprintf("call_%d_%d", n, i+1), Name: orDefault(c.Wire, c.Name), Arguments: string(args)})
	}
	return out, nil
}

func orDefault(s, d string) string {
	if s == "" {
		return d
	}
	return s
}

// mockedExecutor answers a tool or code node from its mock, or runs it.
type mockedExecutor struct {
	inner runtime.Executor
	state *mockState
}

func (e mockedExecutor) Execute(ctx context.Context, s *runtime.Scope, n *dsl.Node) (runtime.Outcome, error) {
	rep, err := e.state.take(s.Path(n.ID))
	if err != nil {
		return runtime.Outcome{}, runtime.Errorf(errclass.Critical, "%w", err)
	}
	if rep == nil {
		return e.inner.Execute(ctx, s, n)
	}
	if rep.Error != "" {
		return runtime.Outcome{}, runtime.Errorf(errclass.Class(rep.Error), "%s", orDefault(rep.Message, "mocked "+rep.Error+" error"))
	}
	return runtime.Outcome{Output: rep.Output}, nil
}

// CheckNode lets the inner executor refuse a node it could not run.
func (e mockedExecutor) CheckNode(p *dsl.Pipeline, n *dsl.Node) error {
	if c, ok := e.inner.(runtime.NodeChecker); ok {
		return c.CheckNode(p, n)
	}
	return nil
}

// mcpMocks answers MCP tool calls from a case's tools: in place of the
// servers, which flowrun test never starts. A call the mocks cannot
// answer (none for the tool and no cassette, or a list used up) is one of
// the case's problems even when an agent's model reads it as a tool error.
type mcpMocks struct {
	state    *mockState
	mocks    map[string]*Mock    // by "server.tool", and by name for built-in and pipeline tools
	named    map[string][]string // tools nodes name, by server
	cassette bool                // the case's cassette answers unmocked tools

	mu       sync.Mutex
	problems []string
}

// mockedTool stands for an MCP tool in a mocked server's listing: any
// arguments are taken.
var mockedTool = map[string]any{"type": "object"}

// Listing offers the tools of s that nodes name and those the case mocks,
// once the case mocks any MCP tool: a call of one without a mock is then
// reported by Call.
func (m *mcpMocks) Listing(s *dsl.MCPServer) ([]llm.ToolSpec, bool) {
	names := append([]string(nil), m.named[s.Name]...)
	for _, full := range keys(m.mocks) {
		if server, tool, _ := strings.Cut(full, "."); server == s.Name && !contains(names, tool) {
			names = append(names, tool)
		}
	}
	if len(m.mocks) == 0 || len(names) == 0 {
		return nil, false
	}
	specs := make([]llm.ToolSpec, len(names))
	for i, name := range names {
		specs[i] = llm.ToolSpec{Name: name, Description: "MCP tool " + s.Name + "." + name + " (mocked)", Parameters: mockedTool}
	}
	return specs, true
}

func (m *mcpMocks) Call(s *dsl.MCPServer, tool, at string, _ map[string]any) (*mcpclient.Result, bool, error) {
	full := s.Name + "." + tool
	mock := m.mocks[full]
	if mock == nil {
		if !m.cassette {
			m.problem(fmt.Sprintf("MCP tool %s was called at %s but has no mock: add one under tools: %s", full, at, full))
		}
		return nil, false, nil
	}
	rep, err := m.state.serve(mock, "\x00tools\x00"+full, fmt.Sprintf("MCP tool %s (at %s)", full, at))
	if err != nil {
		m.problem(err.Error())
		return nil, true, runtime.Errorf(errclass.Critical, "%w", err)
	}
	switch rep.Error {
	case "":
		return &mcpclient.Result{Value: rep.Output}, true, nil
	case "server":
		return nil, true, &mcpclient.ServerDiedError{Server: s.Name, Tool: tool, Err: errors.New(orDefault(rep.Message, "mocked: the server died"))}
	case "timeout":
		return &mcpclient.Result{Error: orDefault(rep.Message, fmt.Sprintf("%s did not answer within %s (the server's timeout:)", full, s.Timeout))}, true, nil
	}
	return &mcpclient.Result{Error: orDefault(rep.Message, "mocked tool error")}, true, nil
}

// agentToolMocks answers agents' calls of built-in and pipeline tools
// from the case's tools: mocks, by tool name, in call order.
type agentToolMocks struct{ m *mcpMocks }

func (a agentToolMocks) Call(tool, at string, _ map[string]any) (any, bool, error) {
	mock := a.m.mocks[tool]
	if mock == nil {
		return nil, false, nil
	}
	rep, err := a.m.state.serve(mock, "\x00tools\x00"+tool, fmt.Sprintf("tool %s (at %s)", tool, at))
	if err != nil {
		a.m.problem(err.Error())
		return nil, true, err
	}
	if rep.Error != "" {
		return nil, true, errors.New(orDefault(rep.Message, "mocked "+rep.Error+" error"))
	}
	return rep.Output, true, nil
}

func (m *mcpMocks) problem(p string) {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.problems = append(m.problems, p)
}

// answers answers questions from a case's answers:, by node path or id;
// a question with no answer leaves the run waiting.
type answers map[string]any

func (a answers) Answer(_ context.Context, q runtime.Question) (any, bool, error) {
	v, ok := a[Strip(q.Path)]
	return v, ok, nil
}

// missingPart says what a run that could not start needs that is not
// installed: the error of the first node the build cannot run, or nil.
func missingPart(run *runtime.Result) error {
	var ue *runtime.UnavailableError
	if !errors.As(run.Err, &ue) || len(ue.Nodes) == 0 {
		return nil
	}
	return ue.Nodes[0]
}

// check compares a run with the case's expectations.
func check(c *Case, run *runtime.Result, route []string) []string {
	var problems []string
	e := c.Expect
	want := e.Status
	if want == "" {
		want = runtime.StatusCompleted
	}
	if run.Status != want {
		why := ""
		switch {
		case run.Err != nil:
			why = ": " + run.Err.Error()
		case run.Reason != "":
			why = ": " + run.Reason
		}
		problems = append(problems, fmt.Sprintf("status: expected %s, got %s%s", want, run.Status, why))
	}
	if e.Class != "" && run.Err != nil && string(errclass.Of(run.Err)) != e.Class {
		problems = append(problems, fmt.Sprintf("class: expected %s, got %s (%v)", e.Class, errclass.Of(run.Err), run.Err))
	}
	if run.Status != want && len(run.Outputs) == 0 && (len(e.Outputs) > 0 || len(e.That) > 0) {
		// Every output check would only repeat that the run has none.
		problems = append(problems, fmt.Sprintf("outputs: the run has none, so %d output expectations were not checked", len(e.Outputs)+len(e.That)))
		return append(problems, checkRoute(e, route)...)
	}
	for _, name := range keys(e.Outputs) {
		got, ok := run.Outputs[name]
		if !ok || !sameJSON(e.Outputs[name], got) {
			problems = append(problems, fmt.Sprintf("outputs.%s:\n      expected %s\n      got      %s", name, show(e.Outputs[name]), showOr(got, ok)))
		}
	}
	reported := map[string]bool{} // missing outputs already named
	for _, t := range e.That {
		if absent := absentOutputs(t.Src, run.Outputs); len(absent) > 0 {
			for _, name := range absent {
				if _, expected := e.Outputs[name]; !reported[name] && !expected {
					problems = append(problems, fmt.Sprintf("%s: that %q reads outputs.%s, which the run does not have (outputs: %s)", t.Pos, t.Src, name, strings.Join(keys(run.Outputs), ", ")))
				}
				reported[name] = true
			}
			continue
		}
		env := map[string]any{"outputs": run.Outputs, "status": run.Status, "route": route}
		v, err := expr.Eval(t.Src, env)
		if err != nil {
			problems = append(problems, fmt.Sprintf("%s: that %q: %v", t.Pos, t.Src, err))
		} else if b, _ := v.(bool); !b {
			problems = append(problems, fmt.Sprintf("%s: that %q does not hold (outputs: %s)", t.Pos, t.Src, show(run.Outputs)))
		}
	}
	problems = append(problems, checkRoute(e, route)...)
	if p := e.CostUSD.miss(run.CostUSD, figures.USD); p != "" {
		problems = append(problems, fmt.Sprintf("cost_usd: expected %s, got %s", p, figures.USD(run.CostUSD)))
	}
	if p := e.Steps.miss(float64(run.Steps), count); p != "" {
		problems = append(problems, fmt.Sprintf("steps: expected %s, got %d", p, run.Steps))
	}
	return problems
}

// absentOutputs lists the outputs.<name> an expression reads that the
// run does not have.
func absentOutputs(src string, outputs map[string]any) []string {
	tree, err := parser.Parse(src)
	if err != nil {
		return nil
	}
	var absent []string
	ast.Find(tree.Node, func(n ast.Node) bool {
		m, ok := n.(*ast.MemberNode)
		if !ok {
			return false
		}
		id, isID := m.Node.(*ast.IdentifierNode)
		prop, isStr := m.Property.(*ast.StringNode)
		if isID && id.Value == "outputs" && isStr {
			if _, has := outputs[prop.Value]; !has && !slices.Contains(absent, prop.Value) {
				absent = append(absent, prop.Value)
			}
		}
		return false
	})
	return absent
}

// checkRoute compares the route a run took with the case's expectations.
func checkRoute(e Expect, route []string) []string {
	var problems []string
	if e.HasRoute && !routeMatches(e.Route, route) {
		problems = append(problems, "route:\n"+routeDiff(e.Route, route))
	}
	for _, want := range e.Includes {
		if !anyMatch(want, route) {
			problems = append(problems, fmt.Sprintf("route: expected to include %s; the route was %s", want, strings.Join(route, " → ")))
		}
	}
	for _, not := range e.Excludes {
		if anyMatch(not, route) {
			problems = append(problems, fmt.Sprintf("route: expected not to include %s; the route was %s", not, strings.Join(route, " → ")))
		}
	}
	return problems
}

// miss describes the bound v breaks, with the bound written by show, or
// returns "".
func (b Bounds) miss(v float64, show func(float64) string) string {
	switch {
	case b.Min != nil && b.Max != nil && *b.Min == *b.Max && v != *b.Min:
		return "exactly " + show(*b.Min)
	case b.Min != nil && v < *b.Min:
		return "at least " + show(*b.Min)
	case b.Max != nil && v > *b.Max:
		return "at most " + show(*b.Max)
	}
	return ""
}

// count writes a bound on a number of things.
func count(v float64) string { return strconv.FormatFloat(v, 'f', -1, 64) }

// checkEvents counts the events each check names and, when a count is
// off, shows where the events of that type did occur.
func checkEvents(checks []EventCheck, events []runtime.Event) []string {
	var problems []string
	for _, ec := range checks {
		var at []string
		n := 0
		for _, e := range events {
			if e.Type != ec.Type {
				continue
			}
			at = append(at, orDefault(e.Path, "(run)"))
			if ec.Node == "" || stepMatches(ec.Node, e.Path) {
				n++
			}
		}
		p := ec.Count.miss(float64(n), count)
		if p == "" {
			continue
		}
		where := ""
		if ec.Node != "" {
			where = " at " + ec.Node
		}
		seen := "none"
		if len(at) > 0 {
			seen = fmt.Sprintf("%d, at %s", len(at), strings.Join(at, ", "))
		}
		problems = append(problems, fmt.Sprintf("%s: events: expected %s %s event(s)%s, got %d (all %s events: %s)", ec.Pos, p, ec.Type, where, n, ec.Type, seen))
	}
	return problems
}

// stepMatches says whether an expected route step names an actual one: the
// same run path, or (written with no index) the same node.
func stepMatches(want, got string) bool {
	if want == got {
		return true
	}
	if strings.Contains(want, "[") {
		return false
	}
	s := Strip(got)
	return s == want || s[strings.LastIndex(s, "/")+1:] == want
}

func anyMatch(want string, route []string) bool {
	for _, got := range route {
		if stepMatches(want, got) {
			return true
		}
	}
	return false
}

func routeMatches(want, got []string) bool {
	if len(want) != len(got) {
		return false
	}
	for i := range want {
		if !stepMatches(want[i], got[i]) {
			return false
		}
	}
	return true
}

// routeDiff shows expected and actual routes side by side, marking the
// steps that differ.
func routeDiff(want, got []string) string {
	var b strings.Builder
	width := len("expected")
	for _, w := range want {
		width = max(width, len(w))
	}
	fmt.Fprintf(&b, "        %-*s   %s\n", width, "expected", "actual")
	for i := 0; i < max(len(want), len(got)); i++ {
		w, g := "", ""
		if i < len(want) {
			w = want[i]
		}
		if i < len(got) {
			g = got[i]
		}
		mark := " "
		if i >= len(want) || i >= len(got) || !stepMatches(w, g) {
			mark = "✗"
		}
		fmt.Fprintf(&b, "    %s %2d %-*s   %s\n", mark, i+1, width, orDefault(w, "-"), orDefault(g, "-"))
	}
	return strings.TrimRight(b.String(), "\n")
}

func sameJSON(a, b any) bool {
	x, err1 := json.Marshal(a)
	y, err2 := json.Marshal(b)
	if err1 != nil || err2 != nil {
		return false
	}
	var xa, ya any
	_ = json.Unmarshal(x, &xa)
	_ = json.Unmarshal(y, &ya)
	x, _ = json.Marshal(xa)
	y, _ = json.Marshal(ya)
	return string(x) == string(y)
}

func show(v any) string {
	b, err := json.Marshal(v)
	if err != nil {
		return fmt.Sprint(v)
	}
	s := string(b)
	if len(s) > 300 {
		s = s[:300] + "…(" + strconv.Itoa(len(b)) + " bytes)"
	}
	return s
}

func showOr(v any, ok bool) string {
	if !ok {
		return "(no such output)"
	}
	return show(v)
}
