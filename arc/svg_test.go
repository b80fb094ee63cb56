package arc

import (
	"strings"
	"testing"

	"github.com/flowrun/flowrun/jsonvalue"
)

func TestAsGrid(t *testing.T) {
	for _, tc := range []struct {
		json string
		ok   bool
	}{
		{`[[0,1],[2,3]]`, true},
		{`[[9]]`, true},
		{`[]`, false},
		{`[[]]`, false},
		{`[[0,1],[2]]`, false},
		{`[[0,10]]`, false},
		{`[[0,-1]]`, false},
		{`[[0.5]]`, false},
		{`[["1"]]`, false},
		{`[1,2]`, false},
		{`"grid"`, false},
	} {
		v, err := jsonvalue.Decode([]byte(tc.json))
		if err != nil {
			t.Fatal(err)
		}
		if _, ok := AsGrid(v); ok != tc.ok {
			t.Errorf("AsGrid(%s) = %v, want %v", tc.json, ok, tc.ok)
		}
	}
}

func TestGridSVGMarksDifferences(t *testing.T) {
	got := string(GridSVG([][]int{{0, 1}, {2, 3}}, [][]int{{0, 1}, {2, 4}}, 10))
	if n := strings.Count(got, `stroke-dasharray`); n != 1 {
		t.Errorf("%d cells marked, want 1:\n%s", n, got)
	}
	if !strings.Contains(got, "1 cell differs") || !strings.Contains(got, `fill="#2ecc40"`) {
		t.Errorf("title or palette wrong:\n%s", got)
	}
	if other := string(GridSVG([][]int{{0}}, [][]int{{0, 1}}, 10)); !strings.Contains(other, "expected 1x2") {
		t.Errorf("a grid of another shape: %s", other)
	}
}

// TestAgainstNote: a grid's note against the expected one names another
// shape, counts the cells that differ, or says it is as expected.
func TestAgainstNote(t *testing.T) {
	g := [][]int{{1, 2}, {3, 4}}
	for _, c := range []struct {
		against [][]int
		want    string
	}{
		{nil, ""},
		{[][]int{{1, 2, 3}}, ", expected 1x3"},
		{[][]int{{1, 2}, {3, 4}}, ", as expected"},
		{[][]int{{1, 0}, {0, 4}}, ", 2 cells differ from the expected"},
	} {
		if got := AgainstNote(g, c.against); got != c.want {
			t.Errorf("against %v: %q, want %q", c.against, got, c.want)
		}
	}
}
