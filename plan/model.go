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
	"github.com/flowrun/flowrun/llmconf"
)

// llm bounds one run of an llm node: every try of every repair turn, in
// every run of the node.
func (w *walker) llm(p *dsl.Pipeline, sc scope, n *dsl.Node, l *dsl.LLM, row *Node) Totals {
	calls := Num(float64(reruns(n, l.OutputSchema != nil) * modelTries(n, p, l.Model) * (1 + l.RepairRetries)))
	b, err, unknown := w.firstTurn(p, sc, n, l)
	if unknown != "" {
		if m := p.Models[l.Model]; m != nil {
			// The output side still has a bound worth naming.
			_, err = llm.WorstCase(&llm.Request{Model: m, MaxTokens: l.MaxTokens})
		}
	}
	t, per := w.perCall(p, n, l, calls, b, err, unknown)
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
	turns := reruns(n, true) * steps * (1 + a.ToolRetries) * modelTries(n, p, a.Model)
	var err error
	if m := p.Models[a.Model]; m != nil {
		_, err = llm.WorstCase(&llm.Request{Model: m, MaxTokens: a.MaxTokens})
	}
	t, _ := w.perCall(p, n, &a.LLM, Num(float64(turns)), llm.Bound{}, err,
		"an agent's turns resend its earlier replies and tool results, which grow with model output")
	if len(a.Tools) > 0 {
		// A turn may call several tools at once.
		t.ToolCalls = Unbounded()
		w.unbounded("tool calls", "a turn may call several tools at once", "")
		for _, name := range a.Tools {
			if name == "python_execute" || name == "code_execute" {
				t.SandboxRuns = Unbounded()
			}
			if decl := p.Tools[name]; decl != nil && (decl.Pipeline != nil || decl.LLM != nil) {
				t.Calls, t.InputTokens, t.OutputTokens, t.USD = Unbounded(), Unbounded(), Unbounded(), Unbounded()
				w.unbounded("model calls, tokens and cost", fmt.Sprintf("tool %s makes model calls, and a turn may call it several times", name), "")
			}
		}
	}
	row.PerCall = nil
	return t
}

// firstTurn is llm.WorstCase of the request an llm node sends, when
// everything it renders depends on the run's inputs, or on a map's items
// that inputs alone make (the largest of them); otherwise unknown says
// why it cannot be known before the run.
func (w *walker) firstTurn(p *dsl.Pipeline, sc scope, n *dsl.Node, l *dsl.LLM) (b llm.Bound, err error, unknown string) {
	m := p.Models[l.Model]
	if m == nil {
		return b, nil, "its model is not declared"
	}
	if l.Memory != "" {
		if sc.inLoop {
			w.note(fmt.Sprintf("%s: its prompt grows with model output: memory %s gains each call's prompt and reply (≤ max_tokens) every iteration", w.path, l.Memory))
		}
		return b, nil, fmt.Sprintf("it continues memory %s, which holds the earlier replies", l.Memory)
	}
	if len(l.Images) > 0 {
		return b, nil, "its images are read when it runs"
	}
	envs := []*dsl.Env{{Inputs: sc.inputs}}
	for _, t := range []*dsl.Template{l.System, l.Prompt} {
		if t == nil {
			continue
		}
		for _, r := range dataReads(t) {
			if (r == "item" || r == "index") && sc.items != nil {
				continue
			}
			return b, nil, w.dataDependent(sc, r)
		}
		for _, name := range inputReads(t) {
			if _, given := sc.inputs[name]; !given {
				return b, nil, fmt.Sprintf("its prompt reads inputs.%s, which is not given", name)
			}
		}
		if slices.ContainsFunc(dataReads(t), func(r string) bool { return r == "item" || r == "index" }) {
			envs = envs[:0]
			for i, it := range sc.items {
				envs = append(envs, &dsl.Env{Inputs: sc.inputs, Item: it, Index: i})
			}
		}
	}
	for i, env := range envs {
		req, why := request(m, n, l, env)
		if why != "" {
			return b, nil, why
		}
		one, oneErr := llm.WorstCase(req)
		if i == 0 || one.USD > b.USD || one.InputTokens > b.InputTokens {
			b, err = one, oneErr
		}
	}
	if len(envs) == 0 {
		return b, nil, "the map it runs in has no items"
	}
	return b, err, ""
}

// request is the request an llm node sends first, rendered in env; why
// says what kept it from being rendered.
func request(m *llmconf.Model, n *dsl.Node, l *dsl.LLM, env *dsl.Env) (req *llm.Request, why string) {
	req = &llm.Request{Model: m, Temperature: l.Temperature, MaxTokens: l.MaxTokens,
		OutputSchema: l.OutputSchema, SchemaName: n.ID, RepairRetries: l.RepairRetries}
	if l.System != nil {
		text, err := l.System.Render(env)
		if err != nil {
			return nil, fmt.Sprintf("its system prompt needs what is not given: %v", err)
		}
		req.Messages = append(req.Messages, llm.Message{Role: llm.RoleSystem, Text: text})
	}
	user := llm.Message{Role: llm.RoleUser}
	if l.Prompt != nil {
		text, err := l.Prompt.Render(env)
		if err != nil {
			return nil, fmt.Sprintf("its prompt needs what is not given: %v", err)
		}
		user.Text = text
	}
	req.Messages = append(req.Messages, user)
	return req, ""
}

