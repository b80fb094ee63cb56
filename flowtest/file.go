// Package flowtest runs test files for pipelines (foo.test.yaml beside
// foo.yaml): cases with inputs, mocked model replies, answers to questions,
// and expectations on outputs, the route taken and how the run ended.
//
// Guarantees: a case never uses the network or an API key, and never
// waits on a real clock (retry backoff and rate limits wait on a fake
// one). Model nodes are answered by the real model client, whose
// Responder serves each node's mocks: its retries, structured output
// checks and pricing apply to them as to a server's replies. Tool and code
// nodes with a mock get it from a stand-in executor, those without run for
// real. A model call for a node with no mock fails the case, naming the
// node. A case with restore: goes on from the checkpoints it lists, with
// its edits: made on them as a fork or a resume makes them, so that a
// case made from such a run ends as the run did. Test files are checked
// against their pipeline before anything runs, with file:line:col
// positions.
package flowtest

import (
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"sort"
	"strings"

	"github.com/expr-lang/expr"
	"gopkg.in/yaml.v3"

	"github.com/flowrun/flowrun/dsl"
	"github.com/flowrun/flowrun/jsonvalue"
	"github.com/flowrun/flowrun/nodes"
	"github.com/flowrun/flowrun/runtime"
)

// File is one test file and the pipeline it tests.
type File struct {
	Path     string
	Pipeline *dsl.Pipeline
	Cases    []*Case
	// mcpNamed is, by MCP server, the tools its pipelines name one by one:
	// a mocked server lists them too, so that an agent naming one that
	// has no mock starts and its call is reported.
	mcpNamed map[string][]string
}

// Case is one test case.
type Case struct {
	Name     string
	Pos      dsl.Pos
	Inputs   map[string]any
	Mocks    map[string]*Mock // by node path ("refine/critique") or id; or by run path ("refine[2]/critique"), for that iteration or item alone
	Answers  map[string]any   // by node path or id
	Tools    map[string]*Mock // MCP tools' results, by "server.tool"
	Cassette string           // replay model calls from this cassette instead of mocks
	// Restore, when set, is where the run goes on from instead of its
	// start; Edits change values before it goes on (state.NAME in the
	// last restored checkpoint, inputs.NAME), as a fork or resume does.
	Restore *Restore
	Edits   []runtime.Edit
	Expect  Expect
}

// Mock is the replies of one node, served in call order. A single reply
// (Repeat) answers every call.
type Mock struct {
	Pos     dsl.Pos
	Replies []*Reply
	Repeat  bool
}

// Reply is one mocked answer: model text, JSON, tool calls or an error; for
// tool and code nodes, an output or an error.
type Reply struct {
	Pos     dsl.Pos
	Text    string
	JSON    any
	HasJSON bool
	Calls   []Call // tool calls; a finish call is one of them
	Output  any    // tool and code nodes, MCP tools
	HasOut  bool
	Error   string // rate_limit, server, critical, timeout (or any class for tool/code; tool, timeout, server for MCP tools)
	Message string
	Usage   Usage // tokens the model reports, so that the run has a cost
}

// Usage is the token count a mocked model reply reports.
type Usage struct {
	Prompt, Completion int
}

// Call is a tool call an agent's model makes.
type Call struct {
	Pos    dsl.Pos
	Name   string
	Wire   string // the name the model calls an MCP tool by ("fs__read_file")
	Args   map[string]any
	Finish bool // written as finish:
}

// Expect is what a case checks.
type Expect struct {
	Status   runtime.Status // completed, failed, waiting, stopped; "" means completed
	Class    string         // the error class of a failed run
	Outputs  map[string]any
	That     []*Check
	Route    []string // exact, in order
	HasRoute bool
	Includes []string
	Excludes []string
	Events   []EventCheck
	CostUSD  Bounds
	Steps    Bounds
}

// EventCheck asserts how many events of a type occurred, at a node or
// anywhere. With neither count nor bounds, at least one must occur.
type EventCheck struct {
	Pos   dsl.Pos
	Type  string
	Node  string // a route step: a static path or id, or a run path
	Count Bounds
}

