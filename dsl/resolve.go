package dsl

import (
	"context"
	"errors"
	"fmt"
	"reflect"
	"strconv"
	"strings"

	"github.com/expr-lang/expr"
	"github.com/expr-lang/expr/ast"
	exprfile "github.com/expr-lang/expr/file"
	"github.com/expr-lang/expr/types"
)

// The resolve phase runs once a file has decoded cleanly: every node's
// output type is known (or computed on demand), and every expression is
// checked against the types of the names it reads. Expressions were
// compiled for the runtime during decode; this phase only reports.

// pendingExpr is an expression waiting for the resolve phase.
type pendingExpr struct {
	src    string
	tree   *ast.Node
	sc     scope
	asBool bool
	at     func(int) Pos
	// typ is the expression's type once resolved; resolving marks a
	// type being computed, so that a cycle reads as any.
	typ       *Type
	resolving bool
}

// placement is where a node sits in the file.
type placement struct {
	parent *Node  // the loop, map or parallel node whose body holds it; nil at the top
	branch string // the parallel branch holding it
	index  int    // position in its block
	block  Block  // the block holding it
}

// resolver holds the types of one file's names.
type resolver struct {
	f       *file
	place   map[*Node]placement
	byID    map[string]*Node
	outputs map[*Node]*Type
	busy    map[*Node]bool
	inputs  *Type
	state   *Type
	run     *Type
	env     *Type
	loop    *Type
}

func (f *file) resolve() {
	r := &resolver{f: f, place: map[*Node]placement{}, byID: map[string]*Node{},
		outputs: map[*Node]*Type{}, busy: map[*Node]bool{}}
	r.placeBlock(f.p.Nodes, nil, "")
	inputs := map[string]*Type{}
	for _, in := range f.p.Inputs {
		inputs[in.Name] = TypeFromSchema(in.Schema)
	}
	r.inputs = Object(inputs)
	state := map[string]*Type{}
	for _, sv := range f.p.State {
		state[sv.Name] = sv.Type
	}
	r.state = Object(state)
	r.run = Object(map[string]*Type{"id": StringType, "cost_usd": FloatType, "tokens": IntType, "step": IntType})
	env := map[string]*Type{}
	for _, name := range f.p.Env {
		env[name] = StringType
	}
	r.env = Object(env)
	r.loop = Object(map[string]*Type{"iteration": IntType, "index": IntType, "max": IntType})
	for _, pe := range f.pending {
		r.typeOf(pe)
	}
	for _, o := range f.p.Outputs {
		o.Type = r.valueType(o.Value)
	}
	r.checkTools()
	r.checkBlock(f.p.Nodes)
	r.checkScore()
}

// checkTools checks that a pipeline tool's parameters are the inputs its
// pipeline takes, with types it accepts.
func (r *resolver) checkTools() {
	for _, name := range keysOf(r.f.p.Tools) {
		t := r.f.p.Tools[name]
		if t.Pipeline == nil {
			continue
		}
		props, _ := t.Parameters["properties"].(map[string]any)
		inputs := map[string]*Input{}
		for _, in := range t.Pipeline.Inputs {
			inputs[in.Name] = in
		}
		for _, param := range keysOf(props) {
			in := inputs[param]
			if in == nil {
				r.f.l.errorf(t.Pos, "tool %q: parameter %q is not an input of %s%s; the tool's arguments are the pipeline's inputs", name, param, t.Pipeline.Path, Suggest(param, keysOf(inputs)))
				continue
			}
			schema, _ := props[param].(map[string]any)
			if want, got := TypeFromSchema(in.Schema), TypeFromSchema(schema); !want.Accepts(got) {
				r.f.l.errorf(t.Pos, "tool %q: parameter %q is %s, but input %q of %s is %s", name, param, got, param, t.Pipeline.Path, want)
			}
		}
		for _, in := range t.Pipeline.Inputs {
			if _, ok := props[in.Name]; !ok && !in.HasDefault {
				r.f.l.errorf(t.Pos, "tool %q: %s needs input %q; add it to the tool's parameters", name, t.Pipeline.Path, in.Name)
			}
		}
	}
}

