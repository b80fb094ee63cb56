package promptfoo

import (
	"errors"
	"fmt"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"unicode"
)

// jsToExpr translates a javascript assert into an expr-lang condition,
// as promptfoo runs it: one line is an expression, several lines a
// function body whose return is the result. The expression is over
// output (and context.vars): comparisons, arithmetic, && || !, .length,
// .includes, .startsWith, .endsWith, .toLowerCase(), .trim(),
// JSON.parse(...).field, array literals; a body is const (let, var)
// bindings of such expressions and a return, possibly wrapped in
// (() => { ... })(). Anything else is an error that says what is not
// translated.
func jsToExpr(src string) (jsCondition, error) {
	body := strings.ReplaceAll(strings.TrimSpace(src), stripFences, ".stripFences()")
	if m := iife.FindStringSubmatch(body); m != nil {
		body = m[1]
	} else if !strings.Contains(body, "\n") {
		body = "return " + strings.TrimPrefix(body, "return ")
	}
	stmts, err := jsStatements(body)
	if err != nil {
		return jsCondition{}, err
	}
	p := &jsParser{bound: map[string]bool{}}
	var b strings.Builder
	for i, st := range stmts {
		last := i == len(stmts)-1
		if rest, ok := strings.CutPrefix(st, "return "); ok && last {
			v, err := p.parse(rest)
			if err != nil {
				return jsCondition{}, err
			}
			if !v.boolean {
				return jsCondition{}, errors.New("it returns a score or a value, not true or false")
			}
			b.WriteString(v.src)
			return jsCondition{Expr: b.String(), Parses: p.parseGuard()}, nil
		}
		m := binding.FindStringSubmatch(st)
		if m == nil || last {
			if last {
				return jsCondition{}, errors.New("it does not end with a return: promptfoo gets no result from it")
			}
			return jsCondition{}, fmt.Errorf("the statement %q is not translated (only const NAME = EXPRESSION; and return EXPRESSION; are)", snippet(st, 0))
		}
		v, err := p.parse(m[2])
		if err != nil {
			return jsCondition{}, err
		}
		p.bound[m[1]] = v.boolean
		fmt.Fprintf(&b, "let js_%s = %s; ", m[1], v.src)
	}
	return jsCondition{}, errors.New("it is empty")
}

// jsCondition is a javascript assert translated.
type jsCondition struct {
	// Expr is the condition.
	Expr string
	// Parses is the condition under which every JSON.parse in it parses
	// (each argument json_valid): where it is false the script throws,
	// and promptfoo fails the assert. "" when it has no JSON.parse, or
	// when an argument reads a const the script binds (the guard stands
	// outside the bindings and cannot see them).
	Parses string
}

// parseGuard is jsCondition.Parses of what p has parsed.
func (p *jsParser) parseGuard() string {
	if p.unguarded || len(p.parsed) == 0 {
		return ""
	}
	guards := make([]string, len(p.parsed))
	for i, a := range p.parsed {
		guards[i] = "json_valid(" + a + ")"
	}
	return strings.Join(guards, " && ")
}

// stripFences is the common idiom that takes a Markdown code fence off a
// reply before JSON.parse: the one regular expression translated, as the
// method stripFences of jsMethods. Exactly as the expression does, it
// takes off one leading ```json or ``` and one trailing ```; the
// whitespace next to them it leaves, which JSON.parse (or the .trim()
// that follows) ignores.
const stripFences = ".replace(/^```json\\s*|^```\\s*|\\s*```$/g, '')"

var (
	iife    = regexp.MustCompile(`^\(\s*(?:async\s*)?\(\s*\)\s*=>\s*\{([\s\S]*)\}\s*\)\s*\(\s*\)\s*;?$`)
	binding = regexp.MustCompile(`^(?:const|let|var)\s+([A-Za-z_$][A-Za-z0-9_$]*)\s*=\s*([\s\S]+)$`)
)

// jsStatements splits a function body at ; and line ends outside strings
// and brackets, dropping // comments and empty statements.
func jsStatements(body string) ([]string, error) {
	var out []string
	depth, start := 0, 0
	var quote byte
	flush := func(end int) {
		if st := strings.TrimSpace(body[start:end]); st != "" {
			out = append(out, st)
		}
		start = end + 1
	}
	for i := 0; i < len(body); i++ {
		c := body[i]
		switch {
		case quote != 0:
			if c == '\\' {
				i++
			} else if c == quote {
				quote = 0
			}
		case c == '\'' || c == '"' || c == '`':
			quote = c
		case c == '/' && startsRegexp(body[:i]) && !strings.HasPrefix(body[i:], "//"):
			// a regular expression literal: skip it, quotes and all
			for i++; i < len(body) && body[i] != '/' && body[i] != '\n'; i++ {
				if body[i] == '\\' {
					i++
				}
			}
		case c == '/' && i+1 < len(body) && body[i+1] == '/':
			flush(i)
			for i < len(body) && body[i] != '\n' {
				i++
			}
			start = i + 1
		case c == '(' || c == '[' || c == '{':
			depth++
		case c == ')' || c == ']' || c == '}':
			depth--
		case depth == 0 && (c == ';' || c == '\n'):
			if c == '\n' && continues(body[start:i], body[i+1:]) {
				continue
			}
			flush(i)
		}
	}
	if quote != 0 {
		return nil, errors.New("a string is not closed")
	}
	flush(len(body))
	return out, nil
}

