package dsl

import (
	"fmt"
	"regexp"
	"slices"
	"strings"
	"unicode/utf8"

	"github.com/expr-lang/expr/parser"
	"gopkg.in/yaml.v3"
)

func parserParse(src string) (*parser.Tree, error) {
	return parser.Parse(src)
}

// checkFlow checks the next:, default: and on_error: targets of a block's
// nodes and warns about nodes nothing leads to. Jumps go forward to a
// sibling only: the one way to repeat work is a loop node, so every cycle
// has a bound.
func (f *file) checkFlow(b Block, yn []*yaml.Node, sc scope) {
	index := map[string]int{}
	for i, n := range b {
		index[n.ID] = i
	}
	siblings := make([]string, len(b))
	for i, n := range b {
		siblings[i] = n.ID
	}
	reachable := make([]bool, len(b)+1)
	if len(b) > 0 {
		reachable[0] = true
	}
	target := func(i int, field string, at *yaml.Node, t string, allowKeywords bool) {
		if at == nil {
			at = yn[i]
		}
		label := fmt.Sprintf("node %q", b[i].ID)
		switch t {
		case NextEnd:
			return
		case NextBreak, NextContinue:
			if !sc.inLoop {
				f.l.errorf(f.pos(at), "%s: %s: %s is outside any loop%s", label, field, t, mapHint(sc))
			}
			return
		}
		j, ok := index[t]
		switch {
		case ok && j <= i:
			reachable[i+1] = true
			f.l.errorf(f.pos(at), "%s: %s %q jumps backwards: to repeat nodes, put them in a loop (every cycle goes through a loop with max_iterations)", label, field, t)
		case ok:
			reachable[j] = true
		case f.ids[t] != nil:
			reachable[i+1] = true
			f.l.errorf(f.pos(at), "%s: %s %q is not a sibling: %s can only jump forward within the same list of nodes", label, field, t, field)
		default:
			// Treat the bad target as a fall-through so one typo does not
			// also make every later node "unreachable".
			reachable[i+1] = true
			words := []string{NextEnd, NextBreak, NextContinue}
			if allowKeywords {
				words = []string{string(OnErrorFail), string(OnErrorContinue)}
			}
			later := siblings[i+1:]
			hint := Suggest(t, append(words, later...))
			if hint == "" {
				targets := `"` + strings.Join(words, `", "`) + `"`
				if len(later) > 0 {
					targets += ` or a later sibling's id ("` + strings.Join(later, `", "`) + `")`
				} else {
					targets += " (no later sibling to jump to)"
				}
				hint = ": " + field + " takes " + targets
			}
			f.l.errorf(f.pos(at), "%s: %s %q does not exist%s", label, field, t, hint)
		}
	}
	for i, n := range b {
		y := yn[i]
		falls := n.Next == "" || n.When != nil
		if n.Next != "" {
			target(i, "next", valueOf(y, "next"), n.Next, false)
		}
		if t := n.OnError.Target(); t != "" {
			target(i, "on_error", valueOf(y, "on_error"), t, true)
		}
		if n.OnError == OnErrorContinue {
			falls = true
		}
		if n.Branch() != nil {
			cases := items(valueOf(y, "branch"))
			for ci, c := range n.Branch().Cases {
				if c.Next != "" && ci < len(cases) {
					target(i, "next", valueOf(cases[ci], "next"), c.Next, false)
				}
			}
			if n.Branch().Default != "" {
				target(i, "default", valueOf(y, "default"), n.Branch().Default, false)
				falls = n.When != nil
			} else {
				falls = true
			}
		}
		if falls && reachable[i] {
			reachable[i+1] = true
		}
	}
	// Warn once per run of unreachable nodes: the nodes after the first are
	// unreachable only because it is.
	for i := 0; i < len(b); i++ {
		if reachable[i] {
			continue
		}
		j := i
		for j+1 < len(b) && !reachable[j+1] {
			j++
		}
		at := func() Pos { return f.pos(valueOf(yn[i], "id")) }
		switch {
		case slices.ContainsFunc(b[i:j+1], func(n *Node) bool { return n.ID == "" }):
			// The schema reports the missing id; warn once it is fixed.
		case j == i:
			f.l.warnf(at(), "node %q is unreachable: no node before it falls through or jumps to it", b[i].ID)
		default:
			f.l.warnf(at(), "nodes %q to %q are unreachable: no node before them falls through or jumps to them", b[i].ID, b[j].ID)
		}
		i = j
	}
}

