package batch

import (
	"testing"

	"github.com/flowrun/flowrun/dsl"
)

// TestJUnitFailureSaysWhatWasExpected: a failing item's JUnit message is
// what it gave against what the dataset expected, by the comparisons its
// primary metric makes, else its outputs beside the fields its metrics
// read, and its scores only when neither was read.
func TestJUnitFailureSaysWhatWasExpected(t *testing.T) {
	expects := map[string][]dsl.Expectation{"exact": {{Output: "label", Item: "expected"}, {Output: "team", Item: "team"}}}
	for _, c := range []struct {
		name    string
		expects map[string][]dsl.Expectation
		row     Row
		want    string
	}{
		{"compared", expects, Row{Outputs: map[string]any{"label": "billing", "team": "a"}, Expected: map[string]any{"expected": "account", "team": "a"}},
			"label: billing, expected: account"},
		{"two differ", expects, Row{Outputs: map[string]any{"label": "billing", "team": "b"}, Expected: map[string]any{"expected": "account", "team": "a"}},
			"label: billing, expected: account; team: b, expected: a"},
		{"not compared", nil, Row{Outputs: map[string]any{"label": "billing"}, Expected: map[string]any{"expected": "account"}, Scores: map[string]any{"exact": false}},
			"exact failed: got label: billing; expected expected: account"},
		{"nothing read", expects, Row{Scores: map[string]any{"exact": false, "routed": false}},
			"exact failed: exact=false routed=false"},
	} {
		s := &Summary{Primary: "exact", expects: c.expects}
		if got := s.missed(c.row); got != c.want {
			t.Errorf("%s: %q, want %q", c.name, got, c.want)
		}
	}
}