// continues says whether a statement goes on after a line end: the line
// ends with an operator, or the next begins with one.
func continues(before, after string) bool {
	b, a := strings.TrimSpace(before), strings.TrimSpace(after)
	for _, op := range []string{"&&", "||", "+", "-", "*", "/", "=", "!", "<", ">", "?", ":", ",", "."} {
		if strings.HasSuffix(b, op) || strings.HasPrefix(a, op) {
			return true
		}
	}
	return false
}

func (p *jsParser) parse(src string) (jsValue, error) {
	toks, err := jsTokens(src)
	if err != nil {
		return jsValue{}, err
	}
	p.toks, p.i = toks, 0
	v, err := p.or()
	if err != nil {
		return v, err
	}
	if p.i < len(p.toks) {
		return v, fmt.Errorf("%q is not translated", p.toks[p.i])
	}
	return v, nil
}

type jsValue struct {
	src     string
	boolean bool
	list    bool   // an array literal
	typeOf  string // for typeof X: X, compared only with a type's name
}

type jsParser struct {
	toks  []string
	i     int
	bound map[string]bool // the names consts bound, and whether each is true or false
	// parsed are the arguments of the JSON.parse calls translated;
	// unguarded, that one of them cannot be tested before the bindings.
	parsed    []string
	unguarded bool
}

func (p *jsParser) peek() string {
	if p.i < len(p.toks) {
		return p.toks[p.i]
	}
	return ""
}

func (p *jsParser) next() string { t := p.peek(); p.i++; return t }

func (p *jsParser) expect(t string) error {
	if got := p.next(); got != t {
		return fmt.Errorf("%q where %q was expected", got, t)
	}
	return nil
}

func (p *jsParser) or() (jsValue, error) { return p.binary([]string{"||"}, p.and) }

func (p *jsParser) and() (jsValue, error) { return p.binary([]string{"&&"}, p.comparison) }

func (p *jsParser) binary(ops []string, operand func() (jsValue, error)) (jsValue, error) {
	l, err := operand()
	if err != nil {
		return l, err
	}
	for slices.Contains(ops, p.peek()) {
		op := p.next()
		r, err := operand()
		if err != nil {
			return r, err
		}
		if !l.boolean || !r.boolean {
			return l, fmt.Errorf("%s between values that are not true or false", op)
		}
		l = jsValue{src: l.src + " " + op + " " + r.src, boolean: true}
	}
	return l, nil
}

var jsComparisons = map[string]string{"===": "==", "!==": "!=", "==": "==", "!=": "!=", "<": "<", "<=": "<=", ">": ">", ">=": ">="}

func (p *jsParser) comparison() (jsValue, error) {
	l, err := p.additive()
	if err != nil {
		return l, err
	}
	if op, ok := jsComparisons[p.peek()]; ok {
		p.next()
		r, err := p.additive()
		if err != nil {
			return r, err
		}
		if l.typeOf != "" || r.typeOf != "" {
			return typeTest(l, op, r)
		}
		return jsValue{src: "(" + l.src + " " + op + " " + r.src + ")", boolean: true}, nil
	}
	if l.typeOf != "" {
		return l, errors.New("typeof is translated only compared with a type's name")
	}
	return l, nil
}

// jsTypes are expr-lang's conditions for javascript's typeof names.
var jsTypes = map[string]string{
	"string":    `type(%s) == "string"`,
	"number":    `type(%s) in ["int", "float"]`,
	"boolean":   `type(%s) == "bool"`,
	"object":    `type(%s) in ["map", "array", "nil"]`,
	"undefined": `%s == nil`,
}

