package batch

import (
	"strings"
	"testing"

	"github.com/flowrun/flowrun/runtime"
)

// TestFilter checks each filter alone and together.
func TestFilter(t *testing.T) {
	yes, no := true, false
	rows := []Row{
		{Key: "a", Status: runtime.StatusCompleted, Pass: &yes, Scores: map[string]any{"exact": true}, Outputs: map[string]any{"answer": "Paris"}},
		{Key: "b", Status: runtime.StatusCompleted, Pass: &no, Scores: map[string]any{"exact": false}, Outputs: map[string]any{"answer": "Lyon"},
			Reasoning: map[string]string{"reason": "wrong city"}},
		{Key: "c", Status: runtime.StatusFailed, Pass: &no, Class: "model_error", Error: "the model answered 500", Flaky: true},
	}
	s := &Summary{Rows: rows}
	for _, c := range []struct {
		f    Filter
		want string
	}{
		{Filter{}, "a,b,c"},
		{Filter{Show: "failures"}, "b,c"},
		{Filter{Show: "flaky"}, "c"},
		{Filter{Metric: "exact"}, "b"},
		{Filter{Class: "model_error"}, "c"},
		{Filter{Text: "PARIS"}, "a"},
		{Filter{Text: "wrong city"}, "b"},
		{Filter{Show: "failures", Text: "500"}, "c"},
		{Filter{Show: "failures", Metric: "exact", Class: "model_error"}, ""},
	} {
		var keys []string
		for _, r := range c.f.Rows(s) {
			keys = append(keys, r.Key)
		}
		if got := strings.Join(keys, ","); got != c.want {
			t.Errorf("%+v: %s, want %s", c.f, got, c.want)
		}
	}
	ps := []Pair{{Key: "a", Outcome: Fixed, B: rows[0]}, {Key: "b", Outcome: Broken, B: rows[1]}}
	if got := (Filter{Show: Broken}).Pairs(ps); len(got) != 1 || got[0].Key != "b" {
		t.Errorf("broken pairs %+v", got)
	}
}