// Bounds is an inclusive range; a nil end is open.
type Bounds struct {
	Min, Max *float64
}

// Check is an expression over outputs that must hold.
type Check struct {
	Src string
	Pos dsl.Pos
}

// Load reads a test file and checks it against its pipeline. The pipeline
// is the file named by pipeline:, relative to the test file, or foo.yaml
// for foo.test.yaml.
func Load(path string) (*File, dsl.Diagnostics) {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, dsl.Diagnostics{{Pos: dsl.Pos{File: path}, Message: err.Error()}}
	}
	l := &loader{path: path, lines: strings.Split(string(b), "\n")}
	var doc yaml.Node
	if err := yaml.Unmarshal(b, &doc); err != nil {
		return nil, dsl.Diagnostics{{Pos: dsl.Pos{File: path}, Message: err.Error()}}
	}
	if len(doc.Content) == 0 || doc.Content[0].Kind != yaml.MappingNode {
		return nil, dsl.Diagnostics{{Pos: dsl.Pos{File: path, Line: 1, Col: 1}, Message: "a test file is a mapping with cases:"}}
	}
	root := doc.Content[0]
	pipePath := strings.TrimSuffix(path, ".test.yaml") + ".yaml"
	for i := 0; i+1 < len(root.Content); i += 2 {
		k, v := root.Content[i], root.Content[i+1]
		switch k.Value {
		case "pipeline":
			pipePath = filepath.Join(filepath.Dir(path), v.Value)
		case "cases":
		default:
			l.errorf(k, "unknown key %q in a test file (it has pipeline: and cases:)%s", k.Value, dsl.Suggest(k.Value, []string{"pipeline", "cases"}))
		}
	}
	p, pds := dsl.Load(pipePath)
	if p == nil {
		return nil, append(l.ds, pds...)
	}
	f := &File{Path: path, Pipeline: p}
	l.index(p)
	f.mcpNamed = l.mcpNamed
	cases := valueOf(root, "cases")
	if cases == nil || cases.Kind != yaml.SequenceNode || len(cases.Content) == 0 {
		l.errorf(root, "a test file needs cases: a list of test cases")
	} else {
		seen := map[string]bool{}
		for _, c := range cases.Content {
			tc := l.testCase(c)
			if tc == nil {
				continue
			}
			if seen[tc.Name] {
				l.errorf(c, "two cases are named %q", tc.Name)
			}
			seen[tc.Name] = true
			f.Cases = append(f.Cases, tc)
		}
	}
	if len(l.ds) > 0 {
		return nil, l.ds
	}
	return f, nil
}

type loader struct {
	path  string
	lines []string
	ds    dsl.Diagnostics
	p     *dsl.Pipeline
	nodes map[string]*dsl.Node // by static path ("refine/critique")
	ids   map[string][]string  // id -> static paths
	paths []string
	owner map[*dsl.Node]*dsl.Pipeline
	// MCP servers of the pipeline and those it calls, the tools nodes
	// name one by one, and the servers an agent takes whole (server.*).
	mcpServers []string
	mcpNamed   map[string][]string
	mcpAll     map[string]bool
	// agentTools are the built-in and pipeline tools agents may call.
	agentTools map[string]bool
}

func (l *loader) pos(n *yaml.Node) dsl.Pos { return dsl.Pos{File: l.path, Line: n.Line, Col: n.Column} }

func (l *loader) errorf(n *yaml.Node, format string, args ...any) {
	d := dsl.Diagnostic{Pos: l.pos(n), Message: fmt.Sprintf(format, args...)}
	if n.Line >= 1 && n.Line <= len(l.lines) {
		d.Line = l.lines[n.Line-1]
	}
	l.ds = append(l.ds, d)
}

