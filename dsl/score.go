package dsl

import (
	"path/filepath"
	"slices"
	"strings"

	"github.com/expr-lang/expr"
	"github.com/expr-lang/expr/ast"
	"gopkg.in/yaml.v3"
)

// Score is a pipeline's score: section: the metrics a batch computes for
// each item whose run completed.
type Score struct {
	Metrics []*Metric // expression metrics, in file order
	// Judge is score: {pipeline: FILE}: a pipeline run per item with the
	// inputs item, outputs and run; each of its outputs is a metric,
	// after the expression metrics, except its text outputs: those are
	// its reasoning, kept with the item to say why it scored as it did.
	Judge    *Pipeline
	JudgePos Pos
}

// Names lists every metric in declaration order: the expressions, then
// the judge's outputs.
func (s *Score) Names() []string {
	if s == nil {
		return nil
	}
	var out []string
	for _, m := range s.Metrics {
		out = append(out, m.Name)
	}
	if s.Judge != nil {
		for _, o := range s.Judge.Outputs {
			if !Reasoning(o) {
				out = append(out, o.Name)
			}
		}
	}
	return out
}

// Reasoning says whether a judge's output is its reasoning (text) rather
// than a metric.
func Reasoning(o *Output) bool {
	return o.Type != nil && o.Type.Kind == TypeString
}

// ItemFields are the dataset fields the metric reads (item.NAME or
// item["NAME"]), in the order it first reads them: what a batch shows as
// an item's expected value.
func (m *Metric) ItemFields() []string {
	if m == nil || m.Value == nil || m.Value.expr == nil {
		return nil
	}
	v := &itemFields{}
	root := m.Value.expr.prog.Node()
	ast.Walk(&root, v)
	return v.names
}

type itemFields struct{ names []string }

func (v *itemFields) Visit(node *ast.Node) {
	if name, ok := field(*node, "item"); ok && !slices.Contains(v.names, name) {
		v.names = append(v.names, name)
	}
}

// Expectation is a metric's comparison of one of a run's outputs with a
// dataset field (outputs.X == item.Y, either way round): what the item
// was expected to give.
type Expectation struct {
	Output string `json:"output"`
	Item   string `json:"item"`
}

// Expectations are the comparisons outputs.X == item.Y the metric passes
// by: the whole expression, or one of the terms it joins with &&, so that
// each must hold for the metric to hold. A comparison under ||, !, or a
// function call is not one: the item may pass without it.
func (m *Metric) Expectations() []Expectation {
	if m == nil || m.Value == nil || m.Value.expr == nil {
		return nil
	}
	return expectations(m.Value.expr.prog.Node(), nil)
}

func expectations(n ast.Node, out []Expectation) []Expectation {
	b, ok := n.(*ast.BinaryNode)
	if !ok {
		return out
	}
	switch b.Operator {
	case "&&", "and":
		return expectations(b.Right, expectations(b.Left, out))
	case "==":
		if e, ok := expectation(b.Left, b.Right); ok {
			return append(out, e)
		}
		if e, ok := expectation(b.Right, b.Left); ok {
			return append(out, e)
		}
	}
	return out
}

func expectation(output, item ast.Node) (Expectation, bool) {
	o, ok1 := field(output, "outputs")
	i, ok2 := field(item, "item")
	return Expectation{Output: o, Item: i}, ok1 && ok2
}

// field is NAME when n reads root.NAME or root["NAME"].
func field(n ast.Node, root string) (string, bool) {
	m, ok := n.(*ast.MemberNode)
	if !ok {
		return "", false
	}
	id, isID := m.Node.(*ast.IdentifierNode)
	prop, isStr := m.Property.(*ast.StringNode)
	if !isID || id.Value != root || !isStr {
		return "", false
	}
	return prop.Value, true
}

// ReadsTrajectory says whether the metric may read its run's trajectory
// (route, iterations, tool calls, questions, turns): any use of run
// other than its cost, tokens, duration and status. A batch reads an
// item's events only when a metric does.
func (m *Metric) ReadsTrajectory() bool {
	if m == nil || m.Value == nil || m.Value.expr == nil {
		return false
	}
	v := &runReads{}
	root := m.Value.expr.prog.Node()
	ast.Walk(&root, v)
	return v.uses > v.plain
}

// runReads counts the uses of run, and those that read one of the
// figures every run has.
type runReads struct{ uses, plain int }

func (v *runReads) Visit(node *ast.Node) {
	switch n := (*node).(type) {
	case *ast.IdentifierNode:
		if n.Value == "run" {
			v.uses++
		}
	case *ast.MemberNode:
		id, isID := n.Node.(*ast.IdentifierNode)
		prop, isStr := n.Property.(*ast.StringNode)
		if isID && id.Value == "run" && isStr {
			switch prop.Value {
			case "cost_usd", "tokens", "duration_ms", "status":
				v.plain++
			}
		}
	}
}