func mapHint(sc scope) string {
	if sc.inMap {
		return " (a map item or parallel branch is a scope of its own: break and continue cannot leave it)"
	}
	return ""
}

// scalarPos maps a byte offset within a scalar's value to its position in
// the file, for block scalars too, so that an error inside a multi-line
// expression points at the right line and column.
func (f *file) scalarPos(n *yaml.Node, offset int) Pos {
	v := n.Value
	offset = max(0, min(offset, len(v)))
	lineIdx := strings.Count(v[:offset], "\n")
	lineStart := strings.LastIndex(v[:offset], "\n") + 1
	colInLine := utf8.RuneCountInString(v[lineStart:offset])
	lines := f.l.sources[f.name]
	switch n.Style {
	case yaml.LiteralStyle:
		srcLine := n.Line + 1 + lineIdx
		if srcLine <= len(lines) {
			indent := blockIndent(lines, n.Line)
			return Pos{File: f.name, Line: srcLine, Col: indent + colInLine + 1}
		}
	case yaml.FoldedStyle:
		// Folding joins source lines, so find the text instead.
	default:
		if !strings.Contains(v, "\n") && n.Line <= len(lines) {
			col := n.Column + colInLine
			if n.Style == yaml.DoubleQuotedStyle || n.Style == yaml.SingleQuotedStyle {
				col = quotedColumn(lines[n.Line-1], n.Column, n.Style, colInLine)
			}
			return Pos{File: f.name, Line: n.Line, Col: col}
		}
	}
	// Search the source for the text around the offset.
	lineEnd := strings.IndexByte(v[offset:], '\n')
	if lineEnd < 0 {
		lineEnd = len(v) - offset
	}
	needle := strings.TrimSpace(v[offset : offset+min(lineEnd, 30)])
	if needle != "" {
		for l := n.Line; l <= len(lines) && l < n.Line+500; l++ {
			if c := strings.Index(lines[l-1], needle); c >= 0 && (l > n.Line || c >= n.Column-1) {
				return Pos{File: f.name, Line: l, Col: utf8.RuneCountInString(lines[l-1][:c]) + 1}
			}
		}
	}
	return f.pos(n)
}

// quotedColumn is the column of the character at rune index i of a
// one-line quoted scalar whose opening quote is at column open. Escapes (a
// backslash sequence, or two single quotes for one) take more room in the
// source than in the value.
func quotedColumn(line string, open int, style yaml.Style, i int) int {
	raw := []rune(line)
	j := open // index in raw of the first character after the quote
	for ; i > 0 && j < len(raw); i-- {
		switch {
		case style == yaml.DoubleQuotedStyle && raw[j] == '\\' && j+1 < len(raw):
			switch raw[j+1] {
			case 'x':
				j += 4
			case 'u':
				j += 6
			case 'U':
				j += 10
			default:
				j += 2
			}
		case style == yaml.SingleQuotedStyle && raw[j] == '\'' && j+1 < len(raw) && raw[j+1] == '\'':
			j += 2
		default:
			j++
		}
	}
	return j + 1
}

// blockIndent is the indentation of a block scalar's content, whose
// indicator (| or >) is on line header.
func blockIndent(lines []string, header int) int {
	for l := header + 1; l <= len(lines); l++ {
		t := strings.TrimLeft(lines[l-1], " ")
		if strings.TrimSpace(t) != "" {
			return len(lines[l-1]) - len(t)
		}
	}
	return 0
}

// almostTemplateRE finds {{ x }} and ${ x }: interpolation written the way
// other tools spell it, which flowrun sends as text.
var almostTemplateRE = regexp.MustCompile(`(\$?)\{(\{?)\s*([A-Za-z_][A-Za-z0-9_.\[\]"']*)\s*\}(\}?)`)

// templateHints warns about {{ x }} and ${ x } in the text of a template
// when x reads like an expression flowrun knows, since the model would
// otherwise receive the braces.
func (f *file) templateHints(text string, at func(int) Pos) {
	for _, m := range almostTemplateRE.FindAllStringSubmatchIndex(text, -1) {
		dollar, open2, inner, close2 := text[m[2]:m[3]], text[m[4]:m[5]], text[m[6]:m[7]], text[m[8]:m[9]]
		if !namesRoot(inner) || (dollar == "$" && open2 == "{") || len(open2) != len(close2) || (dollar == "" && open2 == "") {
			continue
		}
		f.l.warnf(at(m[0]), "%s is sent as text: to interpolate, write ${{ %s }}", text[m[0]:m[1]], inner)
	}
}
