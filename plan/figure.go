package plan

import (
	"encoding/json"
	"fmt"
	"math"
	"slices"
	"strconv"
	"strings"
)

// Figure bounds one quantity: a sum of products of numbers and the
// expressions they multiply (`3 × inputs.generations`), with its value
// when every expression in it could be evaluated. An unbounded figure
// has neither; the plan's Unbounded list says why.
type Figure struct {
	terms     []term
	value     float64
	known     bool
	unbounded bool
}

// term is coef × the product of its factors (expression sources, sorted).
type term struct {
	coef    float64
	factors []string
}

// Num is the figure of a number.
func Num(v float64) Figure {
	f := Figure{value: v, known: true}
	if v != 0 {
		f.terms = []term{{coef: v}}
	}
	return f
}

// Sym is the figure of an expression: its source, and its value when known.
func Sym(src string, v float64, known bool) Figure {
	return Figure{terms: []term{{coef: 1, factors: []string{src}}}, value: v, known: known}
}

// Unbounded is the figure of a quantity nothing bounds.
func Unbounded() Figure { return Figure{unbounded: true} }

// Value is the figure's value; ok is false when it is unbounded or reads
// an expression that could not be evaluated.
func (f Figure) Value() (v float64, ok bool) { return f.value, f.known && !f.unbounded }

// IsUnbounded reports a figure nothing bounds.
func (f Figure) IsUnbounded() bool { return f.unbounded }

// IsZero reports a figure that is certainly 0.
func (f Figure) IsZero() bool { return !f.unbounded && len(f.terms) == 0 }

// Plus is f + g.
func (f Figure) Plus(g Figure) Figure {
	if f.unbounded || g.unbounded {
		return Unbounded()
	}
	out := Figure{value: f.value + g.value, known: f.known && g.known}
	out.terms = slices.Clone(f.terms)
	for _, t := range g.terms {
		out.terms = addTerm(out.terms, t)
	}
	return out
}

// Times is f × g. Zero times anything, even an unbounded figure, is zero:
// a node that never runs costs nothing.
func (f Figure) Times(g Figure) Figure {
	if f.IsZero() || g.IsZero() {
		return Num(0)
	}
	if f.unbounded || g.unbounded {
		return Unbounded()
	}
	out := Figure{value: f.value * g.value, known: f.known && g.known}
	for _, a := range f.terms {
		for _, b := range g.terms {
			factors := append(slices.Clone(a.factors), b.factors...)
			slices.Sort(factors)
			out.terms = addTerm(out.terms, term{coef: a.coef * b.coef, factors: factors})
		}
	}
	return out
}

// renamed is f with every factor passed through name.
func (f Figure) renamed(name func(string) string) Figure {
	out := f
	out.terms = make([]term, len(f.terms))
	for i, t := range f.terms {
		factors := make([]string, len(t.factors))
		for j, x := range t.factors {
			factors[j] = name(x)
		}
		slices.Sort(factors)
		out.terms[i] = term{coef: t.coef, factors: factors}
	}
	return out
}

func (t Totals) renamed(name func(string) string) Totals {
	return Totals{t.Calls.renamed(name), t.OutputTokens.renamed(name), t.InputTokens.renamed(name), t.USD.renamed(name),
		t.SandboxRuns.renamed(name), t.ToolCalls.renamed(name), t.WallSeconds.renamed(name)}
}

func addTerm(ts []term, t term) []term {
	for i := range ts {
		if slices.Equal(ts[i].factors, t.factors) {
			ts[i].coef += t.coef
			return ts
		}
	}
	return append(ts, t)
}

// Expr is the expression that bounds the figure: "∞" when nothing does.
func (f Figure) Expr() string {
	switch {
	case f.unbounded:
		return "∞"
	case len(f.terms) == 0:
		return "0"
	}
	parts := make([]string, len(f.terms))
	for i, t := range f.terms {
		var fs []string
		if t.coef != 1 || len(t.factors) == 0 {
			fs = append(fs, number(t.coef))
		}
		for _, x := range t.factors {
			if strings.ContainsAny(x, " +-*/?") {
				x = "(" + x + ")"
			}
			fs = append(fs, x)
		}
		parts[i] = strings.Join(fs, " × ")
	}
	return strings.Join(parts, " + ")
}

// Symbolic reports a figure that reads an expression: its Expr says more
// than its value.
func (f Figure) Symbolic() bool {
	for _, t := range f.terms {
		if len(t.factors) > 0 {
			return true
		}
	}
	return false
}

// Text is the figure's value as a table shows it: "∞" unbounded, "?"
// when an expression in it could not be evaluated.
func (f Figure) Text() string {
	switch {
	case f.unbounded:
		return "∞"
	case !f.known:
		return "?"
	}
	if f.value >= 1e6 {
		// Rounded up: a bound shown smaller than it is would not be one.
		return strconv.FormatFloat(math.Ceil(f.value/1e5)/10, 'f', -1, 64) + "M"
	}
	return number(f.value)
}

// USD is Text for money.
func (f Figure) USD() string {
	if v, ok := f.Value(); ok {
		return fmt.Sprintf("$%.4f", max(math.Ceil(v*1e4-1e-9)/1e4, 0))
	}
	return f.Text()
}

// number writes v with at most 4 significant digits, rounded up: a
// bound written smaller than it is would not be one.
func number(v float64) string {
	if v == math.Trunc(v) && math.Abs(v) < 1e15 {
		return strconv.FormatFloat(v, 'f', -1, 64)
	}
	return strconv.FormatFloat(roundUp(v, 4), 'g', 4, 64)
}

func roundUp(v float64, digits int) float64 {
	if v <= 0 {
		return v
	}
	scale := math.Pow(10, float64(digits)-math.Ceil(math.Log10(v)))
	return math.Ceil(v*scale-1e-9) / scale
}

// MarshalJSON writes {"value", "bound"}: value null when unbounded or
// not evaluated.
func (f Figure) MarshalJSON() ([]byte, error) {
	var v *float64
	if x, ok := f.Value(); ok {
		v = &x
	}
	return json.Marshal(struct {
		Value     *float64 `json:"value"`
		Bound     string   `json:"bound"`
		Unbounded bool     `json:"unbounded,omitempty"`
	}{v, f.Expr(), f.unbounded})
}
