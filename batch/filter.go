package batch

import (
	"strings"

	"github.com/flowrun/flowrun/jsonvalue"
)

// Filter picks items as a view's filters do; its zero value keeps all.
type Filter struct {
	Show   string // "" (all), "failures", "flaky", or in a comparison "fixed" or "broken"
	Metric string // items that fail this boolean metric
	Class  string // items that ended with this error class
	Text   string // items whose key, inputs, outputs, reasoning, note or error contain it, in any case
}

// Match says whether a row passes the filter; outcome is its outcome in
// a comparison ("" outside one).
func (f Filter) Match(r Row, outcome string) bool {
	switch f.Show {
	case "failures":
		if !failing(r) {
			return false
		}
	case "flaky":
		if !r.Flaky {
			return false
		}
	case Fixed, Broken:
		if outcome != f.Show {
			return false
		}
	}
	if f.Metric != "" && r.Scores[f.Metric] != false {
		return false
	}
	if f.Class != "" && r.Class != f.Class {
		return false
	}
	if q := strings.ToLower(strings.TrimSpace(f.Text)); q != "" {
		var text strings.Builder
		for _, v := range []any{r.Key, r.Inputs, r.Outputs, r.Reasoning, r.Note, r.Error} {
			text.WriteString(jsonvalue.Text(v))
			text.WriteByte('\n')
		}
		if !strings.Contains(strings.ToLower(text.String()), q) {
			return false
		}
	}
	return true
}

// Rows are the summary's rows the filter keeps.
func (f Filter) Rows(s *Summary) []Row {
	var out []Row
	for _, r := range s.Rows {
		if f.Match(r, "") {
			out = append(out, r)
		}
	}
	return out
}

// Pairs are the pairs the filter keeps, matched on B's row.
func (f Filter) Pairs(ps []Pair) []Pair {
	var out []Pair
	for _, p := range ps {
		if f.Match(p.B, p.Outcome) || f.Text != "" && f.Match(p.A, p.Outcome) {
			out = append(out, p)
		}
	}
	return out
}
