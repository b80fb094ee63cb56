package dsl

import (
	"errors"
	"fmt"
	"math"
	"path/filepath"
	"reflect"
	"regexp"
	"slices"
	"strconv"
	"strings"

	"github.com/expr-lang/expr"
	"github.com/expr-lang/expr/ast"
	exprfile "github.com/expr-lang/expr/file"
	"gopkg.in/yaml.v3"
)

// Compiling fields: templates, conditions, expressions and values, each
// parsed and compiled once, at load, and queued for the resolve phase,
// which types them (resolve.go).

// scope says which loop and map variables an expression may use.
type scope struct {
	inLoop   bool // break and continue are allowed
	loopVars bool // loop.* is defined: inside a loop, or a map or parallel branch inside one
	inMap    bool // item and index are defined
	// tool is set while compiling an llm tool's templates: inputs are the
	// tool's parameters, and state and nodes are out of reach.
	tool *Tool
	// node is the node whose field is being compiled (nil for outputs and
	// memories); mapNode is the map whose item and index are in scope.
	node, mapNode *Node
	// maybeText marks a plain string in an expression field: when it does
	// not compile, the author may have meant the text itself.
	maybeText bool
	// afterRun marks the node's own set:, which reads its output.
	afterRun bool
	// score marks a metric of score:, which sees outputs, item and run.
	score bool
}

// prompt compiles a prompt field: an inline template, or {file: path}
// whose contents are the template (positions then point into that file).
func (f *file) prompt(n *yaml.Node, sc scope) *Template {
	if n.Kind == yaml.ScalarNode {
		return f.template(n, sc)
	}
	fn := valueOf(n, "file")
	rel, ok := str(fn)
	if !ok {
		return nil
	}
	src, ok := f.readFile(fn, "prompt file", rel)
	if !ok {
		return nil
	}
	path := filepath.Join(f.dir, rel)
	text := string(src)
	f.l.sources[path] = strings.Split(text, "\n")
	spans, err := splitTemplate(text)
	var te *templateError
	if errors.As(err, &te) {
		f.l.errorf(offsetPos(path, text, te.offset), "%s", te.msg)
		return nil
	}
	t := &Template{}
	for _, s := range spans {
		if !s.isExpr {
			f.templateHints(s.text, func(off int) Pos { return offsetPos(path, text, s.offset+off) })
			t.parts = append(t.parts, templatePart{text: s.text})
			continue
		}
		e := f.compile(s.text, sc, false, func(off int) Pos { return offsetPos(path, text, s.offset+off) })
		t.parts = append(t.parts, templatePart{expr: e})
	}
	return t
}

// template compiles a string field that interpolates ${{ }}.
func (f *file) template(n *yaml.Node, sc scope) *Template {
	s, ok := str(n)
	if !ok {
		if n != nil && n.Kind == yaml.ScalarNode {
			s = n.Value // a number or boolean written where text goes
		} else {
			return nil
		}
	}
	spans, err := splitTemplate(s)
	var te *templateError
	if errors.As(err, &te) {
		f.l.errorf(f.scalarPos(n, te.offset), "%s", te.msg)
		return nil
	}
	t := &Template{}
	for _, sp := range spans {
		if !sp.isExpr {
			f.templateHints(sp.text, func(off int) Pos { return f.scalarPos(n, sp.offset+off) })
			t.parts = append(t.parts, templatePart{text: sp.text})
			continue
		}
		e := f.compile(sp.text, sc, false, func(off int) Pos { return f.scalarPos(n, sp.offset+off) })
		t.parts = append(t.parts, templatePart{expr: e})
	}
	if len(t.parts) == 0 {
		t.parts = []templatePart{{text: ""}}
	}
	return t
}

// wholeExpr returns the inner expression and its offset when s is exactly
// one ${{ expr }}.
func wholeExpr(s string) (string, int, bool) {
	spans, err := splitTemplate(s)
	if err != nil {
		return "", 0, false
	}
	var exprSpan *templateSpan
	for i := range spans {
		switch {
		case spans[i].isExpr && exprSpan == nil:
			exprSpan = &spans[i]
		case spans[i].isExpr || strings.TrimSpace(spans[i].text) != "":
			return "", 0, false
		}
	}
	if exprSpan == nil {
		return "", 0, false
	}
	return exprSpan.text, exprSpan.offset, true
}

