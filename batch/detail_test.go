package batch

import (
	"context"
	"fmt"
	"math"
	"testing"

	"github.com/flowrun/flowrun/batch/batchtest"
	"github.com/flowrun/flowrun/runtime"
	"github.com/flowrun/flowrun/store"
)

// TestCohensKappaTextbook is the worked example of Cohen's kappa (two
// readers, 50 proposals: 20 both yes, 15 both no, 5 and 10 split):
// po = 0.7, pe = 0.5, kappa = 0.4. Raters who each give one verdict to
// every item have no kappa.
func TestCohensKappaTextbook(t *testing.T) {
	var a, b []bool
	add := func(n int, x, y bool) {
		for range n {
			a, b = append(a, x), append(b, y)
		}
	}
	add(20, true, true)
	add(5, true, false)
	add(10, false, true)
	add(15, false, false)
	if k, ok := CohensKappa(a, b); !ok || math.Abs(k-0.4) > 1e-12 {
		t.Errorf("kappa %v, %v; want 0.4", k, ok)
	}
	if k, ok := CohensKappa([]bool{true, false, true}, []bool{true, false, true}); !ok || k != 1 {
		t.Errorf("perfect agreement: kappa %v, %v", k, ok)
	}
	if _, ok := CohensKappa([]bool{true, true}, []bool{true, true}); ok {
		t.Error("kappa of raters who both pass everything must be undefined")
	}
	if _, ok := CohensKappa(nil, nil); ok {
		t.Error("kappa of no items must be undefined")
	}
}

// TestHumanRatingsAreAMetric rates items of a recorded batch: the human
// metric is a rate over the rated items (a failed item may be passed),
// each rated row carries its note, and the agreement with every boolean
// metric is over the items rated.
func TestHumanRatingsAreAMetric(t *testing.T) {
	ctx := context.Background()
	st := batchtest.OpenStore(t)
	b := batchtest.Record(t, st, "b20261122T100000-aaaa", batchtest.Keys("t", 6), "PPFFEP", 1, "")
	// solved: P P F F E P; exact is true for t01, t03, t05.
	for key, pass := range map[string]bool{"t01": true, "t02": true, "t03": false, "t04": true, "t05": true} {
		if err := st.Rate(ctx, &store.Rating{Batch: b.ID, Key: key, Pass: pass, Note: "looked at " + key}); err != nil {
			t.Fatal(err)
		}
	}
	s, err := Summarize(ctx, st, b)
	if err != nil {
		t.Fatal(err)
	}
	var human *Metric
	for i := range s.Metrics {
		if s.Metrics[i].Name == HumanMetric {
			human = &s.Metrics[i]
		}
	}
	if human == nil || human.Rate == nil || *human.Rate != Wilson(4, 5) || human.Primary {
		t.Fatalf("human metric %+v: want 4 of the 5 rated items, not the primary", human)
	}
	if s.Rows[3].Scores[HumanMetric] != true || s.Rows[3].Note != "looked at t04" || s.Rows[5].Scores[HumanMetric] != nil {
		t.Errorf("rows: %+v / %+v", s.Rows[3], s.Rows[5])
	}
	// Over t01-t04 (t05 failed, so has no solved score): human T T F T,
	// solved T T F F: agree 3 of 4. po = .75, pe = .75*.5 + .25*.5 = .5.
	got := fmt.Sprintf("%+v", s.Agreement)
	want := fmt.Sprintf("%+v", []Agreement{{Metric: "solved", N: 4, Agree: 3, Kappa: 0.5, Defined: true},
		{Metric: "exact", N: 4, Agree: 1, Kappa: -0.5, Defined: true}})
	if got != want {
		t.Errorf("agreement\n got %s\nwant %s", got, want)
	}
}

// TestReadDetails checks that each row gets its run's inputs and outputs
// and, for a batch that did not record which fields its metrics read,
// the item fields the run did not take as inputs as its expected value.
func TestReadDetails(t *testing.T) {
	ctx := context.Background()
	st := batchtest.OpenStore(t)
	b := batchtest.Record(t, st, "b20261122T100000-aaaa", batchtest.Keys("t", 3), "PF.", 1, "")
	s, err := Summarize(ctx, st, b)
	if err != nil {
		t.Fatal(err)
	}
	if err := s.ReadDetails(ctx, st); err != nil {
		t.Fatal(err)
	}
	r := s.Rows[1]
	if r.Inputs["task"] != "t02" || r.Outputs["answer"] != "The answer is t02" || fmt.Sprint(r.Expected) != "map[expected:1 id:t02]" {
		t.Errorf("row %+v", r)
	}
	if s.Rows[2].Inputs != nil || s.Rows[2].Outputs != nil {
		t.Errorf("a pending item has no run: %+v", s.Rows[2])
	}
	b.Settings = []byte(`{"metrics": ["solved"], "primary": "solved", "expected": ["expected"]}`)
	s, _ = Summarize(ctx, st, b)
	if fmt.Sprint(s.Rows[1].Expected) != "map[expected:1]" {
		t.Errorf("expected %v: want the fields the metrics read", s.Rows[1].Expected)
	}
}

// TestFlakyRows: an item run more than once whose runs disagree on the
// primary metric is flaky; one whose runs agree is not.
func TestFlakyRows(t *testing.T) {
	b := &store.Batch{ID: "b1", Settings: []byte(`{"metrics": ["pass"], "primary": "pass"}`)}
	item := func(key string, pass bool) *store.BatchItem {
		return &store.BatchItem{Key: key, Status: runtime.StatusCompleted, Scores: map[string]any{"pass": pass}}
	}
	s := SummarizeItems(b, []*store.BatchItem{item("a", true), item("a", false), item("b", true), item("b", true)})
	if !s.Repeated || !s.Rows[0].Flaky || !s.Rows[1].Flaky || s.Rows[2].Flaky {
		t.Errorf("repeated %v, rows %+v", s.Repeated, s.Rows)
	}
	if s := SummarizeItems(b, []*store.BatchItem{item("a", true), item("b", false)}); s.Repeated {
		t.Error("items run once are not repeated")
	}
}
