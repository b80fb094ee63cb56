package batch

import (
	"context"
	"errors"
	"math"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/flowrun/flowrun/batch/batchtest"
	"github.com/flowrun/flowrun/store"
)

func near(a, b float64) bool { return math.Abs(a-b) < 1e-9 }

// TestWilson checks the 95% Wilson score interval against values worked
// by hand (and published tables): 8/10 is [0.4902, 0.9433].
func TestWilson(t *testing.T) {
	for _, c := range []struct {
		k, n      int
		low, high float64
	}{
		{8, 10, 0.490162, 0.943318},
		{0, 10, 0, 0.277533},
		{10, 10, 0.722467, 1},
		{50, 100, 0.403831, 0.596169},
		{1, 1, 0.206549, 1},
	} {
		r := Wilson(c.k, c.n)
		if math.Abs(r.Low-c.low) > 1e-6 || math.Abs(r.High-c.high) > 1e-6 || !near(r.Rate, float64(c.k)/float64(c.n)) {
			t.Errorf("Wilson(%d, %d) = [%.6f, %.6f] rate %.4f, want [%.6f, %.6f]", c.k, c.n, r.Low, r.High, r.Rate, c.low, c.high)
		}
	}
	if r := Wilson(0, 0); r.Low != 0 || r.High != 1 || r.Rate != 0 {
		t.Errorf("no trials: %+v, want the whole of [0, 1]", r)
	}
}

func TestPercentile(t *testing.T) {
	v := []float64{10, 20, 30, 40}
	for _, c := range []struct{ p, want float64 }{{0, 10}, {50, 25}, {95, 38.5}, {100, 40}} {
		if got := Percentile(v, c.p); !near(got, c.want) {
			t.Errorf("p%.0f of %v = %v, want %v", c.p, v, got, c.want)
		}
	}
	if Percentile(nil, 50) != 0 || Percentile([]float64{7}, 95) != 7 {
		t.Error("percentile of no values or one value")
	}
}

// TestSummaryFigures checks every figure of a batch's summary against
// ones worked out by hand from the fixture: 6 passed, 2 failed their
// metric, 1 run failed, 1 item still pending.
func TestSummaryFigures(t *testing.T) {
	ctx := context.Background()
	st := batchtest.OpenStore(t)
	b := batchtest.Record(t, st, "b20261122T100000-aaaa", batchtest.Keys("t", 10), "PPPPPPFFE.", 1, "")
	s, err := Summarize(ctx, st, b)
	if err != nil {
		t.Fatal(err)
	}
	want := Counts{Total: 10, Completed: 8, Failed: 1, Pending: 1}
	if s.Items != want || s.Items.Done() != 9 {
		t.Errorf("items %+v, want %+v", s.Items, want)
	}
	// Rates are over the 9 items that finished: the pending one has no result yet.
	if s.Primary != "solved" || s.PassRate == nil || *s.PassRate != Wilson(6, 9) {
		t.Fatalf("pass rate %q %+v, want solved 6/9", s.Primary, s.PassRate)
	}
	if len(s.Metrics) != 3 || s.Metrics[0].Name != "solved" || !s.Metrics[0].Primary || s.Metrics[1].Name != "exact" || s.Metrics[2].Name != "steps" {
		t.Fatalf("metrics %+v, want solved, exact, steps in declaration order", s.Metrics)
	}
	if exact := s.Metrics[1]; exact.Kind != "rate" || *exact.Rate != Wilson(4, 9) {
		t.Errorf("exact %+v, want a rate of 4/9 (even items that completed, over the items that finished)", exact)
	}
	if steps := s.Metrics[2]; steps.Kind != "mean" || !near(steps.Mean, 4.5) || steps.N != 8 {
		t.Errorf("steps %+v, want a mean of 4.5 over 8 items", steps)
	}
	if !near(s.CostUSD, 0.045) || !near(s.CostPerItem, 0.005) || s.Tokens != 4500 {
		t.Errorf("cost %v (per item %v), tokens %d; want 0.045, 0.005, 4500", s.CostUSD, s.CostPerItem, s.Tokens)
	}
	if !near(s.P50MS, 500) || !near(s.P95MS, 860) {
		t.Errorf("latency p50 %v p95 %v, want 500 and 860", s.P50MS, s.P95MS)
	}
	if len(s.Failures) != 1 || s.Failures[0].Class != "model_error" || s.Failures[0].Count != 1 || s.Failures[0].Keys[0] != "t09" {
		t.Errorf("failures %+v, want one model_error (t09)", s.Failures)
	}
	var slow, costly []string
	for i := range s.Slowest {
		slow = append(slow, s.Slowest[i].Key)
		costly = append(costly, s.Costliest[i].Key)
	}
	if strings.Join(slow, " ") != "t09 t08 t07 t06 t05" || strings.Join(costly, " ") != "t09 t08 t07 t06 t05" {
		t.Errorf("slowest %v, most expensive %v", slow, costly)
	}
	if len(s.Rows) != 10 || s.Rows[9].Status != "pending" || *s.Rows[9].Pass || !*s.Rows[0].Pass || *s.Rows[8].Pass || s.Rows[0].Run == "" {
		t.Errorf("rows %+v", s.Rows)
	}
}

