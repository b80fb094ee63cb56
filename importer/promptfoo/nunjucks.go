package promptfoo

import (
	"errors"
	"fmt"
	"regexp"
	"slices"
	"strings"
)

// outputRE is a Nunjucks output tag, {{ expression }}.
var outputRE = regexp.MustCompile(`\{\{([\s\S]*?)\}\}`)

// nunjucksFilters are the Nunjucks filters translated, as expr-lang
// forms of the value (%[1]s) and the filter's arguments (%[2]s...); load
// is promptfoo's own (JSON text to its value).
var nunjucksFilters = map[string]struct {
	form string
	args int
}{
	"upper":   {"upper(%[1]s)", 0},
	"lower":   {"lower(%[1]s)", 0},
	"trim":    {"trim(%[1]s)", 0},
	"length":  {"len(%[1]s)", 0},
	"first":   {"first(%[1]s)", 0},
	"last":    {"last(%[1]s)", 0},
	"dump":    {"toJSON(%[1]s)", 0},
	"load":    {"fromJSON(%[1]s)", 0},
	"safe":    {"%[1]s", 0},
	"join":    {"join(%[1]s, %[2]s)", 1},
	"default": {"(%[1]s ?? %[2]s)", 1},
	"d":       {"(%[1]s ?? %[2]s)", 1},
	"replace": {"replace(%[1]s, %[2]s, %[3]s)", 2},
}

// nunjucksExpr translates the expression of a Nunjucks output tag: a
// var, its fields (a.b, a[0]), literals, parentheses and the filters
// above. vars are the template's variables it reads, in order.
func nunjucksExpr(src string) (out string, vars []string, err error) {
	if t := strings.TrimSpace(src); strings.HasPrefix(t, "#") || strings.HasPrefix(t, "/") {
		// {{#each x}} ... {{/each}}, {{#if x}}: Handlebars blocks.
		return "", nil, fmt.Errorf("it is a Handlebars block, which promptfoo's Nunjucks cannot parse either (promptfoo fails on this prompt); a Nunjucks {%% for %%} or {%% if %%} is translated")
	}
	toks, err := jsTokens(src)
	if err != nil {
		return "", nil, err
	}
	p := &nunjucksParser{toks: toks}
	out, err = p.filtered()
	if err == nil && p.i < len(p.toks) {
		err = fmt.Errorf("%q is not translated", p.toks[p.i])
	}
	return out, p.vars, err
}

type nunjucksParser struct {
	toks []string
	i    int
	vars []string
}

func (p *nunjucksParser) next() string {
	if p.i < len(p.toks) {
		p.i++
		return p.toks[p.i-1]
	}
	return ""
}

func (p *nunjucksParser) peek() string {
	if p.i < len(p.toks) {
		return p.toks[p.i]
	}
	return ""
}

func (p *nunjucksParser) filtered() (string, error) {
	v, err := p.term()
	if err != nil {
		return "", err
	}
	for p.peek() == "|" || p.peek() == "||" {
		if p.next() == "||" {
			return "", errors.New("|| is not translated")
		}
		name := p.next()
		f, ok := nunjucksFilters[name]
		if !ok {
			return "", fmt.Errorf("the filter %s is not translated", name)
		}
		args := []any{v}
		if p.peek() == "(" {
			p.next()
			for p.peek() != ")" && p.peek() != "" {
				a, err := p.filtered()
				if err != nil {
					return "", err
				}
				args = append(args, a)
				if p.peek() == "," {
					p.next()
				}
			}
			p.next()
		}
		if len(args)-1 != f.args {
			return "", fmt.Errorf("the filter %s with %d arguments is not translated", name, len(args)-1)
		}
		v = fmt.Sprintf(f.form, args...)
	}
	return v, nil
}

func (p *nunjucksParser) term() (string, error) {
	t := p.next()
	var v string
	switch {
	case t == "(":
		inner, err := p.filtered()
		if err != nil {
			return "", err
		}
		if p.next() != ")" {
			return "", errors.New("a ( is not closed")
		}
		v = "(" + inner + ")"
	case strings.HasPrefix(t, `"`) || t != "" && t[0] >= '0' && t[0] <= '9':
		return t, nil
	case t == "vars" && p.peek() == ".":
		return "", errors.New("promptfoo has no variable vars, so it renders nothing here; write the var's own name")
	case isIdent(t):
		if !slices.Contains(p.vars, t) {
			p.vars = append(p.vars, t)
		}
		v = "inputs." + t
	default:
		return "", fmt.Errorf("%q is not translated", t)
	}
	for {
		switch p.peek() {
		case ".":
			p.next()
			name := p.next()
			if !isIdent(name) {
				return "", fmt.Errorf("%q after . is not translated", name)
			}
			v += "?." + name
		case "[":
			p.next()
			idx := p.next()
			if p.next() != "]" {
				return "", errors.New("a [ is not closed")
			}
			v += "[" + idx + "]"
		default:
			return v, nil
		}
	}
}