// Metric is one named score: an expression over outputs, item and run.
type Metric struct {
	Name  string
	Pos   Pos
	Value *Value
	Type  *Type // boolean (a pass rate), a number (a mean), or any
	// Judge, for a judge metric ({judge: {rubric, model}}), is the
	// pipeline that judges an item: its outputs are JudgeVerdict (the
	// metric's value) and JudgeReasoning. Value is nil then.
	Judge *Pipeline
	// broken says the expression did not compile (and was reported).
	broken bool
}

// ScoreEnv is what a metric sees: the run's outputs, the dataset item (a
// row of fields) and what the run cost.
type ScoreEnv struct {
	Outputs map[string]any `expr:"outputs"`
	Item    map[string]any `expr:"item"`
	Run     ScoreRun       `expr:"run"`

	budget // of the evaluation running in this environment
}

// ScoreRun is run in a metric: what the run cost, and its trajectory,
// so that a metric can score the process as well as the outputs.
type ScoreRun struct {
	CostUSD    float64 `expr:"cost_usd"`
	Tokens     int     `expr:"tokens"`
	DurationMS float64 `expr:"duration_ms"`
	Status     string  `expr:"status"`

	// Route is the path of every node that started, in order
	// ("refine[2]/reason").
	Route []string `expr:"route"`
	// Iterations are, per loop node id, how many iterations it started (0
	// for one that never ran).
	Iterations map[string]int `expr:"iterations"`
	// ToolCalls are the tool calls agents made, in order.
	ToolCalls []ScoreToolCall `expr:"tool_calls"`
	// Questions are the asks and confirmations put to a person, with the
	// answers.
	Questions []ScoreQuestion `expr:"questions"`
	// Turns are, per node id, how many model turns it took (0 for none).
	Turns map[string]int `expr:"turns"`
}

// ScoreToolCall is one tool call of a run.
type ScoreToolCall struct {
	Node      string `expr:"node"`
	Tool      string `expr:"tool"`
	Arguments any    `expr:"arguments"`
	OK        bool   `expr:"ok"` // it returned without an error
}

// ScoreQuestion is one question a run put to a person.
type ScoreQuestion struct {
	Node     string `expr:"node"`
	Kind     string `expr:"kind"` // "ask" or "confirm"
	Question string `expr:"question"`
	Answer   any    `expr:"answer"`
}

// Eval computes the metric.
func (m *Metric) Eval(env *ScoreEnv) (any, error) {
	if e := m.Value.expr; e != nil {
		return e.run(env)
	}
	return m.Value.lit, nil
}

var (
	scoreNames     = []string{"outputs", "item", "run"}
	scoreRunFields = []string{"cost_usd", "duration_ms", "iterations", "questions", "route", "status", "tokens", "tool_calls", "turns"}
	toolCallType   = Object(map[string]*Type{"node": StringType, "tool": StringType, "arguments": AnyType, "ok": BoolType})
	questionType   = Object(map[string]*Type{"node": StringType, "kind": StringType, "question": StringType, "answer": AnyType})
)

// scoreRunType is run's type in p's metrics: iterations has a field per
// loop node and turns one per node, so that a misspelt id is an error at
// load.
func scoreRunType(p *Pipeline) *Type {
	loops, nodes := TrajectoryNodes(p)
	return Object(map[string]*Type{"cost_usd": FloatType, "tokens": IntType, "duration_ms": FloatType, "status": StringType,
		"route": ListOf(StringType), "iterations": countsType(loops), "turns": countsType(nodes),
		"tool_calls": ListOf(toolCallType), "questions": ListOf(questionType)})
}

func countsType(ids []string) *Type {
	fields := make(map[string]*Type, len(ids))
	for _, id := range ids {
		fields[id] = IntType
	}
	return Object(fields)
}

// TrajectoryNodes are the ids of p's loop nodes and of all its nodes
// (with those of the pipelines it calls), sorted: the keys of a metric's
// run.iterations and run.turns.
func TrajectoryNodes(p *Pipeline) (loops, nodes []string) {
	seen := map[string]bool{}
	Walk(p, func(_ *Pipeline, n *Node) {
		if seen[n.ID] {
			return
		}
		seen[n.ID] = true
		nodes = append(nodes, n.ID)
		if n.Loop() != nil {
			loops = append(loops, n.ID)
		}
	})
	slices.Sort(loops)
	slices.Sort(nodes)
	return loops, nodes
}

// judgeInputs are the inputs a judge pipeline may take.
var judgeInputs = []string{"item", "outputs", "run"}

func (f *file) scoreOptions() []expr.Option {
	return append([]expr.Option{expr.Env(ScoreEnv{})}, f.opts[1:]...)
}

func (f *file) decodeScore(n *yaml.Node) {
	if n == nil {
		return
	}
	s := &Score{}
	for _, kv := range pairs(n) {
		if kv[0].Value == "pipeline" {
			s.JudgePos = f.pos(kv[1])
			s.Judge = f.subPipeline(kv[1])
			continue
		}
		if valueOf(kv[1], "judge") != nil {
			s.Metrics = append(s.Metrics, f.judgeMetric(kv[0].Value, kv[1]))
			continue
		}
		s.Metrics = append(s.Metrics, f.metric(kv[0].Value, kv[1]))
	}
	f.p.Score = s
}