// typeTest is typeof X === "NAME" (or !==).
func typeTest(l jsValue, op string, r jsValue) (jsValue, error) {
	if l.typeOf == "" {
		l, r = r, l
	}
	name, err := strconv.Unquote(r.src)
	form, ok := jsTypes[name]
	if err != nil || !ok || (op != "==" && op != "!=") {
		return l, errors.New("typeof is translated only as typeof X === NAME (string, number, boolean, object, undefined) or !==")
	}
	cond := "(" + fmt.Sprintf(form, l.typeOf) + ")"
	if op == "!=" {
		cond = "!" + cond
	}
	return jsValue{src: cond, boolean: true}, nil
}

func (p *jsParser) additive() (jsValue, error) {
	return p.arithmetic([]string{"+", "-"}, p.multiplicative)
}

func (p *jsParser) multiplicative() (jsValue, error) {
	return p.arithmetic([]string{"*", "/", "%"}, p.unary)
}

// arithmetic is a number (or, with +, joined text), never true or false.
func (p *jsParser) arithmetic(ops []string, operand func() (jsValue, error)) (jsValue, error) {
	l, err := operand()
	if err != nil {
		return l, err
	}
	for slices.Contains(ops, p.peek()) {
		op := p.next()
		r, err := operand()
		if err != nil {
			return r, err
		}
		l = jsValue{src: "(" + l.src + " " + op + " " + r.src + ")"}
	}
	return l, nil
}

func (p *jsParser) unary() (jsValue, error) {
	if p.peek() == "typeof" {
		p.next()
		v, err := p.postfix()
		return jsValue{typeOf: v.src}, err
	}
	if p.peek() == "-" {
		p.next()
		v, err := p.unary()
		return jsValue{src: "-" + v.src}, err
	}
	if p.peek() == "!" {
		p.next()
		v, err := p.unary()
		if err != nil || !v.boolean {
			return v, errOr(err, "! of a value that is not true or false")
		}
		return jsValue{src: "!" + v.src, boolean: true}, nil
	}
	return p.postfix()
}

func errOr(err error, msg string) error {
	if err != nil {
		return err
	}
	return errors.New(msg)
}

// jsMethods are the string methods translated, each as a template on its
// receiver (%[1]s) and argument (%[2]s).
var jsMethods = map[string]struct {
	form    string
	args    int
	boolean bool
}{
	"includes":    {"(%[1]s contains %[2]s)", 1, true},
	"startsWith":  {"(%[1]s startsWith %[2]s)", 1, true},
	"endsWith":    {"(%[1]s endsWith %[2]s)", 1, true},
	"toLowerCase": {"lower(%[1]s)", 0, false},
	"toUpperCase": {"upper(%[1]s)", 0, false},
	"trim":        {"trim(%[1]s)", 0, false},
	"stripFences": {"trimSuffix(trimPrefix(trimPrefix(%[1]s, \"```json\"), \"```\"), \"```\")", 0, false},
}

func (p *jsParser) postfix() (jsValue, error) {
	v, err := p.primary()
	if err != nil {
		return v, err
	}
	for p.peek() == "." {
		p.next()
		name := p.next()
		if p.peek() != "(" {
			if name == "length" {
				v = jsValue{src: "len(" + v.src + ")"}
				continue
			}
			if !isIdent(name) {
				return v, fmt.Errorf("%q after . is not translated", name)
			}
			if v.src == "outputs.text" {
				return v, fmt.Errorf("output.%s: output is the reply's text; a field of it (a provider's object) is not translated", name)
			}
			v = jsValue{src: v.src + "?." + name}
			continue
		}
		m, ok := jsMethods[name]
		if !ok {
			return v, fmt.Errorf("the method %s() is not translated", name)
		}
		p.next()
		var args []string
		for p.peek() != ")" && p.peek() != "" {
			a, err := p.or()
			if err != nil {
				return a, err
			}
			args = append(args, a.src)
			if p.peek() == "," {
				p.next()
			}
		}
		if err := p.expect(")"); err != nil {
			return v, err
		}
		if len(args) != m.args {
			return v, fmt.Errorf("%s() with %d arguments is not translated", name, len(args))
		}
		if name == "includes" && v.list {
			v = jsValue{src: "(" + args[0] + " in " + v.src + ")", boolean: true}
			continue
		}
		v = jsValue{src: fmt.Sprintf(m.form, v.src, strings.Join(args, "")), boolean: m.boolean}
	}
	return v, nil
}