// checkBlock checks what crosses into other files: the inputs a call
// passes and the arguments a tool node gives.
func (r *resolver) checkBlock(b Block) {
	for _, n := range b {
		label := fmt.Sprintf("node %q", n.ID)
		for _, a := range assigns(n) {
			r.checkAssign(label, a)
		}
		r.checkWrites(n)
		if l := n.Loop(); l != nil && l.MaxExpr != nil {
			if t := r.exprType(l.MaxExpr); t.Kind != TypeAny && t.Kind != TypeInt {
				r.f.l.errorf(l.MaxExpr.Pos, "%s: max_iterations must be an integer, but this is %s", label, describeKind(t))
			}
		}
		switch {
		case n.Call() != nil && n.Call().Pipeline != nil:
			for _, fl := range n.Call().Inputs {
				for _, in := range n.Call().Pipeline.Inputs {
					if in.Name != fl.Name {
						continue
					}
					if want, got := TypeFromSchema(in.Schema), r.valueType(fl.Value); !want.Accepts(got) {
						r.f.l.errorf(fl.Value.pos, "%s: input %q of %s takes %s, but this is %s", label, fl.Name, n.Call().Path, want, got)
					}
				}
			}
		case n.Tool() != nil && n.Tool().Args != nil:
			if t := r.f.p.Tools[n.Tool().Name]; t != nil && t.Parameters != nil {
				want, got := TypeFromSchema(t.Parameters), r.valueType(n.Tool().Args)
				r.checkArgs(label, n.Tool().Name, n.Tool().Args, want, got)
			}
			if t := r.f.p.MCPTool(n.Tool().Name); t != nil && t.InputSchema != nil {
				want, got := TypeFromSchema(t.InputSchema), r.valueType(n.Tool().Args)
				r.checkArgs(label, n.Tool().Name, n.Tool().Args, want, got)
			}
		}
		for _, c := range Bodies(n) {
			r.checkBlock(c.Body)
		}
	}
}

// checkArgs checks a tool node's arguments field by field, so that the
// message points at the argument that is wrong.
func (r *resolver) checkArgs(label, tool string, args *Value, want, got *Type) {
	if args.obj == nil || want.Kind != TypeObject {
		if !want.Accepts(got) {
			r.f.l.errorf(args.pos, "%s: tool %q takes %s, but args is %s", label, tool, want, got)
		}
		return
	}
	for _, fl := range args.obj {
		ft, ok := want.Field(fl.Name)
		if !ok {
			r.f.l.errorf(fl.Value.pos, "%s: tool %q has no parameter %q%s", label, tool, fl.Name, Suggest(fl.Name, want.FieldNames()))
			continue
		}
		if vt := r.valueType(fl.Value); !ft.Accepts(vt) {
			r.f.l.errorf(fl.Value.pos, "%s: parameter %q of tool %q is %s, but this is %s", label, fl.Name, tool, ft, vt)
		}
	}
}

func (r *resolver) placeBlock(b Block, parent *Node, branch string) {
	for i, n := range b {
		r.place[n] = placement{parent: parent, branch: branch, index: i, block: b}
		r.byID[n.ID] = n
		for _, child := range Bodies(n) {
			r.placeBlock(child.Body, n, child.Name)
		}
	}
}

// typeOf checks an expression, once, and returns its type.
func (r *resolver) typeOf(pe *pendingExpr) *Type {
	switch {
	case pe.typ != nil:
		return pe.typ
	case pe.resolving:
		return AnyType
	}
	pe.resolving = true
	defer func() { pe.resolving = false }()
	pe.typ = AnyType
	if pe.tree == nil {
		return pe.typ
	}
	v := &typeVisitor{r: r, pe: pe, types: map[ast.Node]*Type{}}
	ast.Walk(pe.tree, v)
	if pe.asBool {
		v.checkNotNull(*pe.tree, "a condition")
	}
	if v.failed {
		return pe.typ
	}
	env := types.Map{}
	names := envNames
	if pe.sc.score {
		names = scoreNames
	}
	for _, name := range names {
		env[name] = types.Any
	}
	for name, t := range v.roots {
		env[name] = t.exprType()
	}
	if v.nodes != nil {
		env["nodes"] = OpenObject(v.nodes, nil).exprType()
	}
	opts := append([]expr.Option{expr.Env(env)}, r.f.opts[1:]...)
	prog, err := expr.Compile(pe.src, opts...)
	if err != nil {
		var fe *exprfile.Error
		if errors.As(err, &fe) {
			r.f.l.errorf(pe.at(runeOffset(pe.src, fe.From)), "in `%s`: %s", oneLine(pe.src), typeMessage(fe.Message))
		}
		return pe.typ
	}
	if t, ok := v.types[*pe.tree]; ok {
		pe.typ = t
	} else {
		pe.typ = typeOfReflect(prog.Node().Type())
	}
	if pe.asBool && pe.typ.Kind != TypeAny && pe.typ.Kind != TypeBool {
		r.f.l.errorf(pe.at(0), "in `%s`: a condition must be true or false, but this is %s", oneLine(pe.src), describeKind(pe.typ))
	}
	return pe.typ
}

