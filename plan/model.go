package plan

import (
	"fmt"
	"slices"
	"strings"

	"github.com/expr-lang/expr"
	"github.com/expr-lang/expr/ast"
	"github.com/expr-lang/expr/parser"

	"github.com/flowrun/flowrun/dsl"
	"github.com/flowrun/flowrun/jsonvalue"
	"github.com/flowrun/flowrun/llm"
)

// llm bounds one run of an llm node: every try of every repair turn.
func (w *walker) llm(p *dsl.Pipeline, inputs map[string]any, n *dsl.Node, l *dsl.LLM, row *Node, inLoop bool) Totals {
	calls := Num(float64(modelAttempts(n, p, l.Model) * (1 + l.RepairRetries)))
	req, known := w.request(p, inputs, n, l, inLoop)
	var b llm.Bound
	var err error
	if known {
		b, err = llm.WorstCase(req)
	} else if m := p.Models[l.Model]; m != nil {
		// The output side still has a bound worth naming.
		_, err = llm.WorstCase(&llm.Request{Model: m, MaxTokens: l.MaxTokens})
	}
	t, per := w.perCall(p, n, l, calls, b, err, known)
	row.PerCall = per
	return t
}

// agent bounds one run of an agent: max_steps turns, each asked again up
// to tool_retries times. What a turn sends grows with the replies and
// tool results before it, so its input has no bound before the run.
func (w *walker) agent(p *dsl.Pipeline, n *dsl.Node, a *dsl.Agent, row *Node) Totals {
	steps := a.MaxSteps
	if steps <= 0 {
		steps = 10 // nodes' default
	}
	turns := steps * (1 + a.ToolRetries) * modelAttempts(n, p, a.Model)
	var err error
	if m := p.Models[a.Model]; m != nil {
		_, err = llm.WorstCase(&llm.Request{Model: m, MaxTokens: a.MaxTokens})
	}
	t, _ := w.perCall(p, n, &a.LLM, Num(float64(turns)), llm.Bound{}, err, false)
	w.unbounded("input tokens and cost", "an agent's turns resend its earlier replies and tool results, which grow with model output",
		"bound the agent with limits.max_cost_usd, or write the steps as llm nodes")
	if len(a.Tools) > 0 {
		// A turn may call several tools at once.
		t.ToolCalls = Unbounded()
		w.unbounded("tool calls", "a turn may call several tools at once", "")
		for _, name := range a.Tools {
			if name == "python_execute" || name == "code_execute" {
				t.SandboxRuns = Unbounded()
			}
			if decl := p.Tools[name]; decl != nil && (decl.Pipeline != nil || decl.LLM != nil) {
				t.Calls = Unbounded()
				w.unbounded("model calls", fmt.Sprintf("tool %s makes model calls, and a turn may call it several times", name), "")
			}
		}
	}
	row.PerCall = nil
	return t
}

// request is the request an llm node sends first, when everything it
// renders depends on the run's inputs alone; known is false otherwise.
func (w *walker) request(p *dsl.Pipeline, inputs map[string]any, n *dsl.Node, l *dsl.LLM, inLoop bool) (*llm.Request, bool) {
	m := p.Models[l.Model]
	if m == nil {
		return nil, false
	}
	if l.Memory != "" {
		why := fmt.Sprintf("it continues memory %s, which holds the earlier replies", l.Memory)
		if inLoop {
			w.note(fmt.Sprintf("node %s: its prompt grows with model output: memory %s gains each call's prompt and reply (≤ max_tokens) every iteration", n.ID, l.Memory))
		}
		w.unbounded("input tokens and cost", why, "")
		return nil, false
	}
	if len(l.Images) > 0 {
		w.unbounded("input tokens and cost", "its images are read when it runs", "")
		return nil, false
	}
	env := &dsl.Env{Inputs: inputs}
	req := &llm.Request{Model: m, Temperature: l.Temperature, MaxTokens: l.MaxTokens,
		OutputSchema: l.OutputSchema, SchemaName: n.ID, RepairRetries: l.RepairRetries}
	for _, part := range []struct {
		role string
		t    *dsl.Template
	}{{llm.RoleSystem, l.System}, {llm.RoleUser, l.Prompt}} {
		if part.t == nil {
			if part.role == llm.RoleUser {
				req.Messages = append(req.Messages, llm.Message{Role: part.role})
			}
			continue
		}
		if reads := dataReads(part.t); len(reads) > 0 {
			w.unbounded("input tokens and cost", fmt.Sprintf("its %s reads %s, whose size depends on the run", part.role, strings.Join(reads, ", ")), "")
			return nil, false
		}
		text, err := part.t.Render(env)
		if err != nil {
			w.unbounded("input tokens and cost", fmt.Sprintf("its %s needs an input that was not given: %v", part.role, err), "give the inputs")
			return nil, false
		}
		req.Messages = append(req.Messages, llm.Message{Role: part.role, Text: text})
	}
	return req, true
}