// condition compiles a boolean field (when, until, while). It takes a bare
// expression; "${{ expr }}" alone is accepted too, but text mixed with
// ${{ }} is an error because a string is never coerced to a boolean.
func (f *file) condition(n *yaml.Node, sc scope, field string) *Expr {
	if n.Kind != yaml.ScalarNode {
		return nil
	}
	s := n.Value
	if strings.Contains(s, "${{") {
		inner, off, ok := wholeExpr(s)
		if !ok {
			f.l.errorf(f.scalarPos(n, strings.Index(s, "${{")), "%s takes a bare expression, not text with ${{ }}: a string is never true or false; write the condition without ${{ }}", field)
			return nil
		}
		return f.compile(inner, sc, true, func(o int) Pos { return f.scalarPos(n, off+o) })
	}
	return f.bare(n, sc, true, field)
}

// bare compiles a bare expression field. A number, boolean or null
// written there is a literal (`until: false`, `result: 7`): it is compiled
// as the same literal in expr-lang, so that it is typed like any other
// expression.
func (f *file) bare(n *yaml.Node, sc scope, asBool bool, field string) *Expr {
	if n.Kind != yaml.ScalarNode {
		return nil
	}
	s := n.Value
	if strings.TrimSpace(s) == "" {
		f.l.errorf(f.pos(n), "%s: empty expression", field)
		return nil
	}
	if _, isText := str(n); !isText {
		lit, ok := literalSource(n)
		if asBool && lit == "nil" {
			f.l.errorf(f.pos(n), "%s: a condition must be true or false, but this is null", field)
			return nil
		}
		if !ok {
			f.l.errorf(f.pos(n), "%s: %s is not a number an expression can hold: write a finite number", field, s)
			return nil
		}
		return f.compile(lit, sc, asBool, func(int) Pos { return f.pos(n) })
	}
	lead := len(s) - len(strings.TrimLeft(s, " \t\r\n"))
	return f.compile(s, sc, asBool, func(o int) Pos { return f.scalarPos(n, lead+o) })
}

// literalSource writes a non-string YAML scalar as expr-lang source.
// Infinities and NaN have no expr-lang literal.
func literalSource(n *yaml.Node) (string, bool) {
	switch n.ShortTag() {
	case "!!null":
		return "nil", true
	case "!!bool":
		var b bool
		if n.Decode(&b) == nil {
			return strconv.FormatBool(b), true
		}
	case "!!int":
		if i, ok := intValue(n); ok {
			return strconv.Itoa(i), true
		}
	case "!!float":
		if x, ok := floatValue(n); ok && !math.IsInf(x, 0) && !math.IsNaN(x) {
			// 'f' keeps a float a float in expr-lang: 2.0 is "2.0", not the int 2.
			src := strconv.FormatFloat(x, 'f', -1, 64)
			if !strings.Contains(src, ".") {
				src += ".0"
			}
			return src, true
		}
	}
	return "", false
}

// value compiles an expression field (set: values, outputs, call inputs,
// tool and code args, ...). A string is an expression, and "${{ expr }}"
// alone is one too; a string mixing text with ${{ }} is a template that
// yields a string. Lists and mappings hold values, and any other scalar is
// a literal.
func (f *file) value(n *yaml.Node, sc scope) *Value {
	v := f.valueAt(n, sc)
	if n != nil {
		v.pos = f.pos(n)
	}
	return v
}

func (f *file) valueAt(n *yaml.Node, sc scope) *Value {
	switch {
	case n == nil:
		return &Value{}
	case n.Kind == yaml.SequenceNode:
		v := &Value{list: []*Value{}}
		for _, c := range items(n) {
			v.list = append(v.list, f.value(c, sc))
		}
		return v
	case n.Kind == yaml.MappingNode:
		v := &Value{obj: []*Field{}}
		for _, kv := range pairs(n) {
			v.obj = append(v.obj, &Field{Name: kv[0].Value, Value: f.value(kv[1], sc)})
		}
		return v
	}
	s, ok := str(n)
	if !ok {
		return &Value{lit: Plain(n)}
	}
	if strings.Contains(s, "${{") {
		if inner, off, ok := wholeExpr(s); ok {
			return &Value{expr: f.compile(inner, sc, false, func(o int) Pos { return f.scalarPos(n, off+o) })}
		}
		return &Value{tmpl: f.template(n, sc)}
	}
	sc.maybeText = true
	return &Value{expr: f.bare(n, sc, false, "value")}
}