// typeMessage rewords expr-lang's type errors for pipeline authors.
func typeMessage(msg string) string {
	if strings.HasPrefix(msg, "invalid operation: + (mismatched types") && strings.Contains(msg, "[]") {
		return msg + ": to add to a list, write concat(list, [x])"
	}
	if strings.HasPrefix(msg, "invalid operation: + (mismatched types") && strings.Contains(msg, "string") {
		return msg + ": to join text and a number, write string(x)"
	}
	return msg
}

func typeOfReflect(t reflect.Type) *Type {
	if t == nil {
		return AnyType
	}
	switch t.Kind() {
	case reflect.Bool:
		return BoolType
	case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64,
		reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64:
		return IntType
	case reflect.Float32, reflect.Float64:
		return FloatType
	case reflect.String:
		return StringType
	case reflect.Slice, reflect.Array:
		return ListOf(typeOfReflect(t.Elem()))
	case reflect.Map:
		return OpenObject(nil, nil)
	}
	return AnyType
}

// valueType is the type of a value field.
func (r *resolver) valueType(v *Value) *Type {
	switch {
	case v == nil:
		return NullType
	case v.expr != nil:
		return r.exprType(v.expr)
	case v.tmpl != nil:
		return StringType
	case v.list != nil:
		var elem *Type
		for _, e := range v.list {
			elem = Join(elem, r.valueType(e))
		}
		if elem == nil {
			elem = AnyType
		}
		return ListOf(elem)
	case v.obj != nil:
		fields := make(map[string]*Type, len(v.obj))
		for _, fl := range v.obj {
			fields[fl.Name] = r.valueType(fl.Value)
		}
		return Object(fields)
	}
	return TypeOfValue(v.lit)
}

func (r *resolver) exprType(e *Expr) *Type {
	if e == nil {
		return AnyType
	}
	if pe := r.f.pendingOf[e]; pe != nil {
		return r.typeOf(pe)
	}
	return AnyType
}

// output is the type of nodes.<id> for node n.
func (r *resolver) output(n *Node) *Type {
	if t, ok := r.outputs[n]; ok {
		return t
	}
	if r.busy[n] {
		return AnyType
	}
	r.busy[n] = true
	t := outputType(r, n)
	if n.OnError.Handled() {
		// A failure that on_error handles leaves {error: ...} as the output.
		t = Join(t, handledFailure)
	}
	delete(r.busy, n)
	r.outputs[n] = t
	return t
}

// handledFailure is a node's output after a failure on_error handled.
var handledFailure = Object(map[string]*Type{"error": Object(map[string]*Type{"class": StringType, "message": StringType, "path": StringType})})

// lastOutput is the type of a block's last output: the output of whichever
// of its nodes finished last.
func (r *resolver) lastOutput(b Block) *Type {
	var t *Type
	for _, n := range b {
		t = Join(t, r.output(n))
	}
	if t == nil {
		return NullType
	}
	return t
}

// ancestors lists n and the nodes whose bodies hold it, innermost first.
func (r *resolver) ancestors(n *Node) []*Node {
	var out []*Node
	for ; n != nil; n = r.place[n].parent {
		out = append(out, n)
	}
	return out
}

// absence says why a node's output may be null where it is read: the
// node may not have run there.
type absence struct {
	why  string // node "x" runs later in the loop body than this
	when string // when it is null: in the first iteration
}