// TestSummaryWithoutDeclaredMetrics: a batch recorded without its metric
// names takes them from its items, and "pass" is the primary.
func TestSummaryWithoutDeclaredMetrics(t *testing.T) {
	st := batchtest.OpenStore(t)
	b := batchtest.Record(t, st, "b20261122T100000-bbbb", batchtest.Keys("t", 3), "PFE", 1, "")
	b.Settings = []byte(`{}`)
	items, err := st.BatchItems(context.Background(), b.ID)
	if err != nil {
		t.Fatal(err)
	}
	s := SummarizeItems(b, items)
	if s.Primary != "exact" || len(s.Metrics) != 3 || s.Metrics[0].Name != "exact" {
		t.Fatalf("primary %q metrics %+v: want the first boolean in name order", s.Primary, s.Metrics)
	}
	items[0].Scores["pass"] = true
	if s := SummarizeItems(b, items); s.Primary != "pass" || *s.PassRate != Wilson(1, 3) {
		t.Fatalf("primary %q %+v: a metric named pass is the primary", s.Primary, s.PassRate)
	}
}

// TestFindBatch checks how commands name a batch: last, a prefix, and an
// ambiguous prefix as its own error.
func TestFindBatch(t *testing.T) {
	ctx := context.Background()
	st := batchtest.OpenStore(t)
	if _, err := st.FindBatch(ctx, "last"); err == nil || !strings.Contains(err.Error(), "no batch") {
		t.Errorf("last with no batch: %v", err)
	}
	batchtest.Record(t, st, "b20261122T100000-aaaa", batchtest.Keys("t", 1), "P", 1, "")
	batchtest.Record(t, st, "b20261122T110000-bbbb", batchtest.Keys("t", 1), "F", 1, "")
	if b, err := st.FindBatch(ctx, "last"); err != nil || b.ID != "b20261122T110000-bbbb" {
		t.Errorf("last: %v, %v", b, err)
	}
	if b, err := st.FindBatch(ctx, "b20261122T10"); err != nil || b.ID != "b20261122T100000-aaaa" {
		t.Errorf("prefix: %v, %v", b, err)
	}
	var ambiguous *store.AmbiguousError
	if _, err := st.FindBatch(ctx, "b2026"); !errors.As(err, &ambiguous) || !strings.Contains(err.Error(), "ambiguous") {
		t.Errorf("ambiguous prefix: %v", err)
	}
}

// TestGateApply checks flowrun batch's gate: the JUnit report is written
// whenever asked for, the pass-rate floor is checked only on a batch that
// completed, and a gate asking nothing reads nothing.
func TestGateApply(t *testing.T) {
	ctx := context.Background()
	st := batchtest.OpenStore(t)
	b := batchtest.Record(t, st, "b20261126T120000-aaaa", batchtest.Keys("t", 4), "PPFF", 1, "")
	junit := filepath.Join(t.TempDir(), "report.xml")
	for _, c := range []struct {
		name      string
		gate      Gate
		id        string
		completed bool
		junit     string
		failed    bool
	}{
		{name: "nothing asked", gate: Gate{FailUnder: -1}, id: "no such batch", completed: true},
		{name: "under the floor", gate: Gate{FailUnder: 0.75, JUnit: junit}, id: b.ID, completed: true, junit: junit, failed: true},
		{name: "at the floor", gate: Gate{FailUnder: 0.5}, id: b.ID, completed: true},
		{name: "not completed", gate: Gate{FailUnder: 0.75}, id: b.ID},
	} {
		t.Run(c.name, func(t *testing.T) {
			res, err := c.gate.Apply(ctx, st, c.id, c.completed)
			if err != nil {
				t.Fatal(err)
			}
			if res.JUnit != c.junit || (res.Failed != nil) != c.failed {
				t.Fatalf("result %+v, want junit %q, failed %v", res, c.junit, c.failed)
			}
			if c.failed && !strings.Contains(res.Failed.Error(), "pass rate 50.0% (2/4, solved) is below 75.0%") {
				t.Errorf("failure %q", res.Failed)
			}
		})
	}
	xml, err := os.ReadFile(junit)
	if err != nil || !strings.Contains(string(xml), `tests="4"`) {
		t.Errorf("JUnit report: %v\n%s", err, xml)
	}
	if _, err := (Gate{FailUnder: -1, JUnit: junit}).Apply(ctx, st, "no such batch", true); err == nil {
		t.Error("a gate over a batch the store does not have passed")
	}
}
