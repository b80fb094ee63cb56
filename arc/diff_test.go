package arc

import (
	"strings"
	"testing"
)

func TestDiff(t *testing.T) {
	g := func(rows ...any) []any { return rows }
	r := func(c ...any) []any { return c }
	for _, c := range []struct {
		name             string
		expected, actual any
		want             string
	}{
		{"equal", g(r(1, 2), r(3, 4)), g(r(1, 2), r(3.0, 4)), "the grids are equal"},
		{"cells off, columns aligned", g(r(1, 2, 3), r(4, 5, 6)), g(r(1, 0, 3), r(4, 5, 10)),
			"2 of 6 cells differ (expected/got; . where they agree):\n.    2/0  .\n.    .    6/10"},
		{"nothing produced", g(r(1, 2)), nil, "no grid was produced (expected 1x2)"},
		{"wrong size, shared cells differ", g(r(1, 2), r(3, 4)), g(r(1, 9, 9)),
			"wrong size: expected 2x2, got 1x3; over the cells both have, 1 of 2 cells differ (expected/got; . where they agree):\n.   2/9"},
		{"wrong size, shared cells agree", g(r(1, 2), r(3, 4)), g(r(1, 2)),
			"wrong size: expected 2x2, got 1x2; over the cells both have, all 2 agree"},
	} {
		got, err := Diff(c.expected, c.actual)
		if err != nil || got != c.want {
			t.Errorf("%s: Diff = %q, %v\nwant %q", c.name, got, err, c.want)
		}
	}
}

func TestDiffRefusesWhatIsNotAGrid(t *testing.T) {
	for _, c := range []struct {
		expected, actual any
		want             string
	}{
		{"1 2", []any{[]any{1}}, `grid_diff: expected grid: the string "1 2", not a list of rows`},
		{[]any{[]any{1}}, []any{[]any{"x"}}, `grid_diff: actual grid: cell [0][0] as the string "x"`},
		{[]any{[]any{1}}, []any{[]any{1.5}}, "grid_diff: actual grid: cell [0][0] = 1.5, not an integer"},
	} {
		_, err := Diff(c.expected, c.actual)
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("Diff(%#v, %#v) error = %v; want it to say %q", c.expected, c.actual, err, c.want)
		}
	}
}