// text compiles a text field that may also give a list (images:): a
// template, except that "${{ expr }}" alone keeps the expression's type.
func (f *file) text(n *yaml.Node, sc scope) *Value {
	if s, ok := str(n); ok {
		if inner, off, ok := wholeExpr(s); ok {
			return &Value{expr: f.compile(inner, sc, false, func(o int) Pos { return f.scalarPos(n, off+o) })}
		}
	}
	return &Value{tmpl: f.template(n, sc)}
}

// compile compiles one expression and checks its names. at maps a byte
// offset in src to a file position.
func (f *file) compile(src string, sc scope, asBool bool, at func(int) Pos) *Expr {
	tree, err := parseOnly(src)
	var reads []string
	if err == nil {
		reads = f.checkNames(tree, src, sc, at)
	}
	opts, names := f.opts, envNames
	if sc.score {
		opts, names = f.scoreOptions(), scoreNames
	}
	prog, err := expr.Compile(src, opts...)
	if err != nil {
		var fe *exprfile.Error
		if errors.As(err, &fe) {
			msg := fe.Message
			if msg == "unexpected token EOF" {
				msg = "the expression ends too early: is a parenthesis, bracket or operand missing?"
			}
			// state.x is untyped, so expr-lang refuses `state.log + [x]`.
			if strings.HasPrefix(msg, "invalid operation: + (mismatched types") && strings.Contains(msg, "[]") {
				msg += ": to add to a list, write concat(list, [x])"
			}
			if strings.HasPrefix(msg, "unknown name ") {
				name := strings.TrimPrefix(msg, "unknown name ")
				msg = fmt.Sprintf("unknown name %s%s; %s can use %s", name, Suggest(name, names), exprKind(sc), strings.Join(names, ", "))
			}
			if m := structFieldRE.FindStringSubmatch(msg); m != nil {
				root, fields := "loop", loopFields
				switch m[1] {
				case "RunInfo":
					root, fields = "run", runFields
				case "ScoreRun":
					root, fields = "run", scoreRunFields
				}
				msg = fmt.Sprintf("%s has no field %q%s; its fields are %s", root, m[2], Suggest(m[2], fields), strings.Join(fields, ", "))
			}
			if sc.maybeText && !namesRoot(src) && (strings.HasPrefix(msg, "unknown name ") || strings.HasPrefix(msg, "unexpected token")) {
				msg += fmt.Sprintf("; this field is an expression: to give the text itself, quote it: '%s'", strconv.Quote(src))
			}
			// A bare word in a condition is most often text compared with
			// (when: nodes.c.text == OK); not a word read from (stat.x), nor
			// a misspelt name.
			if name, isName := strings.CutPrefix(fe.Message, "unknown name "); isName && asBool && !sc.maybeText &&
				Suggest(name, names) == "" && !readFrom(src, runeOffset(src, fe.From)+len(name)) {
				msg += fmt.Sprintf("; to compare with the text %s, quote it: %s", name, strconv.Quote(name))
			}
			f.l.errorf(at(runeOffset(src, fe.From)), "in `%s`: %s", oneLine(src), msg)
		} else {
			f.l.errorf(at(0), "in `%s`: %v", oneLine(src), err)
		}
		return nil
	}
	// A condition whose type is known must be a boolean; one of unknown
	// type (a state value, say) is checked when it runs.
	if t := prog.Node().Type(); asBool && t != nil && t.Kind() != reflect.Bool && t.Kind() != reflect.Interface {
		f.l.errorf(at(0), "in `%s`: a condition must be true or false, but this is %s", oneLine(src), t)
		return nil
	}
	e := &Expr{Src: src, Pos: at(0), prog: prog, nodes: reads}
	pe := &pendingExpr{src: src, tree: tree, sc: sc, asBool: asBool, at: at}
	f.pending = append(f.pending, pe)
	f.pendingOf[e] = pe
	return e
}

