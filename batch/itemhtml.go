package batch

import (
	_ "embed"
	"html/template"
	"maps"
	"reflect"
	"slices"
	"strings"

	"github.com/flowrun/flowrun/arc"
	"github.com/flowrun/flowrun/jsonvalue"
)

//go:embed item.html.tmpl
var itemSource string

var itemTemplates = template.Must(template.New("item").Parse(itemSource))

// Cell size of a grid drawn in an item's details, in pixels.
const gridCell = 16

// gridSide is the most pixels a side of a grid drawn alone takes: a 30 by
// 30 grid's cells are smaller (down to 4 pixels), so that it fits beside
// others.
const gridSide = 300

// foldAt is the length past which a value is folded: its first line
// shows, and it opens to the whole of it.
const foldAt = 160

// ItemHTML is one item's details as an HTML fragment, for the report and
// the web UI alike: its inputs, the dataset fields its metrics read, its
// outputs (grids drawn, cells that differ from the expected grid
// outlined; long values folded), each metric, the judge's reasoning, the
// human note and the error. Everything from the store is escaped.
func ItemHTML(s *Summary, r Row) template.HTML {
	type score struct{ Name, Text, Class string }
	type reason struct{ Name, Text string }
	type check struct{ Mark, Name, Reason, Class string }
	type checks struct {
		Metric, Line string
		List         []check
	}
	d := struct {
		Inputs, Expected, Outputs []field
		Scores                    []score
		Checks                    []checks
		Reasoning                 []reason
		Note, Error, Class        string
	}{Inputs: fields(r.Inputs, nil), Expected: fields(r.Expected, nil), Outputs: fields(r.Outputs, r.Expected),
		Note: r.Note, Error: r.Error, Class: r.Class}
	for _, m := range s.Metrics {
		v, ok := r.Scores[m.Name]
		if !ok {
			continue
		}
		sc := score{Name: m.Name, Text: scoreWord(v)}
		if b, isBool := v.(bool); isBool {
			sc.Class = map[bool]string{true: "pass", false: "fail"}[b]
		}
		d.Scores = append(d.Scores, sc)
	}
	for _, name := range slices.Sorted(maps.Keys(r.Checks)) {
		cs := checks{Metric: name, Line: ChecksLine(r.Checks[name])}
		for i, c := range r.Checks[name].List {
			class := "none"
			if c.Pass != nil {
				class = map[bool]string{true: "pass", false: "fail"}[*c.Pass]
			}
			cs.List = append(cs.List, check{Mark: checkMark(c), Name: checkName(c, i), Reason: c.Reason, Class: class})
		}
		d.Checks = append(d.Checks, cs)
	}
	for _, k := range slices.Sorted(maps.Keys(r.Reasoning)) {
		d.Reasoning = append(d.Reasoning, reason{k, r.Reasoning[k]})
	}
	return execute("item", d)
}

// PairHTML shows an item's outputs in batches A and B side by side, each
// against the expected value, with what changed: a word or line diff for
// text, B's grid with the cells that differ from A's outlined for grids.
func PairHTML(p Pair) template.HTML {
	type change struct {
		Name         string
		A, B, Change template.HTML
	}
	names := slices.Sorted(maps.Keys(p.B.Outputs))
	for k := range p.A.Outputs {
		if _, inB := p.B.Outputs[k]; !inB {
			names = append(names, k)
		}
	}
	var rows []change
	for _, k := range names {
		a, b := p.A.Outputs[k], p.B.Outputs[k]
		wants := wantsFor(k, p.B.Expected, arc.TestOutputs(p.B.Expected))
		rows = append(rows, change{Name: k, A: valueHTML(a, wants), B: valueHTML(b, wants), Change: changeHTML(a, b)})
	}
	return execute("pair", struct {
		A, B   Row
		Given  []given
		Fields []change
	}{p.A, p.B, append(givens("input", p.A.Inputs, p.B.Inputs), givens("expected", p.A.Expected, p.B.Expected)...), rows})
}

// given is one value an item's runs were given (an input) or held to (an
// expected field): once when A's and B's agree, else each.
type given struct {
	Kind, Name string
	A, B       template.HTML // B empty when A's and B's agree
}

// givens are the values of a and b, named kind, by name.
func givens(kind string, a, b map[string]any) []given {
	names := slices.Sorted(maps.Keys(b))
	for k := range a {
		if _, inB := b[k]; !inB {
			names = append(names, k)
		}
	}
	out := make([]given, 0, len(names))
	for _, k := range names {
		g := given{Kind: kind, Name: k, A: valueHTML(a[k], nil)}
		if !reflect.DeepEqual(a[k], b[k]) {
			g.B = valueHTML(b[k], nil)
		}
		out = append(out, g)
	}
	return out
}

type field struct {
	Name string
	HTML template.HTML
}

// fields shows each of m's values, an output against the expected value
// of the same name or else the one expected grid.
func fields(m, expected map[string]any) []field {
	var out []field
	tests := arc.TestOutputs(expected)
	for _, k := range slices.Sorted(maps.Keys(m)) {
		out = append(out, field{k, valueHTML(m[k], wantsFor(k, expected, tests))})
	}
	return out
}

// valueHTML draws the grids of a value (arc.Grids: each against its
// test input's expected grid in wants), and shows anything else as text,
// folded when long.
func valueHTML(v any, wants [][][]int) template.HTML {
	if drawn, ok := arc.Grids(v, wants); ok {
		return GridsHTML(drawn)
	}
	full := jsonvalue.Text(v)
	if v == nil {
		full = "null"
	}
	d := struct {
		Grid        template.HTML
		Folded      bool
		Short, Full string
	}{Full: full}
	if line, _, multi := strings.Cut(full, "\n"); multi || len(full) > foldAt {
		d.Folded, d.Short = true, Fold(line, 100)
		if multi {
			d.Short += " …"
		}
	}
	return execute("value", d)
}

// GridsHTML draws grids read by arc.Grids, each captioned with where it
// is and with the cells that differ from its expected grid outlined: the
// report's pictures, which the web UI's run page draws too.
func GridsHTML(drawn []arc.Drawn) template.HTML {
	type grid struct {
		Label string
		SVG   template.HTML
	}
	var gs []grid
	for _, d := range drawn {
		cell := min(gridCell, max(4, gridSide/max(len(d.Grid), len(d.Grid[0]))))
		gs = append(gs, grid{d.Label, arc.GridSVG(d.Grid, d.Want, cell)})
	}
	return execute("grids", gs)
}

// changeHTML is what changed from a to b.
func changeHTML(a, b any) template.HTML {
	ga, aGrid := arc.AsGrid(a)
	gb, bGrid := arc.AsGrid(b)
	switch {
	case aGrid && bGrid:
		return arc.GridSVG(gb, ga, gridCell)
	case jsonvalue.Text(a) == jsonvalue.Text(b):
		return template.HTML(`<span class="none">same</span>`)
	}
	return execute("diff", DiffText(jsonvalue.Text(a), jsonvalue.Text(b)))
}

func execute(name string, data any) template.HTML {
	var b strings.Builder
	if err := itemTemplates.ExecuteTemplate(&b, name, data); err != nil {
		// The templates are fixed and their data typed: an error here is
		// a bug, shown where the fragment would be.
		return template.HTML(template.HTMLEscapeString("(" + err.Error() + ")"))
	}
	return template.HTML(b.String())
}