func (p *jsParser) primary() (jsValue, error) {
	t := p.next()
	switch {
	case t == "(":
		v, err := p.or()
		if err != nil {
			return v, err
		}
		if v.boolean {
			v.src = "(" + v.src + ")"
		}
		return v, p.expect(")")
	case t == "[":
		var items []string
		for p.peek() != "]" && p.peek() != "" {
			a, err := p.or()
			if err != nil {
				return a, err
			}
			items = append(items, a.src)
			if p.peek() == "," {
				p.next()
			}
		}
		return jsValue{src: "[" + strings.Join(items, ", ") + "]", list: true}, p.expect("]")
	case t == "true" || t == "false":
		return jsValue{src: t, boolean: true}, nil
	case t == "null" || t == "undefined":
		return jsValue{src: "nil"}, nil
	case t == "output":
		return jsValue{src: "outputs.text"}, nil
	case hasKey(p.bound, t):
		return jsValue{src: "js_" + t, boolean: p.bound[t]}, nil
	case t == "context":
		if p.next() != "." || p.next() != "vars" || p.next() != "." || !isIdent(p.peek()) {
			return jsValue{}, errors.New("only context.vars.NAME of context is translated")
		}
		return jsValue{src: "item." + p.next()}, nil
	case t == "JSON":
		if p.next() != "." || p.next() != "parse" || p.next() != "(" {
			return jsValue{}, errors.New("only JSON.parse of JSON is translated")
		}
		v, err := p.or()
		if err != nil {
			return v, err
		}
		// A const's name, or a JSON.parse within, the guard cannot test.
		p.unguarded = p.unguarded || strings.Contains(v.src, "js_") || strings.Contains(v.src, "fromJSON(")
		if !slices.Contains(p.parsed, v.src) {
			p.parsed = append(p.parsed, v.src)
		}
		return jsValue{src: "fromJSON(" + v.src + ")"}, p.expect(")")
	case strings.HasPrefix(t, `"`):
		return jsValue{src: t}, nil
	case t != "" && (unicode.IsDigit(rune(t[0])) || t[0] == '-'):
		return jsValue{src: t}, nil
	case t == "":
		return jsValue{}, errors.New("it ends early")
	}
	return jsValue{}, fmt.Errorf("%q is not translated (only output, context.vars and literals are)", t)
}

func isIdent(s string) bool {
	for i, r := range s {
		if !(r == '_' || r == '$' || unicode.IsLetter(r) || i > 0 && unicode.IsDigit(r)) {
			return false
		}
	}
	return s != ""
}

// jsTokens splits a javascript expression into tokens; strings come out
// double-quoted, as expr-lang writes them.
func jsTokens(src string) ([]string, error) {
	var out []string
	s := strings.TrimSpace(src)
	for i := 0; i < len(s); {
		c := s[i]
		switch {
		case c == ' ' || c == '\t' || c == '\n' || c == '\r':
			i++
		case c == '{' || c == '=' && i+1 < len(s) && s[i+1] == '>':
			return nil, errors.New("a block or a function inside an expression is not translated")
		case c == '\'' || c == '"':
			j := i + 1
			var b strings.Builder
			for j < len(s) && s[j] != c {
				if s[j] == '\\' && j+1 < len(s) {
					j++
				}
				b.WriteByte(s[j])
				j++
			}
			if j >= len(s) {
				return nil, errors.New("a string is not closed")
			}
			out = append(out, strconv.Quote(b.String()))
			i = j + 1
		case c == '`':
			return nil, errors.New("template strings are not translated")
		case c == '/' && startsRegexp(s[:i]):
			return nil, errors.New("regular expressions are not translated")
		case c >= '0' && c <= '9':
			j := i
			for j < len(s) && (s[j] >= '0' && s[j] <= '9' || s[j] == '.') {
				j++
			}
			out = append(out, s[i:j])
			i = j
		case c == '_' || c == '$' || unicode.IsLetter(rune(c)):
			j := i
			for j < len(s) && (s[j] == '_' || s[j] == '$' || unicode.IsLetter(rune(s[j])) || s[j] >= '0' && s[j] <= '9') {
				j++
			}
			out = append(out, s[i:j])
			i = j
		default:
			op := ""
			for _, o := range []string{"===", "!==", "==", "!=", "<=", ">=", "&&", "||", "|", "<", ">", "!", "(", ")", "[", "]", ",", ".", "+", "-", "*", "/", "%"} {
				if strings.HasPrefix(s[i:], o) {
					op = o
					break
				}
			}
			switch {
			case c == '?':
				return nil, errors.New("a choice (? :) is a score, not true or false, and is not translated")
			case op == "":
				return nil, fmt.Errorf("%q is not translated", string(c))
			}
			out = append(out, op)
			i += len(op)
		}
	}
	return out, nil
}

func hasKey(m map[string]bool, k string) bool {
	_, ok := m[k]
	return ok
}

// startsRegexp says whether a / after this text starts a regular
// expression rather than dividing: it follows no value.
func startsRegexp(before string) bool {
	b := strings.TrimSpace(before)
	return b == "" || strings.ContainsAny(b[len(b)-1:], "(,=:[!&|?{};")
}