// readable says why node `from` cannot read nodes.<target>, or "". When
// it can, a non-nil absence says that target may not have run when
// `from` does: it runs later in an enclosing loop's body (or is `from`
// itself), so its output is null in the first iteration, or a branch or
// a next: can take the run past it. With from nil, the read is the
// pipeline's outputs, after its last node.
func (r *resolver) readable(from, target *Node, afterRun bool) (string, *absence) {
	// Nodes in a map body exist per item: only the same item sees them.
	for _, a := range r.ancestors(target)[1:] {
		if a.Kind != KindMap {
			continue
		}
		inside := false
		for _, b := range r.ancestors(from) {
			if b == a {
				inside = true
			}
		}
		if !inside {
			return fmt.Sprintf("node %q runs once per item of map %q: read the items' results as nodes.%s", target.ID, a.ID, a.ID), nil
		}
	}
	targetChain := r.ancestors(target)
	if from == nil {
		top := targetChain[len(targetChain)-1]
		return "", r.skipped(target, top, len(r.place[top].block))
	}
	if from == target {
		if afterRun {
			return "", nil
		}
		if r.inLoopAbove(target) {
			return "", &absence{fmt.Sprintf("this reads node %q's output from the previous iteration", target.ID), "in the first iteration"}
		}
		return fmt.Sprintf("node %q reads its own output, which exists only once it has run: read it in the node's set:", target.ID), nil
	}
	later := &absence{fmt.Sprintf("node %q runs later in the loop body than this", target.ID), "in the first iteration"}
	fromChain := r.ancestors(from)
	for _, t := range targetChain {
		for _, f := range fromChain {
			pt, pf := r.place[t], r.place[f]
			if t == f {
				// target holds from in its body: it has not finished yet.
				if t == target {
					if r.inLoopAbove(t) {
						return "", nil
					}
					return fmt.Sprintf("node %q is still running here: its output exists once its body has finished", target.ID), nil
				}
				return "", nil
			}
			if pt.parent != pf.parent {
				continue
			}
			if pt.parent != nil && pt.parent.Kind == KindParallel && pt.branch != pf.branch {
				return fmt.Sprintf("node %q runs in parallel branch %q of %q, and branches cannot see each other's nodes", target.ID, pt.branch, pt.parent.ID), nil
			}
			if pt.index > pf.index {
				if r.inLoopAbove(t) {
					return "", later
				}
				return fmt.Sprintf("node %q runs later than this, so its output does not exist yet", target.ID), nil
			}
			return "", r.skipped(target, t, pf.index)
		}
	}
	return "", nil
}

// skipped says how a run can reach index upTo of t's block (a later
// sibling, or the block's end) without running t, which holds target
// (or is it): a branch case, a default or a next: that jumps past it.
// It is nil when t runs on every path there.
func (r *resolver) skipped(target, t *Node, upTo int) *absence {
	pt := r.place[t]
	b := pt.block
	reached := make([]bool, len(b)+1) // len(b): past the block's last node
	reached[0] = true
	past := -1
	for k := 0; k < upTo; k++ {
		if !reached[k] || k == pt.index {
			continue
		}
		for _, to := range successors(b, k) {
			if to <= k || reached[to] {
				continue
			}
			reached[to] = true
			if k < pt.index && to > pt.index && past < 0 {
				past = k
			}
		}
	}
	if upTo == pt.index || !reached[upTo] || past < 0 {
		return nil
	}
	jump := fmt.Sprintf("node %q's next: jumps past it", b[past].ID)
	if b[past].Kind == KindBranch {
		jump = fmt.Sprintf("branch %q can jump past it", b[past].ID)
	}
	return &absence{fmt.Sprintf("node %q may not run before this: %s", target.ID, jump), "when it is skipped"}
}

// successors are the indexes of block b a run can go to from node k: a
// next: or branch target (end, break and continue leave the block, at
// len(b)), or the node after it.
func successors(b Block, k int) []int {
	index := func(name string) int {
		switch name {
		case "end", "break", "continue":
			return len(b)
		}
		for i, n := range b {
			if n.ID == name {
				return i
			}
		}
		return -1
	}
	n := b[k]
	if n.Next != "" {
		return []int{index(n.Next)}
	}
	br := n.Branch()
	if br == nil {
		return []int{k + 1}
	}
	var out []int
	for _, c := range br.Cases {
		out = append(out, index(c.Next))
	}
	if br.Default != "" {
		return append(out, index(br.Default))
	}
	return append(out, k+1)
}