func (f *file) metric(name string, n *yaml.Node) *Metric {
	m := &Metric{Name: name, Pos: f.pos(n), Value: f.value(n, scope{score: true})}
	_, isString := str(n)
	m.broken = isString && m.Value.expr == nil && m.Value.tmpl == nil
	return m
}

// checkScore types the metrics, and checks that the judge takes what a
// batch gives it and that no two metrics share a name.
func (r *resolver) checkScore() {
	s := r.f.p.Score
	if s == nil {
		return
	}
	for _, m := range s.Metrics {
		r.checkMetric(m)
	}
	j := s.Judge
	if j == nil {
		return
	}
	for _, in := range j.Inputs {
		if !slices.Contains(judgeInputs, in.Name) && !in.HasDefault {
			r.f.l.errorf(s.JudgePos, "score: judge %s needs input %q, but a judge gets only item, outputs and run; give it a default or remove it", j.Path, in.Name)
		}
	}
	for _, o := range j.Outputs {
		for _, m := range s.Metrics {
			if m.Name == o.Name {
				r.f.l.errorf(m.Pos, "score: metric %q is also an output of the judge %s; rename one", m.Name, filepath.ToSlash(j.Path))
			}
		}
		if !metricType(o.Type) && !Reasoning(o) {
			r.f.l.errorf(s.JudgePos, "score: output %q of the judge %s is %s; a metric must be true/false, a number or a list of checks (or text: the judge's reasoning)", o.Name, j.Path, describeKind(o.Type))
		}
	}
}

func (r *resolver) checkMetric(m *Metric) {
	if m.broken || m.Judge != nil {
		return
	}
	m.Type = r.valueType(m.Value)
	if !metricType(m.Type) {
		r.f.l.errorf(m.Pos, "score: metric %q is %s; a metric must be true/false (a pass rate), a number (a mean) or a list of checks", m.Name, describeKind(m.Type))
	}
}

// metricType says whether a value of type t can be a metric: true/false,
// a number, or checks: a list of objects {pass, name, reason, score,
// weight}, or an object holding them as checks (with a threshold).
func metricType(t *Type) bool {
	return t == nil || t.Kind == TypeAny || t.Kind == TypeBool || t.numeric() || ChecksType(t)
}

// ChecksType says whether t is a metric's checks: a list of objects, or
// an object holding them as checks. Such a metric passes or fails.
func ChecksType(t *Type) bool {
	switch {
	case t == nil:
		return false
	case t.Kind == TypeList:
		return t.Elem == nil || t.Elem.Kind == TypeAny || t.Elem.Kind == TypeObject
	case t.Kind == TypeObject:
		checks, ok := t.Field("checks")
		return ok && (checks.Kind == TypeAny || checks.Kind == TypeList)
	}
	return false
}

// scoreRoot is the type of a name a metric reads, or nil.
func (r *resolver) scoreRoot(name string) *Type {
	switch name {
	case "outputs":
		fields := make(map[string]*Type, len(r.f.p.Outputs))
		for _, o := range r.f.p.Outputs {
			// Set once the pipeline has loaded (a --score metric).
			fields[o.Name] = o.Type
			if o.Type == nil {
				fields[o.Name] = r.valueType(o.Value)
			}
		}
		return Object(fields)
	case "item":
		return AnyType
	case "run":
		return scoreRunType(r.f.p)
	}
	return nil
}

// ParseMetric compiles a metric given on the command line (--score
// name=expr) and checks it against p's outputs like one in its score:.
// Diagnostics point into the expression itself.
func ParseMetric(p *Pipeline, name, src string) (*Metric, Diagnostics) {
	label := "--score " + name
	l := &loader{sources: map[string][]string{label: {src}}, loaded: map[string]*Pipeline{}, read: map[string]string{}}
	f := &file{l: l, name: label, dir: p.Dir, p: p, pendingOf: map[*Expr]*pendingExpr{}}
	f.opts = append([]expr.Option{expr.Env(Env{})}, p.functions.options(p.Dir, &p.Files)...)
	m := &Metric{Name: name, Pos: Pos{File: label, Line: 1, Col: 1}}
	if strings.TrimSpace(src) == "" {
		return nil, Diagnostics{{Pos: m.Pos, Message: "empty expression: write --score name=EXPR, e.g. --score exact='outputs.answer == item.expected'"}}
	}
	at := func(o int) Pos { return Pos{File: label, Line: 1, Col: len([]rune(src[:o])) + 1} }
	if e := f.compile(src, scope{score: true, maybeText: true}, false, at); e != nil {
		m.Value = &Value{expr: e, pos: m.Pos}
		r := &resolver{f: f, outputs: map[*Node]*Type{}, busy: map[*Node]bool{}}
		r.typeOf(f.pendingOf[e])
		r.checkMetric(m)
	}
	ds := l.diags.sorted()
	for i := range ds {
		ds[i].Line = l.sourceLine(ds[i].Pos)
	}
	if ds.HasErrors() {
		return nil, ds
	}
	return m, ds
}
