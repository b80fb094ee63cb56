package dsl

import (
	"errors"
	"fmt"
	"strings"
	"sync"

	exprfile "github.com/expr-lang/expr/file"
	"github.com/expr-lang/expr/vm"

	"github.com/flowrun/flowrun/jsonvalue"
)

// Env is the environment every expression and template is compiled against
// and evaluated in. The runtime fills one per scope.
type Env struct {
	Inputs map[string]any `expr:"inputs"`
	State  map[string]any `expr:"state"`
	Nodes  map[string]any `expr:"nodes"`
	Loop   LoopInfo       `expr:"loop"`
	Item   any            `expr:"item"`
	Index  int            `expr:"index"`
	Run    RunInfo        `expr:"run"`
	Env    map[string]any `expr:"env"`

	budget // of the evaluation running in this environment
}

// LoopInfo describes the innermost running loop.
type LoopInfo struct {
	Iteration int `expr:"iteration"` // 1-based
	Index     int `expr:"index"`     // 0-based
	Max       int `expr:"max"`
}

// RunInfo describes the run as a whole.
type RunInfo struct {
	ID      string  `expr:"id"`
	CostUSD float64 `expr:"cost_usd"`
	Tokens  int     `expr:"tokens"`
	Step    int     `expr:"step"`
}

// Expr is a compiled expr-lang expression with the position of its source.
type Expr struct {
	Src  string
	Pos  Pos
	prog *vm.Program
	// nodes are the ids of the nodes.<id> the expression reads, to name
	// the one that has no output when a read from null fails.
	nodes []string
}

// vms holds expr-lang virtual machines for reuse: expr.Run allocates a
// machine and its stack on every evaluation, and a run evaluates several
// expressions per node. A machine resets itself at the start of Run.
var vms = sync.Pool{New: func() any { return new(vm.VM) }}

// Eval runs the expression. Errors name the expression's file:line:col.
func (e *Expr) Eval(env *Env) (any, error) { return e.run(env) }

func (e *Expr) run(env any) (any, error) {
	v, err := runProgram(e.prog, env)
	if err != nil {
		if id := e.missingNode(env, err.Error()); id != "" {
			err = fmt.Errorf("nodes.%s is null because node %q has not run yet here (it runs later, or was skipped): %w", id, id, err)
		}
		return nil, fmt.Errorf("%s: evaluating `%s`: %w", e.Pos, oneLine(e.Src), err)
	}
	return v, nil
}

// runProgram evaluates a compiled program within ExpressionBudget.
func runProgram(prog *vm.Program, env any) (any, error) {
	if b := budgetOf(env); b != nil {
		b.spent = 0
	}
	m := vms.Get().(*vm.VM)
	m.MemoryBudget = ExpressionBudget
	v, err := m.Run(prog, env)
	// Drop what the machine still references, so that a pooled machine
	// keeps no value alive.
	clear(m.Stack[:cap(m.Stack)])
	clear(m.Variables)
	vms.Put(m)
	if err != nil {
		// expr-lang's message carries a snippet of the expression alone;
		// the YAML position says more.
		var fe *exprfile.Error
		if errors.As(err, &fe) {
			if le := limitError(fe.Unwrap(), fe.Message); le != nil {
				return nil, le
			}
			err = errors.New(fe.Message)
		}
		return nil, err
	}
	return v, nil
}

// missingNode names the node whose output is null when a read from null
// failed, or "".
func (e *Expr) missingNode(env any, msg string) string {
	en, ok := env.(*Env)
	if !ok || en == nil || !strings.HasSuffix(msg, "from <nil>") {
		return ""
	}
	for _, id := range e.nodes {
		if en.Nodes[id] == nil {
			return id
		}
	}
	return ""
}

// EvalBool runs a condition. A non-boolean result is an error: strings are
// never coerced to booleans.
func (e *Expr) EvalBool(env *Env) (bool, error) {
	v, err := e.Eval(env)
	if err != nil {
		return false, err
	}
	b, ok := v.(bool)
	if !ok {
		return false, fmt.Errorf("%s: `%s` must be true or false, got %s", e.Pos, e.Src, jsonvalue.Describe(v))
	}
	return b, nil
}

// Template is a string that interpolates ${{ expr }}.
type Template struct {
	parts []templatePart
}

type templatePart struct {
	text string
	expr *Expr
}

// Exprs are the expressions the template interpolates, in order: what
// it reads, for a reader that bounds its size without running it.
func (t *Template) Exprs() []*Expr {
	var out []*Expr
	for _, p := range t.parts {
		if p.expr != nil {
			out = append(out, p.expr)
		}
	}
	return out
}

// Render interpolates the template. Strings are inserted as they are, null
// as nothing, and lists and maps as JSON.
func (t *Template) Render(env *Env) (string, error) {
	if len(t.parts) == 1 && t.parts[0].expr == nil {
		return t.parts[0].text, nil
	}
	var b strings.Builder
	for _, p := range t.parts {
		if p.expr == nil {
			b.WriteString(p.text)
			continue
		}
		v, err := p.expr.Eval(env)
		if err != nil {
			return "", err
		}
		b.WriteString(Stringify(v))
	}
	return b.String(), nil
}

// Stringify formats a value the way templates insert it: the text of a
// JSON value (jsonvalue.Text), so that a domain package below dsl writes
// values as templates do.
var Stringify = jsonvalue.Text

// Value is a value field: a bare expression, a template, a literal, or a
// list or map of values. Strings in data fields (call inputs, tool and code
// args) are templates, and a string that is exactly one ${{ expr }} keeps
// the expression's type.
type Value struct {
	pos  Pos // where the value is written
	expr *Expr
	tmpl *Template
	lit  any
	list []*Value
	obj  []*Field
}

// Exprs are the expressions the value evaluates, those of its templates,
// lists and maps included.
func (v *Value) Exprs() []*Expr {
	switch {
	case v == nil:
		return nil
	case v.expr != nil:
		return []*Expr{v.expr}
	case v.tmpl != nil:
		return v.tmpl.Exprs()
	}
	var out []*Expr
	for _, e := range v.list {
		out = append(out, e.Exprs()...)
	}
	for _, f := range v.obj {
		out = append(out, f.Value.Exprs()...)
	}
	return out
}

// Eval computes the value.
func (v *Value) Eval(env *Env) (any, error) {
	switch {
	case v == nil:
		return nil, nil
	case v.expr != nil:
		return v.expr.Eval(env)
	case v.tmpl != nil:
		return v.tmpl.Render(env)
	case v.list != nil:
		out := make([]any, len(v.list))
		for i, e := range v.list {
			x, err := e.Eval(env)
			if err != nil {
				return nil, err
			}
			out[i] = x
		}
		return out, nil
	case v.obj != nil:
		out := make(map[string]any, len(v.obj))
		for _, f := range v.obj {
			x, err := f.Value.Eval(env)
			if err != nil {
				return nil, err
			}
			out[f.Name] = x
		}
		return out, nil
	}
	return v.lit, nil
}