// inLoopAbove reports whether a loop body holds n, so that a later
// sibling's output may come from an earlier iteration.
func (r *resolver) inLoopAbove(n *Node) bool {
	for p := r.place[n].parent; p != nil; p = r.place[p].parent {
		if p.Kind == KindLoop {
			return true
		}
	}
	return false
}

// typeVisitor types the member chains of one expression (inputs.x,
// state.y, nodes.z.text, ...) and reports the first name that does not
// exist on each, with the names that do.
type typeVisitor struct {
	r     *resolver
	pe    *pendingExpr
	types map[ast.Node]*Type
	roots map[string]*Type
	nodes map[string]*Type // the nodes.<id> read, with their types
	// notYet holds the nodes.<id> reads whose node may not have run yet:
	// their type is the node's output or null, so a field read from them
	// without ?. is an error. null holds them too, with every value read
	// from them through ?.: null in the first iteration, so an operator
	// that fails on null may not take them without ?? first.
	notYet map[ast.Node]string
	null   map[ast.Node]string
	absent map[string]*absence // by node id: why the node may not have run
	failed bool
}

func (v *typeVisitor) root(name string) *Type {
	sc, r := v.pe.sc, v.r
	if sc.score {
		return r.scoreRoot(name)
	}
	switch name {
	case "inputs":
		if sc.tool != nil {
			return TypeFromSchema(sc.tool.Parameters)
		}
		return r.inputs
	case "state":
		return r.state
	case "nodes":
		return OpenObject(nil, nil) // each nodes.<id> is resolved on its own
	case "loop":
		return r.loop
	case "item":
		if sc.mapNode != nil && sc.mapNode.Map() != nil {
			if over := r.exprType(sc.mapNode.Map().Over); over.Kind == TypeList {
				return over.Elem
			}
		}
		return AnyType
	case "index":
		return IntType
	case "run":
		return r.run
	case "env":
		return r.env
	}
	return nil
}

func (v *typeVisitor) Visit(node *ast.Node) {
	switch n := (*node).(type) {
	case *ast.CallNode:
		v.checkFileArg(n)
	case *ast.IdentifierNode:
		if t := v.root(n.Value); t != nil {
			v.types[n] = t
			if n.Value != "nodes" {
				if v.roots == nil {
					v.roots = map[string]*Type{}
				}
				v.roots[n.Value] = t
			}
		}
	case *ast.ChainNode:
		if t, ok := v.types[n.Node]; ok {
			v.types[n] = t
		}
		v.markNull(n, n.Node)
	case *ast.BinaryNode:
		if failsOnNull[n.Operator] {
			v.checkNotNull(n.Left, "`"+n.Operator+"`")
			v.checkNotNull(n.Right, "`"+n.Operator+"`")
		}
	case *ast.UnaryNode:
		v.checkNotNull(n.Node, "`"+n.Operator+"`")
	case *ast.BuiltinNode:
		if !nullSafeBuiltins[n.Name] {
			for _, arg := range n.Arguments {
				v.checkNotNull(arg, "`"+n.Name+"()`")
			}
		}
		v.checkPredicate(n)
	case *ast.ConditionalNode:
		v.checkNotNull(n.Cond, "a condition")
	case *ast.MemberNode:
		if id, ok := v.null[n.Node]; ok && !n.Optional {
			// Inside one chain, a member after ?. is skipped when the
			// value is null; a read straight from nodes.<id>, or from a
			// chain already closed by parentheses, is not.
			if _, direct := v.notYet[n.Node]; direct {
				v.failNotYet(n, id)
				return
			}
			if _, closed := n.Node.(*ast.ChainNode); closed {
				text, index := chainText(n.Node), indexText(n.Property)
				a := v.absent[id]
				v.fail(n, fmt.Sprintf("%s is null %s (%s), and indexing it with %s fails; write %s?.%s ?? <a default>",
					text, a.when, a.why, index, text, index))
				return
			}
		}
		v.markNull(n, n.Node)
		base, ok := v.types[n.Node]
		if !ok {
			return
		}
		prop, isStr := n.Property.(*ast.StringNode)
		if id, isID := n.Node.(*ast.IdentifierNode); isID && id.Value == "nodes" && isStr {
			t, notYet := v.nodeOutput(prop)
			if notYet {
				if v.notYet == nil {
					v.notYet = map[ast.Node]string{}
				}
				v.notYet[n] = prop.Value
				v.markNull(n, nil)
			}
			if v.nodes == nil {
				v.nodes = map[string]*Type{}
			}
			v.nodes[prop.Value], v.types[n] = t, t
			return
		}
		switch {
		case base.Kind == TypeAny:
			v.types[n] = AnyType
		case base.Kind == TypeList:
			if !isStr {
				v.types[n] = base.Elem
			}
		case base.Kind == TypeObject && isStr:
			t, ok := base.Field(prop.Value)
			if !ok {
				v.fail(prop, v.noField(n.Node, base, prop.Value))
				return
			}
			v.types[n] = t
		case base.Kind == TypeObject:
			v.types[n] = AnyType
		}
	}
}