// index records every node's static path: ids joined by "/" through loop,
// map and parallel bodies and call nodes, with no iteration or item index.
func (l *loader) index(p *dsl.Pipeline) {
	l.p, l.nodes, l.ids = p, map[string]*dsl.Node{}, map[string][]string{}
	for _, sp := range StaticNodes(p) {
		l.nodes[sp.Path] = sp.Node
		l.ids[sp.Node.ID] = append(l.ids[sp.Node.ID], sp.Path)
		l.paths = append(l.paths, sp.Path)
	}
	l.owner, l.mcpNamed, l.mcpAll, l.agentTools = map[*dsl.Node]*dsl.Pipeline{}, map[string][]string{}, map[string]bool{}, map[string]bool{}
	servers := map[string]bool{}
	addServers := func(q *dsl.Pipeline) {
		for name := range q.MCP {
			servers[name] = true
		}
	}
	addServers(p)
	dsl.Walk(p, func(q *dsl.Pipeline, n *dsl.Node) {
		l.owner[n] = q
		addServers(q)
		var names []string
		if a := n.Agent(); a != nil {
			names = append(append(names, a.Tools...), a.Finish...)
			for _, t := range a.Tools {
				if _, _, mcp := q.MCPToolName(t); !mcp && !contains(a.Finish, t) {
					l.agentTools[t] = true
				}
			}
		}
		if t := n.Tool(); t != nil {
			names = append(names, t.Name)
		}
		for _, name := range names {
			s, tool, ok := q.MCPToolName(name)
			switch {
			case !ok:
			case tool == "*":
				l.mcpAll[s.Name] = true
			case !contains(l.mcpNamed[s.Name], tool):
				l.mcpNamed[s.Name] = append(l.mcpNamed[s.Name], tool)
			}
		}
	})
	l.mcpServers = keys(servers)
}

// StaticNode is a node and its path with indices removed.
type StaticNode struct {
	Path string
	Node *dsl.Node
}

// StaticNodes lists the nodes of p in declaration order, descending into
// bodies and called pipelines.
func StaticNodes(p *dsl.Pipeline) []StaticNode {
	var out []StaticNode
	var walk func(prefix string, b dsl.Block, depth int)
	walk = func(prefix string, b dsl.Block, depth int) {
		for _, n := range b {
			path := prefix + n.ID
			out = append(out, StaticNode{Path: path, Node: n})
			for _, body := range dsl.Bodies(n) {
				walk(path+"/", body.Body, depth)
			}
			if c := n.Call(); c != nil && c.Pipeline != nil && depth < 8 {
				walk(path+"/", c.Pipeline.Nodes, depth+1)
			}
		}
	}
	walk("", p.Nodes, 0)
	return out
}

var indexRE = regexp.MustCompile(`\[[^\]/]*\]`)

// Strip removes iteration, item and branch indices from a run path:
// "refine[2]/route" becomes "refine/route".
func Strip(path string) string { return indexRE.ReplaceAllString(path, "") }

// resolve turns what a test file names (a static path, a run path or a
// unique id) into a static path, or reports it.
func (l *loader) resolve(n *yaml.Node, what string) (string, bool) {
	name := Strip(n.Value)
	if l.nodes[name] != nil {
		return name, true
	}
	switch paths := l.ids[name]; len(paths) {
	case 1:
		return paths[0], true
	case 0:
		cands := append(append([]string(nil), l.paths...), keys(l.ids)...)
		l.errorf(n, "%s: the pipeline has no node %q%s", what, n.Value, dsl.Suggest(name, cands))
	default:
		l.errorf(n, "%s: %q names %d nodes (%s); write the path", what, n.Value, len(paths), strings.Join(paths, ", "))
	}
	return "", false
}

func keys[V any](m map[string]V) []string {
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	sort.Strings(out)
	return out
}

func valueOf(m *yaml.Node, key string) *yaml.Node {
	if m == nil || m.Kind != yaml.MappingNode {
		return nil
	}
	for i := 0; i+1 < len(m.Content); i += 2 {
		if m.Content[i].Value == key {
			return m.Content[i+1]
		}
	}
	return nil
}