// readFrom says whether the name ending at byte i of src is read from
// or called (stat.x, f(), m[k]), and so not a word of text.
func readFrom(src string, i int) bool {
	rest := strings.TrimLeft(src[min(i, len(src)):], " ")
	return rest != "" && strings.ContainsRune(".([", rune(rest[0]))
}

var envNames = []string{"inputs", "state", "nodes", "loop", "item", "index", "run", "env"}

func exprKind(sc scope) string {
	if sc.score {
		return "a metric"
	}
	return "expressions"
}

var (
	structFieldRE = regexp.MustCompile(`^type dsl\.(LoopInfo|RunInfo|ScoreRun) has no field (\w+)$`)
	loopFields    = []string{"index", "iteration", "max"}
	runFields     = []string{"cost_usd", "id", "step", "tokens"}
)

var rootNameRE = regexp.MustCompile(`\b(inputs|state|nodes|loop|item|index|run|env)\b`)

// namesRoot reports whether src mentions a name expressions read, so that
// it is surely an expression rather than text that was meant literally.
func namesRoot(src string) bool { return rootNameRE.MatchString(src) }

func oneLine(s string) string {
	s = strings.Join(strings.Fields(s), " ")
	if len(s) > 60 {
		s = s[:57] + "..."
	}
	return s
}

// runeOffset converts expr-lang's rune offset into a byte offset.
func runeOffset(s string, runes int) int {
	i := 0
	for b := range s {
		if i == runes {
			return b
		}
		i++
	}
	return len(s)
}

func parseOnly(src string) (*ast.Node, error) {
	tree, err := parserParse(src)
	if err != nil {
		return nil, err
	}
	return &tree.Node, nil
}

// checkNames reports names used outside the scope that defines them: loop
// exists only inside loops, item and index only inside maps, and an llm
// tool sees its arguments only. Member names are checked with their types
// by the resolve phase.
// checkNames reports names used where they are not defined, and returns
// the ids of the nodes.<id> the expression reads.
func (f *file) checkNames(root *ast.Node, src string, sc scope, at func(int) Pos) []string {
	v := &nameVisitor{f: f, sc: sc}
	ast.Walk(root, v)
	for _, p := range v.problems {
		f.l.errorf(at(runeOffset(src, p.from)), "in `%s`: %s", oneLine(src), p.msg)
	}
	return v.nodes
}

type nameProblem struct {
	from int
	msg  string
}

type nameVisitor struct {
	f        *file
	sc       scope
	problems []nameProblem
	nodes    []string
}

func (v *nameVisitor) Visit(node *ast.Node) {
	switch n := (*node).(type) {
	case *ast.IdentifierNode:
		switch {
		case v.sc.tool != nil && slices.Contains(toolHidden, n.Value):
			v.add(n, fmt.Sprintf("tool %q: an llm tool's templates see its arguments as inputs.<parameter>, not %s; add a parameter for what the tool needs", v.sc.tool.Name, n.Value))
		case n.Value == "loop" && !v.sc.loopVars:
			v.add(n, "loop is only defined inside a loop body")
		case v.sc.score:
		case (n.Value == "item" || n.Value == "index") && !v.sc.inMap:
			v.add(n, n.Value+" is only defined inside a map body")
		}
	case *ast.MemberNode:
		id, isID := n.Node.(*ast.IdentifierNode)
		prop, isStr := n.Property.(*ast.StringNode)
		if isID && id.Value == "nodes" && isStr && !slices.Contains(v.nodes, prop.Value) {
			v.nodes = append(v.nodes, prop.Value)
		}
	}
}

// toolHidden are the names an llm tool's templates cannot use: a tool is
// a function of its arguments, whichever node calls it.
var toolHidden = []string{"state", "nodes", "loop", "item", "index"}

func (v *nameVisitor) add(n ast.Node, msg string) {
	v.problems = append(v.problems, nameProblem{from: n.Location().From, msg: msg})
}