// checkPredicate checks the fields a predicate reads from the elements of
// the list it runs over (.tool in any(run.tool_calls, .tool == "x")):
// the walk reaches the builtin after its arguments, so the list's type is
// known by then. Reads inside a nested predicate are that one's.
func (v *typeVisitor) checkPredicate(n *ast.BuiltinNode) {
	if len(n.Arguments) < 2 {
		return
	}
	cl, isClosure := n.Arguments[1].(*ast.PredicateNode)
	list := v.types[n.Arguments[0]]
	if !isClosure || list == nil || list.Kind != TypeList || list.Elem == nil || list.Elem.Kind != TypeObject {
		return
	}
	reads := &elementReads{inner: map[ast.Node]bool{}}
	ast.Walk(&cl.Node, reads)
	for _, m := range reads.members {
		prop := m.Property.(*ast.StringNode)
		if reads.inner[m] {
			continue
		}
		if _, ok := list.Elem.Field(prop.Value); !ok {
			v.fail(prop, fmt.Sprintf("the elements of %s have no field %q%s; their fields are %s",
				chainText(n.Arguments[0]), prop.Value, Suggest(prop.Value, list.Elem.FieldNames()), fieldList(list.Elem)))
			return
		}
	}
}

// elementReads collects a predicate's reads of its element's fields
// (.name), and marks those inside nested predicates as inner.
type elementReads struct {
	members []*ast.MemberNode
	inner   map[ast.Node]bool
}

func (e *elementReads) Visit(node *ast.Node) {
	switch n := (*node).(type) {
	case *ast.MemberNode:
		if p, ok := n.Node.(*ast.PointerNode); ok && p.Name == "" {
			if _, isStr := n.Property.(*ast.StringNode); isStr {
				e.members = append(e.members, n)
			}
		}
	case *ast.PredicateNode:
		nested := &elementReads{inner: e.inner}
		ast.Walk(&n.Node, nested)
		for _, m := range nested.members {
			e.inner[m] = true
		}
	}
}

// nodeOutput is the type of nodes.<id>, and whether the node may not have
// run yet where it is read.
func (v *typeVisitor) nodeOutput(prop *ast.StringNode) (*Type, bool) {
	id := prop.Value
	target := v.r.byID[id]
	if target == nil {
		v.fail(prop, fmt.Sprintf("no node with id %q%s", id, Suggest(id, v.r.f.idSet)))
		return AnyType, false
	}
	if v.pe.sc.tool != nil {
		return v.r.output(target), false
	}
	why, absent := v.r.readable(v.pe.sc.node, target, v.pe.sc.afterRun)
	if why != "" {
		v.fail(prop, why)
		return AnyType, false
	}
	if absent != nil {
		if v.absent == nil {
			v.absent = map[string]*absence{}
		}
		v.absent[id] = absent
	}
	return v.r.output(target), absent != nil
}