func (l *loader) testCase(c *yaml.Node) *Case {
	if c.Kind != yaml.MappingNode {
		l.errorf(c, "a case is a mapping with name:, inputs:, mocks:, answers: and expect:")
		return nil
	}
	tc := &Case{Pos: l.pos(c), Mocks: map[string]*Mock{}, Tools: map[string]*Mock{}, Answers: map[string]any{}}
	var edits *yaml.Node // set when every edit fits its declaration
	for i := 0; i+1 < len(c.Content); i += 2 {
		k, v := c.Content[i], c.Content[i+1]
		switch k.Value {
		case "name":
			tc.Name = v.Value
		case "inputs":
			m, ok := dsl.Plain(v).(map[string]any)
			if !ok {
				l.errorf(v, "inputs: a mapping of input names to values")
				continue
			}
			tc.Inputs = m
			l.checkInputs(v)
		case "mocks":
			l.mocks(tc, v)
		case "tools":
			l.toolMocks(tc, v)
		case "answers":
			for j := 0; j+1 < len(v.Content); j += 2 {
				if path, ok := l.resolve(v.Content[j], "answers"); ok {
					tc.Answers[path] = dsl.Plain(v.Content[j+1])
				}
			}
		case "cassette":
			tc.Cassette = filepath.Join(filepath.Dir(l.path), v.Value)
			if _, err := os.Stat(tc.Cassette); err != nil {
				l.errorf(v, "cassette: %v", err)
			}
		case "restore":
			l.restore(tc, v)
		case "edits":
			if l.edits(tc, v) {
				edits = k
			}
		case "expect":
			l.expect(&tc.Expect, v)
		default:
			l.errorf(k, "unknown key %q in a case%s", k.Value, dsl.Suggest(k.Value, []string{"name", "inputs", "restore", "edits", "mocks", "tools", "answers", "cassette", "expect"}))
		}
	}
	if edits != nil {
		l.checkStart(tc, edits)
	}
	if tc.Name == "" {
		l.errorf(c, "a case needs a name:")
	}
	return tc
}

func (l *loader) checkInputs(v *yaml.Node) {
	var names []string
	for _, in := range l.p.Inputs {
		names = append(names, in.Name)
	}
	for j := 0; j+1 < len(v.Content); j += 2 {
		k := v.Content[j]
		found := false
		for _, in := range l.p.Inputs {
			if in.Name != k.Value {
				continue
			}
			found = true
			if err := jsonvalue.Validate(in.Schema, dsl.Plain(v.Content[j+1])); err != nil {
				l.errorf(v.Content[j+1], "input %q: %v", k.Value, err)
			}
		}
		if !found {
			l.errorf(k, "inputs: the pipeline declares no input %q%s", k.Value, dsl.Suggest(k.Value, names))
		}
	}
}

func (l *loader) mocks(tc *Case, v *yaml.Node) {
	if v.Kind != yaml.MappingNode {
		l.errorf(v, "mocks: a mapping of node paths to replies")
		return
	}
	for j := 0; j+1 < len(v.Content); j += 2 {
		k, r := v.Content[j], v.Content[j+1]
		path, ok := l.resolve(k, "mocks")
		if !ok {
			continue
		}
		n := l.nodes[path]
		switch n.Kind {
		case dsl.KindLLM, dsl.KindAgent, dsl.KindTool, dsl.KindCode:
		default:
			l.errorf(k, "mocks: node %q is a %s node; only llm, agent, tool and code nodes take mocks", k.Value, n.Kind)
			continue
		}
		key := path
		if Strip(k.Value) != k.Value {
			// A run path answers one iteration, item or branch: it must
			// be the node's whole path, so that it can match a call.
			if Strip(k.Value) != path {
				l.errorf(k, "mocks: %q names one iteration of %q but not by its whole path; write it as %s with the indices", k.Value, path, path)
				continue
			}
			key = k.Value
		}
		tc.Mocks[key] = l.mock(k, r, func(it *yaml.Node) *Reply { return l.reply(n, it) })
	}
}

// mock reads one reply, which answers every call, or a list of them, one
// per call.
func (l *loader) mock(k, r *yaml.Node, reply func(*yaml.Node) *Reply) *Mock {
	m := &Mock{Pos: l.pos(k)}
	items := []*yaml.Node{r}
	if r.Kind == yaml.SequenceNode {
		items = r.Content
	} else {
		m.Repeat = true
	}
	for _, it := range items {
		if rep := reply(it); rep != nil {
			m.Replies = append(m.Replies, rep)
		}
	}
	return m
}