// dataReads are the names other than inputs that a template reads.
func dataReads(t *dsl.Template) []string {
	var out []string
	for _, e := range t.Exprs() {
		for _, r := range roots(e.Src) {
			if r != "inputs" && !slices.Contains(out, r) {
				out = append(out, r)
			}
		}
	}
	return out
}

// envNames are the names an expression can read from the run.
var envNames = map[string]bool{"inputs": true, "state": true, "nodes": true, "loop": true, "item": true, "index": true, "run": true, "env": true}

// roots are the run names src reads (inputs, state.x, nodes.y, ...); an
// expression that does not parse reads "?" (anything).
func roots(src string) []string {
	tree, err := parser.Parse(src)
	if err != nil {
		return []string{"?"}
	}
	v := &rootVisitor{}
	ast.Walk(&tree.Node, v)
	return v.names
}

type rootVisitor struct{ names []string }

func (v *rootVisitor) Visit(node *ast.Node) {
	name := ""
	switch n := (*node).(type) {
	case *ast.MemberNode:
		if id, ok := n.Node.(*ast.IdentifierNode); ok && (id.Value == "state" || id.Value == "nodes") {
			if s, ok := n.Property.(*ast.StringNode); ok {
				name = id.Value + "." + s.Value
			}
		}
	case *ast.IdentifierNode:
		if envNames[n.Value] && n.Value != "state" && n.Value != "nodes" {
			name = n.Value
		}
	}
	if name != "" && !slices.Contains(v.names, name) {
		v.names = append(v.names, name)
	}
}

// evalInputs is the figure of a count expression that reads only inputs.
func (w *walker) evalInputs(inputs map[string]any, e *dsl.Expr, path, what string) Figure {
	for _, r := range roots(e.Src) {
		if r != "inputs" {
			w.unbounded(what, fmt.Sprintf("`%s` reads %s, known only while running", e.Src, r), "")
			return Unbounded()
		}
	}
	v, err := e.Eval(&dsl.Env{Inputs: inputs})
	n, ok := jsonvalue.Number(v)
	return Sym(oneLine(e.Src), n, err == nil && ok)
}

// length is the figure of how many items a map's over expression gives:
// the length of what a map(), filter() or sortBy() at its top walks, of a
// range a..b, or of a list that only inputs make.
func (w *walker) length(p *dsl.Pipeline, inputs map[string]any, over *dsl.Expr, path string) Figure {
	tree, err := parser.Parse(over.Src)
	if err != nil {
		return Unbounded()
	}
	node := tree.Node
	for {
		b, ok := node.(*ast.BuiltinNode)
		if !ok || len(b.Arguments) == 0 || !slices.Contains([]string{"map", "filter", "sortBy", "sort"}, b.Name) {
			break
		}
		node = b.Arguments[0]
	}
	env := map[string]any{"inputs": inputs}
	if r, ok := node.(*ast.BinaryNode); ok && r.Operator == ".." {
		src := fmt.Sprintf("(%s) - (%s) + 1", r.Right, r.Left)
		if l, ok := r.Left.(*ast.IntegerNode); ok && l.Value == 0 {
			src = fmt.Sprintf("%s + 1", r.Right)
			if m, ok := r.Right.(*ast.BinaryNode); ok && m.Operator == "-" {
				if one, ok := m.Right.(*ast.IntegerNode); ok && one.Value == 1 {
					src = m.Left.String()
				}
			}
		}
		return w.evalSrc(env, src, path)
	}
	if node == tree.Node {
		for _, r := range roots(over.Src) {
			if r != "inputs" {
				w.unbounded("map items", fmt.Sprintf("`%s` reads %s, known only while running", oneLine(over.Src), r), "")
				return Unbounded()
			}
		}
		v, err := over.Eval(&dsl.Env{Inputs: inputs})
		list, ok := v.([]any)
		return Sym("len("+oneLine(over.Src)+")", float64(len(list)), err == nil && ok)
	}
	return w.evalSrc(env, "len("+node.String()+")", path)
}

func (w *walker) evalSrc(env map[string]any, src, path string) Figure {
	for _, r := range roots(src) {
		if r != "inputs" {
			w.unbounded("map items", fmt.Sprintf("`%s` reads %s, known only while running", src, r), "")
			return Unbounded()
		}
	}
	v, err := expr.Eval(src, env)
	n, ok := jsonvalue.Number(v)
	return Sym(src, n, err == nil && ok)
}

func oneLine(s string) string { return strings.Join(strings.Fields(s), " ") }