// failsOnNull are the operators that fail at run time when an operand is
// null (== and != compare it, ?? replaces it).
var failsOnNull = map[string]bool{
	"+": true, "-": true, "*": true, "/": true, "%": true, "^": true, "**": true,
	"<": true, ">": true, "<=": true, ">=": true, "&&": true, "||": true, "and": true, "or": true,
	"matches": true, "startsWith": true, "endsWith": true, "..": true,
}

// nullSafeBuiltins are expr-lang's built-in functions that take a null
// argument; the others fail on it (len, upper, filter, keys, ...), most with
// a message about Go's reflection rather than the value.
var nullSafeBuiltins = map[string]bool{"string": true, "toJSON": true, "type": true, "get": true}

// markNull records that n is null in the first iteration when from is
// (or, with from nil, that n is a nodes.<id> read that may not have run).
func (v *typeVisitor) markNull(n, from ast.Node) {
	id, ok := v.null[from]
	if from == nil {
		id, ok = v.notYet[n], true
	}
	if !ok {
		return
	}
	if v.null == nil {
		v.null = map[ast.Node]string{}
	}
	v.null[n] = id
}

// checkNotNull reports an operand that is null in the first iteration
// where what (an operator, or a condition) fails on null.
func (v *typeVisitor) checkNotNull(operand ast.Node, what string) {
	id, ok := v.null[operand]
	if !ok {
		return
	}
	text, a := chainText(operand), v.absent[id]
	v.fail(operand, fmt.Sprintf("%s is null %s (%s), and %s fails on null; write (%s ?? <a default>)",
		text, a.when, a.why, what, text))
}

// failNotYet reports a field read without ?. from the output of a node
// that may not have run yet: that output is possibly null, and reading a
// field of null fails the run.
func (v *typeVisitor) failNotYet(n *ast.MemberNode, id string) {
	field := "[...]"
	if s, ok := n.Property.(*ast.StringNode); ok {
		field = s.Value
	}
	a := v.absent[id]
	v.fail(n, fmt.Sprintf("nodes.%s may be null here: %s, so it is null %s and reading .%s from it fails; write nodes.%s?.%s ?? <a default>",
		id, a.why, a.when, field, id, field))
}

func (v *typeVisitor) fail(at ast.Node, msg string) {
	v.failed = true
	v.r.f.l.errorf(v.pe.at(runeOffset(v.pe.src, at.Location().From)), "in `%s`: %s", oneLine(v.pe.src), msg)
}

// checkFileArg checks that read_file("x") and render("x", ...) with a
// literal name read a file that exists, before the run needs it.
func (v *typeVisitor) checkFileArg(n *ast.CallNode) {
	fn, ok := n.Callee.(*ast.IdentifierNode)
	if !ok || (fn.Value != "read_file" && fn.Value != "render") || len(n.Arguments) == 0 {
		return
	}
	name, ok := n.Arguments[0].(*ast.StringNode)
	if !ok {
		return
	}
	src, err := v.r.f.p.Files.ReadFile(context.Background(), name.Value)
	if err != nil {
		v.fail(name, fmt.Sprintf("%s %q: %s", fn.Value, name.Value, v.r.f.fileProblem(name.Value, err)))
		return
	}
	v.r.f.recordFile(name.Value, src)
}

// noField says that base has no field name, in the words of what base is.
func (v *typeVisitor) noField(at ast.Node, base *Type, name string) string {
	hint := Suggest(name, base.FieldNames())
	if id, ok := at.(*ast.IdentifierNode); ok {
		switch {
		case id.Value == "inputs" && v.pe.sc.tool != nil:
			return fmt.Sprintf("tool %q has no parameter %q%s; declare it under the tool's parameters.properties", v.pe.sc.tool.Name, name, hint)
		case id.Value == "inputs":
			return fmt.Sprintf("no input %q%s; declare it under inputs:", name, hint)
		case id.Value == "state":
			return fmt.Sprintf("no state variable %q%s; declare it under state:", name, hint)
		case id.Value == "env":
			return fmt.Sprintf("env.%s is not declared; list %s under env: to use it", name, name)
		}
	}
	return fmt.Sprintf("%s has no field %q%s; its fields are %s", chainText(at), name, hint, fieldList(base))
}