// mcpErrors are how a mocked MCP call can fail: the tool reports an error
// or times out (the model reads it), or the server dies (the node fails).
var mcpErrors = []string{"tool", "timeout", "server"}

// toolMocks reads tools:, the results of MCP tools by "server.tool". The
// server must be declared and the tool named by some node, or taken whole
// by an agent (server.*).
func (l *loader) toolMocks(tc *Case, v *yaml.Node) {
	if v.Kind != yaml.MappingNode {
		l.errorf(v, "tools: a mapping of tools (server.tool for MCP tools, the name for others) to results")
		return
	}
	for j := 0; j+1 < len(v.Content); j += 2 {
		k, r := v.Content[j], v.Content[j+1]
		server, tool, ok := strings.Cut(k.Value, ".")
		switch {
		case l.agentTools[k.Value]:
		case !ok || server == "" || tool == "":
			called, which := keys(l.agentTools), "no agent calls one"
			if len(called) > 0 {
				which = "agents call " + strings.Join(called, ", ")
			}
			l.errorf(k, "tools: %q is not an MCP tool; write server.tool, as agents name it (such as fs.read_text_file), or name a built-in or pipeline tool an agent calls (%s)%s", k.Value, which, dsl.Suggest(k.Value, called))
			continue
		case !contains(l.mcpServers, server):
			declared := "it declares none under mcp:"
			if len(l.mcpServers) > 0 {
				declared = "it declares " + strings.Join(l.mcpServers, ", ")
			}
			l.errorf(k, "tools: the pipeline has no MCP server %q (%s)%s", server, declared, dsl.Suggest(server, l.mcpServers))
			continue
		case !l.mcpAll[server] && !contains(l.mcpNamed[server], tool):
			var named []string
			for _, s := range keys(l.mcpNamed) {
				for _, t := range l.mcpNamed[s] {
					named = append(named, s+"."+t)
				}
			}
			l.errorf(k, "tools: no node calls MCP tool %q, so its mock would answer nothing (the pipeline calls %s)%s", k.Value, orNone(named), dsl.Suggest(k.Value, named))
			continue
		}
		tc.Tools[k.Value] = l.mock(k, r, l.toolReply)
	}
}

func orNone(list []string) string {
	if len(list) == 0 {
		return "none of its tools by name"
	}
	return strings.Join(list, ", ")
}

// toolReply is one mocked MCP result: output:, or error: and message:.
func (l *loader) toolReply(v *yaml.Node) *Reply {
	allowed := []string{"output", "error", "message"}
	if v.Kind != yaml.MappingNode {
		l.errorf(v, "an MCP tool's mock is a mapping: {output: ...} or {error: tool, message: ...}")
		return nil
	}
	rep := &Reply{Pos: l.pos(v)}
	for i := 0; i+1 < len(v.Content); i += 2 {
		k, x := v.Content[i], v.Content[i+1]
		switch k.Value {
		case "output":
			rep.Output, rep.HasOut = dsl.Plain(x), true
		case "error":
			rep.Error = x.Value
			if !contains(mcpErrors, x.Value) {
				l.errorf(x, "error: %q is not how an MCP call fails; write tool (the tool reports an error), timeout (it does not answer in time) or server (the server dies)%s", x.Value, dsl.Suggest(x.Value, mcpErrors))
			}
		case "message":
			rep.Message = x.Value
		default:
			l.errorf(k, "unknown key %q in an MCP tool's mock (it takes %s)%s", k.Value, strings.Join(allowed, ", "), dsl.Suggest(k.Value, allowed))
		}
	}
	if rep.HasOut == (rep.Error != "") {
		l.errorf(v, "an MCP tool's mock gives output: or error:, one of them")
	}
	return rep
}

var modelErrors = []string{"rate_limit", "server", "critical", "timeout"}

