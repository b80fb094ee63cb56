package dsl

import (
	"fmt"
	"sort"
	"strings"
	"unicode/utf8"
)

// Pos is a position in a source file: 1-based line and column (in characters).
type Pos struct {
	File string
	Line int
	Col  int
}

func (p Pos) String() string {
	if p.Line == 0 {
		return p.File
	}
	return fmt.Sprintf("%s:%d:%d", p.File, p.Line, p.Col)
}

// Severity says whether a diagnostic stops the pipeline from loading.
type Severity int

const (
	Error Severity = iota
	Warning
)

func (s Severity) String() string {
	if s == Warning {
		return "warning"
	}
	return "error"
}

// Diagnostic is one problem found while loading a pipeline, with the source
// line it points at so that it can be printed with a caret under the column.
type Diagnostic struct {
	Pos      Pos
	Severity Severity
	Message  string
	// Line is the text of the source line at Pos.Line, without its newline.
	Line string
	// MCPListing names the MCP server whose cached tool listing the
	// problem was found against, "" for none: a fresh listing may settle it.
	MCPListing string
}

// String renders the diagnostic like a compiler: a header, the source line
// and a caret under the column.
func (d Diagnostic) String() string {
	var b strings.Builder
	fmt.Fprintf(&b, "%s: %s: %s", d.Pos, d.Severity, d.Message)
	if d.Line == "" || d.Pos.Line == 0 {
		return b.String()
	}
	num := fmt.Sprint(d.Pos.Line)
	fmt.Fprintf(&b, "\n %s | %s\n %s | ", num, d.Line, strings.Repeat(" ", len(num)))
	// Copy tabs from the source prefix so the caret lines up in a terminal.
	col := 1
	for _, r := range d.Line {
		if col >= d.Pos.Col {
			break
		}
		if r == '\t' {
			b.WriteByte('\t')
		} else {
			b.WriteByte(' ')
		}
		col++
	}
	b.WriteByte('^')
	return b.String()
}

// Diagnostics is every problem found in a load, sorted by file and position.
type Diagnostics []Diagnostic

// HasErrors reports whether any diagnostic is an error (not a warning).
func (ds Diagnostics) HasErrors() bool {
	for _, d := range ds {
		if d.Severity == Error {
			return true
		}
	}
	return false
}

func (ds Diagnostics) String() string {
	var b strings.Builder
	for i, d := range ds {
		if i > 0 {
			b.WriteByte('\n')
		}
		b.WriteString(d.String())
	}
	return b.String()
}

// Err returns the diagnostics as an error when there is at least one error.
func (ds Diagnostics) Err() error {
	if !ds.HasErrors() {
		return nil
	}
	return &LoadError{Diagnostics: ds}
}

// LoadError is returned when a pipeline does not load.
type LoadError struct{ Diagnostics Diagnostics }

func (e *LoadError) Error() string {
	n := 0
	for _, d := range e.Diagnostics {
		if d.Severity == Error {
			n++
		}
	}
	return fmt.Sprintf("%s\n%d error(s)", e.Diagnostics, n)
}

func (ds Diagnostics) sorted() Diagnostics {
	seen := map[string]bool{}
	out := ds[:0]
	for _, d := range ds {
		k := d.Pos.String() + d.Message
		if !seen[k] {
			seen[k] = true
			out = append(out, d)
		}
	}
	sort.SliceStable(out, func(i, j int) bool {
		a, b := out[i].Pos, out[j].Pos
		if a.File != b.File {
			return a.File < b.File
		}
		if a.Line != b.Line {
			return a.Line < b.Line
		}
		if a.Col != b.Col {
			return a.Col < b.Col
		}
		return out[i].Message < out[j].Message
	})
	return out
}

// Suggest returns ` (did you mean "x"?)` when one of the candidates is close
// to name, or "" when none is.
func Suggest(name string, candidates []string) string {
	if best := closest(name, candidates); best != "" {
		return fmt.Sprintf(" (did you mean %q?)", best)
	}
	return ""
}

// closest returns the candidate within a few edits of name or, failing
// that, the only one that completes it ("int" for "integer") or adds a
// word before it ("concurrency" for "max_concurrency"); "" when none is
// close.
func closest(name string, candidates []string) string {
	best, bestDist := "", -1
	n := utf8.RuneCountInString(name)
	limit := max(1, n/3)
	for _, c := range candidates {
		if c == name {
			continue
		}
		d := editDistance(strings.ToLower(name), strings.ToLower(c))
		// d < n: replacing every character of name is not a near miss.
		if d <= limit && d < n && (bestDist < 0 || d < bestDist || (d == bestDist && c < best)) {
			best, bestDist = c, d
		}
	}
	if best != "" || len(name) < 3 {
		return best
	}
	var longer []string
	for _, c := range candidates {
		if c != name && (strings.HasPrefix(c, name) || strings.HasSuffix(c, "_"+name)) {
			longer = append(longer, c)
		}
	}
	if len(longer) == 1 {
		return longer[0]
	}
	return ""
}

// editDistance is the optimal-string-alignment distance: insertions,
// deletions, substitutions and adjacent transpositions each cost one.
func editDistance(a, b string) int {
	ra, rb := []rune(a), []rune(b)
	prev2 := make([]int, len(rb)+1)
	prev := make([]int, len(rb)+1)
	cur := make([]int, len(rb)+1)
	for j := range prev {
		prev[j] = j
	}
	for i := 1; i <= len(ra); i++ {
		cur[0] = i
		for j := 1; j <= len(rb); j++ {
			cost := 1
			if ra[i-1] == rb[j-1] {
				cost = 0
			}
			cur[j] = min(prev[j]+1, cur[j-1]+1, prev[j-1]+cost)
			if i > 1 && j > 1 && ra[i-1] == rb[j-2] && ra[i-2] == rb[j-1] {
				cur[j] = min(cur[j], prev2[j-2]+1) // a transposition counts as one edit
			}
		}
		prev2, prev, cur = prev, cur, prev2
	}
	return prev[len(rb)]
}