// indexText writes an index back as source, for messages.
func indexText(n ast.Node) string {
	switch x := n.(type) {
	case *ast.StringNode:
		return "[" + strconv.Quote(x.Value) + "]"
	case *ast.IntegerNode:
		return "[" + strconv.Itoa(x.Value) + "]"
	}
	return "[...]"
}

// chainText writes a member chain back as source, for messages.
func chainText(n ast.Node) string {
	switch x := n.(type) {
	case *ast.IdentifierNode:
		return x.Value
	case *ast.ChainNode:
		return chainText(x.Node)
	case *ast.MemberNode:
		if s, ok := x.Property.(*ast.StringNode); ok && x.Optional {
			return chainText(x.Node) + "?." + s.Value
		} else if ok {
			return chainText(x.Node) + "." + s.Value
		}
		if x.Optional {
			return chainText(x.Node) + "?.[...]"
		}
		return chainText(x.Node) + "[...]"
	}
	return "the value"
}

func fieldList(t *Type) string {
	if len(t.Fields) == 0 {
		return "no fields"
	}
	names := t.FieldNames()
	if len(names) > 8 {
		names = append(names[:8], "...")
	}
	return strings.Join(names, ", ")
}

// assigns lists the set: entries of a node and of its branch cases.
func assigns(n *Node) []*Assign {
	out := n.Set
	if n.Branch() != nil {
		for _, c := range n.Branch().Cases {
			out = append(out[:len(out):len(out)], c.Set...)
		}
	}
	return out
}

// writes lists the state writes made inside a block, nested bodies too.
func writes(b Block) []*Assign {
	var out []*Assign
	for _, n := range b {
		out = append(out, assigns(n)...)
		for _, c := range Bodies(n) {
			out = append(out, writes(c.Body)...)
		}
	}
	return out
}

func (r *resolver) stateVar(key string) *StateVar {
	for i := range r.f.p.State {
		if r.f.p.State[i].Name == key {
			return &r.f.p.State[i]
		}
	}
	return nil
}

// checkAssign checks that a set: gives a value the variable can hold.
func (r *resolver) checkAssign(label string, a *Assign) {
	sv := r.stateVar(a.Key)
	if sv == nil {
		return // reported by decode
	}
	want, got := sv.Merge.updateType(sv.Type), r.valueType(a.Value)
	if want.Accepts(got) {
		return
	}
	hint := "; its type comes from its initial value: start it at null, or declare {default: ..., schema: {...}}, for a value that changes type"
	if sv.Merge != MergeNone {
		hint = fmt.Sprintf("; with merge: %s each set: gives an update of that type", sv.Merge)
	}
	r.f.l.errorf(a.Value.pos, "%s: set: state.%s takes %s, but this is %s%s", label, a.Key, want, got, hint)
}

// checkWrites refuses state writes that a join would lose: the same
// variable written by two parallel branches, or any write in a map body,
// unless the variable declares how writes merge.
func (r *resolver) checkWrites(n *Node) {
	switch {
	case n.Parallel() != nil:
		first := map[string]string{}
		for _, br := range n.Parallel().Branches {
			seen := map[string]bool{}
			for _, a := range writes(br.Body) {
				sv := r.stateVar(a.Key)
				if sv == nil || sv.Merge != MergeNone || seen[a.Key] {
					continue
				}
				seen[a.Key] = true
				if other, ok := first[a.Key]; ok {
					r.f.l.errorf(a.Pos, "node %q: state.%s is written by parallel branches %q and %q, and one write would be lost: declare how the writes merge, e.g. state: {%s: {default: ..., merge: replace}} (merges: %s)",
						n.ID, a.Key, other, br.Name, a.Key, mergeNames())
					continue
				}
				first[a.Key] = br.Name
			}
		}
	case n.Map() != nil:
		for _, a := range writes(n.Map().Body) {
			if sv := r.stateVar(a.Key); sv != nil && sv.Merge == MergeNone {
				r.f.l.errorf(a.Pos, "node %q: each map item has a state of its own, so this write to state.%s would be lost: fold the items' results with the map node's own set:, or declare how writes merge, e.g. state: {%s: {default: [], merge: append}} (merges: %s)",
					n.ID, a.Key, a.Key, mergeNames())
			}
		}
	}
}