func (l *loader) reply(n *dsl.Node, v *yaml.Node) *Reply {
	rep := &Reply{Pos: l.pos(v)}
	model := n.Kind == dsl.KindLLM || n.Kind == dsl.KindAgent
	if v.Kind == yaml.ScalarNode && model {
		rep.Text = v.Value
		return rep
	}
	if v.Kind != yaml.MappingNode {
		l.errorf(v, "a reply is a mapping (text:, json:, calls:, finish:, output: or error:)")
		return nil
	}
	var allowed []string
	if model {
		allowed = []string{"text", "json", "calls", "finish", "error", "message", "usage"}
	} else {
		allowed = []string{"output", "error", "message"}
	}
	for i := 0; i+1 < len(v.Content); i += 2 {
		k, x := v.Content[i], v.Content[i+1]
		if !contains(allowed, k.Value) {
			l.errorf(k, "unknown key %q in a reply for %s node %q (it takes %s)%s", k.Value, n.Kind, n.ID, strings.Join(allowed, ", "), dsl.Suggest(k.Value, allowed))
			continue
		}
		switch k.Value {
		case "text":
			rep.Text = x.Value
		case "json":
			rep.JSON, rep.HasJSON = dsl.Plain(x), true
			if n.LLM() != nil && n.LLM().OutputSchema != nil {
				if err := jsonvalue.Validate(n.LLM().OutputSchema, rep.JSON); err != nil {
					l.errorf(x, "mock for %q does not match its output_schema: %v", n.ID, err)
				}
			}
		case "calls":
			for _, c := range x.Content {
				if call, ok := l.call(n, c, false); ok {
					rep.Calls = append(rep.Calls, call)
				}
			}
		case "finish":
			if call, ok := l.call(n, x, true); ok {
				rep.Calls = append(rep.Calls, call)
			}
		case "output":
			rep.Output, rep.HasOut = dsl.Plain(x), true
		case "error":
			rep.Error = x.Value
			if model && !contains(modelErrors, x.Value) {
				l.errorf(x, "error: %q is not a model error; write one of %s%s", x.Value, strings.Join(modelErrors, ", "), dsl.Suggest(x.Value, modelErrors))
			}
		case "message":
			rep.Message = x.Value
		case "usage":
			l.usage(&rep.Usage, x)
		}
	}
	return rep
}

func (l *loader) usage(u *Usage, v *yaml.Node) {
	if v.Kind != yaml.MappingNode {
		l.errorf(v, "usage: a mapping with prompt: and completion: (token counts)")
		return
	}
	for i := 0; i+1 < len(v.Content); i += 2 {
		k, x := v.Content[i], v.Content[i+1]
		var n int
		if x.Decode(&n) != nil || n < 0 {
			l.errorf(x, "usage.%s: %q is not a token count (a whole number, 0 or more)", k.Value, x.Value)
			continue
		}
		switch k.Value {
		case "prompt":
			u.Prompt = n
		case "completion":
			u.Completion = n
		default:
			l.errorf(k, "unknown key %q in usage (it has prompt: and completion:)%s", k.Value, dsl.Suggest(k.Value, []string{"prompt", "completion"}))
		}
	}
}

func (l *loader) call(n *dsl.Node, c *yaml.Node, finish bool) (Call, bool) {
	a := n.Agent()
	call := Call{Pos: l.pos(c), Finish: finish}
	if a == nil {
		l.errorf(c, "node %q is not an agent: only agents make tool calls", n.ID)
		return call, false
	}
	nameNode := valueOf(c, "name")
	if nameNode == nil {
		l.errorf(c, "a call needs name: and args:")
		return call, false
	}
	call.Name = nameNode.Value
	args, _ := dsl.Plain(valueOf(c, "args")).(map[string]any)
	if args == nil {
		args = map[string]any{}
	}
	call.Args = args
	names := a.Finish
	if !finish {
		names = append(append([]string(nil), a.Tools...), a.Finish...)
		if s, tool, ok := l.pipelineOf(n).MCPToolName(call.Name); ok && tool != "*" && contains(names, s.Name+".*") {
			names = append(names, call.Name)
		}
	}
	if s, tool, ok := l.pipelineOf(n).MCPToolName(call.Name); ok && contains(names, call.Name) {
		call.Wire = nodes.WireName(s.Name, tool)
	}
	if !contains(names, call.Name) {
		what := "tool"
		if finish {
			what = "finish tool"
		}
		l.errorf(nameNode, "agent %q has no %s %q (it has %s)%s", n.ID, what, call.Name, strings.Join(names, ", "), dsl.Suggest(call.Name, names))
		return call, false
	}
	if t := l.p.Tools[call.Name]; t != nil && t.Parameters != nil {
		if err := jsonvalue.Validate(t.Parameters, args); err != nil {
			at := valueOf(c, "args")
			if at == nil {
				at = c
			}
			l.errorf(at, "call of %q: the arguments do not match its parameters: %v", call.Name, err)
		}
	}
	return call, true
}