// dataDependent says why a prompt reading r has no size before the run,
// naming a state variable (or the one a map's items come from) that a
// node sets from node outputs: in a loop it grows with model output.
func (w *walker) dataDependent(sc scope, r string) string {
	from := strings.TrimPrefix(r, "state.")
	if r == "item" || r == "index" {
		from = sc.itemsFrom
	}
	setter, fed := w.fed[from]
	switch {
	case fed && sc.inLoop && r == "item":
		return fmt.Sprintf("its prompt reads item, from state.%s, which node %s sets from node outputs every iteration: it grows with model output", from, setter)
	case fed && sc.inLoop:
		return fmt.Sprintf("its prompt reads %s, which node %s sets from node outputs every iteration: it grows with model output", r, setter)
	case strings.HasPrefix(r, "nodes.") && sc.inLoop:
		return fmt.Sprintf("its prompt reads %s, a reply or result of this run (≤ that node's max_tokens when it is a model's reply)", r)
	}
	return fmt.Sprintf("its prompt reads %s, whose size depends on the run", r)
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

// inputReads are the inputs a template reads by name (inputs.x).
func inputReads(t *dsl.Template) []string {
	var out []string
	for _, e := range t.Exprs() {
		tree, err := parser.Parse(e.Src)
		if err != nil {
			continue
		}
		v := &rootVisitor{}
		ast.Walk(&tree.Node, v)
		for _, name := range v.inputs {
			if !slices.Contains(out, name) {
				out = append(out, name)
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

type rootVisitor struct{ names, inputs []string }

func (v *rootVisitor) Visit(node *ast.Node) {
	name := ""
	switch n := (*node).(type) {
	case *ast.MemberNode:
		id, isID := n.Node.(*ast.IdentifierNode)
		prop, isName := n.Property.(*ast.StringNode)
		switch {
		case isID && isName && (id.Value == "state" || id.Value == "nodes"):
			name = id.Value + "." + prop.Value
		case isID && isName && id.Value == "inputs" && !slices.Contains(v.inputs, prop.Value):
			v.inputs = append(v.inputs, prop.Value)
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
func (w *walker) evalInputs(inputs map[string]any, e *dsl.Expr, what string) Figure {
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
// range a..b, or of a list that only inputs make. items are the items,
// when only inputs make them.
func (w *walker) length(sc scope, over *dsl.Expr) (n Figure, items []any) {
	tree, err := parser.Parse(over.Src)
	if err != nil {
		return Unbounded(), nil
	}
	if onlyInputs(over.Src) {
		v, err := over.Eval(&dsl.Env{Inputs: sc.inputs})
		list, ok := v.([]any)
		if err == nil && ok {
			items = list
		}
	}
	node := tree.Node
	for {
		b, ok := node.(*ast.BuiltinNode)
		if !ok || len(b.Arguments) == 0 || !slices.Contains([]string{"map", "filter", "sortBy", "sort"}, b.Name) {
			break
		}
		node = b.Arguments[0]
	}
	src := "len(" + node.String() + ")"
	if r, ok := node.(*ast.BinaryNode); ok && r.Operator == ".." {
		src = rangeLength(r)
	}
	if node == tree.Node && !onlyInputs(over.Src) || node != tree.Node && !onlyInputs(src) {
		w.unbounded("map items", fmt.Sprintf("`%s` reads %s, known only while running", oneLine(over.Src), strings.Join(roots(src), ", ")), "")
		return Unbounded(), nil
	}
	v, err := expr.Eval(src, map[string]any{"inputs": sc.inputs})
	count, ok := jsonvalue.Number(v)
	if items != nil {
		// The whole expression ran: its length is the count, whatever
		// functions of the DSL it calls.
		count, ok, err = float64(len(items)), true, nil
	}
	return Sym(src, count, err == nil && ok), items
}

// rangeLength is the length of a..b as an expression: b - a + 1, written
// plainly for 0..n - 1.
func rangeLength(r *ast.BinaryNode) string {
	l, ok := r.Left.(*ast.IntegerNode)
	if !ok || l.Value != 0 {
		return fmt.Sprintf("(%s) - (%s) + 1", r.Right, r.Left)
	}
	if m, ok := r.Right.(*ast.BinaryNode); ok && m.Operator == "-" {
		if one, ok := m.Right.(*ast.IntegerNode); ok && one.Value == 1 {
			return m.Left.String()
		}
	}
	return fmt.Sprintf("%s + 1", r.Right)
}

func onlyInputs(src string) bool {
	for _, r := range roots(src) {
		if r != "inputs" {
			return false
		}
	}
	return true
}

func oneLine(s string) string { return strings.Join(strings.Fields(s), " ") }