// pipelineOf is the pipeline that declares n, whose MCP servers its tool
// names refer to.
func (l *loader) pipelineOf(n *dsl.Node) *dsl.Pipeline {
	if q := l.owner[n]; q != nil {
		return q
	}
	return l.p
}

func contains(list []string, s string) bool {
	for _, x := range list {
		if x == s {
			return true
		}
	}
	return false
}

var statuses = []string{"completed", "failed", "waiting", "stopped"}

func (l *loader) expect(e *Expect, v *yaml.Node) {
	outputs := make([]string, 0, len(l.p.Outputs))
	for _, o := range l.p.Outputs {
		outputs = append(outputs, o.Name)
	}
	for i := 0; i+1 < len(v.Content); i += 2 {
		k, x := v.Content[i], v.Content[i+1]
		switch k.Value {
		case "status":
			e.Status = runtime.Status(x.Value)
			if !contains(statuses, x.Value) {
				l.errorf(x, "status: %q is not one of %s%s", x.Value, strings.Join(statuses, ", "), dsl.Suggest(x.Value, statuses))
			}
		case "class":
			e.Class = x.Value
		case "outputs":
			e.Outputs = map[string]any{}
			for j := 0; j+1 < len(x.Content); j += 2 {
				name := x.Content[j]
				if !contains(outputs, name.Value) {
					l.errorf(name, "expect.outputs: the pipeline has no output %q%s", name.Value, dsl.Suggest(name.Value, outputs))
					continue
				}
				e.Outputs[name.Value] = dsl.Plain(x.Content[j+1])
			}
		case "that":
			items := []*yaml.Node{x}
			if x.Kind == yaml.SequenceNode {
				items = x.Content
			}
			for _, it := range items {
				env := map[string]any{"outputs": map[string]any{}, "status": "", "route": []string{}}
				if _, err := expr.Compile(it.Value, expr.Env(env), expr.AllowUndefinedVariables()); err != nil {
					l.errorf(it, "expect.that: %v", err)
					continue
				}
				e.That = append(e.That, &Check{Src: it.Value, Pos: l.pos(it)})
			}
		case "route":
			switch x.Kind {
			case yaml.SequenceNode:
				e.HasRoute = true
				e.Route = l.routeList(x)
			case yaml.MappingNode:
				for j := 0; j+1 < len(x.Content); j += 2 {
					switch x.Content[j].Value {
					case "includes":
						e.Includes = l.routeList(x.Content[j+1])
					case "excludes":
						e.Excludes = l.routeList(x.Content[j+1])
					default:
						l.errorf(x.Content[j], "route: a list of node paths, or includes: and excludes:")
					}
				}
			default:
				l.errorf(x, "route: a list of node paths, or includes: and excludes:")
			}
		case "events":
			l.events(e, x)
		case "cost_usd":
			e.CostUSD = l.bounds(x, "expect.cost_usd", []string{"min", "max"})
		case "steps":
			e.Steps = l.bounds(x, "expect.steps", []string{"min", "max"})
		default:
			l.errorf(k, "unknown key %q in expect%s", k.Value, dsl.Suggest(k.Value, []string{"status", "class", "outputs", "that", "route", "events", "cost_usd", "steps"}))
		}
	}
	if e.Class != "" && e.Status != runtime.StatusFailed {
		l.errorf(v, "expect.class needs status: failed")
	}
}

func (l *loader) routeList(x *yaml.Node) []string {
	var out []string
	for _, it := range x.Content {
		if _, ok := l.resolve(it, "route"); ok {
			out = append(out, it.Value)
		}
	}
	return out
}

// EventTypes are the event types expect.events can name.
var EventTypes = []string{
	runtime.EventNodeStarted, runtime.EventNodeFinished, runtime.EventNodeSkipped,
	runtime.EventNodeFailed, runtime.EventNodeRetry, runtime.EventLoopExhausted,
	runtime.EventMapItemSkipped, runtime.EventModelTurn, runtime.EventToolCall,
	runtime.EventSandboxRun, runtime.EventQuestion, runtime.EventToolProgress,
}

func (l *loader) events(e *Expect, x *yaml.Node) {
	if x.Kind != yaml.SequenceNode {
		l.errorf(x, "expect.events: a list like [{type: question, node: approve}, {type: loop_exhausted, count: 1}]")
		return
	}
	for _, it := range x.Content {
		if it.Kind != yaml.MappingNode {
			l.errorf(it, "expect.events: each item is a mapping with type: and optionally node:, count:, min:, max:")
			continue
		}
		ec := EventCheck{Pos: l.pos(it)}
		var count *yaml.Node
		for j := 0; j+1 < len(it.Content); j += 2 {
			k, v := it.Content[j], it.Content[j+1]
			switch k.Value {
			case "type":
				ec.Type = v.Value
				if !contains(EventTypes, v.Value) {
					l.errorf(v, "expect.events: unknown event type %q (it is one of %s)%s", v.Value, strings.Join(EventTypes, ", "), dsl.Suggest(v.Value, EventTypes))
				}
			case "node":
				if _, ok := l.resolve(v, "expect.events"); ok {
					ec.Node = v.Value
				}
			case "count":
				count = v
				if n, ok := l.number(v, "expect.events: count"); ok {
					ec.Count.Min, ec.Count.Max = &n, &n
				}
			case "min", "max":
			default:
				l.errorf(k, "unknown key %q in expect.events (it has type:, node:, count:, min:, max:)%s", k.Value, dsl.Suggest(k.Value, []string{"type", "node", "count", "min", "max"}))
			}
		}
		if ec.Type == "" {
			l.errorf(it, "expect.events: an item needs type:")
			continue
		}
		b := l.bounds(it, "expect.events", nil)
		if count != nil && (b.Min != nil || b.Max != nil) {
			l.errorf(count, "expect.events: write count: or min:/max:, not both")
		}
		if count == nil {
			ec.Count = b
			if b.Min == nil && b.Max == nil {
				one := 1.0
				ec.Count.Min = &one
			}
		}
		e.Events = append(e.Events, ec)
	}
}

// bounds reads min: and max: from a mapping; allowed lists every key the
// mapping may hold (nil: the caller checks the other keys).
func (l *loader) bounds(x *yaml.Node, what string, allowed []string) Bounds {
	var b Bounds
	if x.Kind != yaml.MappingNode {
		l.errorf(x, "%s: a mapping with min: and/or max:", what)
		return b
	}
	for j := 0; j+1 < len(x.Content); j += 2 {
		k, v := x.Content[j], x.Content[j+1]
		switch k.Value {
		case "min", "max":
			n, ok := l.number(v, what+": "+k.Value)
			if !ok {
				continue
			}
			if k.Value == "min" {
				b.Min = &n
			} else {
				b.Max = &n
			}
		default:
			if allowed != nil {
				l.errorf(k, "unknown key %q in %s (it has min: and max:)%s", k.Value, what, dsl.Suggest(k.Value, allowed))
			}
		}
	}
	if b.Min != nil && b.Max != nil && *b.Min > *b.Max {
		l.errorf(x, "%s: min %g is above max %g", what, *b.Min, *b.Max)
	}
	return b
}

func (l *loader) number(v *yaml.Node, what string) (float64, bool) {
	var n float64
	if v.Kind != yaml.ScalarNode || v.Decode(&n) != nil || n < 0 {
		l.errorf(v, "%s: %q is not a number (0 or more)", what, v.Value)
		return 0, false
	}
	return n, true
}
