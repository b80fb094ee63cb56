package batch

import (
	"context"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/flowrun/flowrun/batch/batchtest"
	"github.com/flowrun/flowrun/llm/llmtest"
	"github.com/flowrun/flowrun/runtime"
)

// TestRepeatRunsEachItemNTimes: --repeat 3 gives every item three
// distinct runs, numbered 0-2; a batch stopped by its cost cap and
// resumed runs the remaining repeats (the count is kept), and the
// summary tells the item that always passes from the flaky one.
func TestRepeatRunsEachItemNTimes(t *testing.T) {
	st := batchtest.OpenStore(t)
	pipeline, dataset, _, _ := resumeFixture(t, 2)
	var asked, q2 atomic.Int32
	srv := llmtest.New(t)
	srv.Handle(func(req llmtest.Request) llmtest.Reply {
		asked.Add(1)
		// q1 always answers right; q2 only the first time it is asked.
		if strings.Contains(string(req.Raw), "q2") && q2.Add(1) > 1 {
			return llmtest.Reply{Text: "B", Usage: llmtest.Usage{Prompt: 100}}
		}
		return llmtest.Reply{Text: "A", Usage: llmtest.Usage{Prompt: 100}}
	})
	env := srv.Env("sk-repeat-test")
	s := Settings{Concurrency: 1, MaxCostUSD: 2, Repeat: 3, Metrics: []string{"exact"}, Primary: "exact"}
	b, status := startBatch(t, st, pipeline, dataset, s, env)
	if status != runtime.StatusStopped || asked.Load() != 2 {
		t.Fatalf("the first attempt: %s after %d runs, want stopped by its cap after 2", status, asked.Load())
	}
	higher := 10.0
	res, status, reason := resume(t, st, b.ID, Overrides{MaxCostUSD: &higher}, env)
	if status != runtime.StatusCompleted || res.Settings.Repeat != 3 || asked.Load() != 6 {
		t.Fatalf("resumed: %s (%s), repeat %d, %d runs in all; want completed after 6", status, reason, res.Settings.Repeat, asked.Load())
	}
	rows, err := st.BatchItems(context.Background(), b.ID)
	if err != nil || len(rows) != 6 {
		t.Fatalf("%d rows, %v", len(rows), err)
	}
	runs := map[string]bool{}
	for i, r := range rows {
		if r.Repeat != i%3 || r.Index != i/3 || r.Run == "" || runs[r.Run] {
			t.Fatalf("row %d: item %d repeat %d run %q (runs so far %v)", i, r.Index, r.Repeat, r.Run, runs)
		}
		runs[r.Run] = true
	}
	sum, err := Summarize(context.Background(), st, b)
	if err != nil {
		t.Fatal(err)
	}
	rep := sum.Repeats
	if rep == nil || len(rep.Items) != 2 || rep.AlwaysPass != 1 || rep.Flaky != 1 || rep.AlwaysFail != 0 {
		t.Fatalf("repeats %+v", rep)
	}
	q1, flaky := rep.Items[0], rep.Items[1]
	if q1.Class != AlwaysPass || !q1.PassAll || flaky.Class != Flaky || !flaky.PassAt || flaky.PassAll || flaky.Passed != 1 || flaky.Runs != 3 {
		t.Fatalf("items %+v %+v", q1, flaky)
	}
	if m := rep.Metrics["exact"]; !near(m.Mean, (1+1.0/3)/2) || m.N != 2 {
		t.Fatalf("exact over items: %+v", m)
	}
}

// TestRepeatsReadAsRuns: with --repeat, each row is named by its item
// and run number (line 2#3), counts say runs, the report shows pass@N,
// pass^N and the flaky count as batch show does, and the slowest and
// costliest lists name an item once.
func TestRepeatsReadAsRuns(t *testing.T) {
	st := batchtest.OpenStore(t)
	pipeline, dataset, _, env := resumeFixture(t, 2)
	b, _ := startBatch(t, st, pipeline, dataset, Settings{Concurrency: 1, Repeat: 3, Metrics: []string{"exact"}, Primary: "exact"}, env)
	sum, err := SummarizeDetailed(context.Background(), st, b)
	if err != nil {
		t.Fatal(err)
	}
	if sum.Rows[5].Name != "line 2#3" || sum.Unit() != "runs" || sum.ItemsRun() != 2 {
		t.Errorf("last row %q, unit %s, %d items", sum.Rows[5].Name, sum.Unit(), sum.ItemsRun())
	}
	if r, ok := sum.Row("line 2#3"); !ok || r.Repeat != 2 {
		t.Errorf("the row of run line 2#3: %+v %v", r, ok)
	}
	for _, list := range [][]Row{sum.Costliest, sum.Slowest} {
		if len(list) != 2 || list[0].Key == list[1].Key {
			t.Errorf("a top list names an item more than once: %+v", list)
		}
	}
	var report strings.Builder
	if err := WriteReport(context.Background(), st, &report, b, nil); err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{`<div class="label">Runs</div><div class="value">6/6</div>`, "runs of 2 items", `id="repeats"`,
		`<div class="label">pass@N</div>`, `<div class="label">pass^N</div>`, `<div class="label">Flaky</div>`, `<td class="key">line 2#3`} {
		if !strings.Contains(report.String(), want) {
			t.Errorf("the report lacks %s", want)
		}
	}
}

// TestCompareRepeatsPerItemPassRate: two batches run three times each
// are paired per item on the share of runs that passed.
func TestCompareRepeatsPerItemPassRate(t *testing.T) {
	st := batchtest.OpenStore(t)
	pipeline, dataset, _, env := resumeFixture(t, 2)
	a, _ := startBatch(t, st, pipeline, dataset, Settings{Concurrency: 1, Repeat: 3, Metrics: []string{"exact"}, Primary: "exact"}, env)
	var q2 atomic.Int32
	srv := llmtest.New(t)
	srv.Handle(func(req llmtest.Request) llmtest.Reply {
		if strings.Contains(string(req.Raw), "q2") && q2.Add(1) > 1 {
			return llmtest.Reply{Text: "B"}
		}
		return llmtest.Reply{Text: "A"}
	})
	b, _ := startBatch(t, st, pipeline, dataset, Settings{Concurrency: 1, Repeat: 3, Metrics: []string{"exact"}, Primary: "exact"}, srv.Env("sk-b"))
	c, err := Compare(context.Background(), st, a, b)
	if err != nil {
		t.Fatal(err)
	}
	if c.Matched != 2 || len(c.Broken) != 1 || c.Broken[0].Key != "line 2" || c.SamePass != 1 || len(c.Fixed) != 0 {
		t.Fatalf("matched %d, broken %+v, same passed %d", c.Matched, c.Broken, c.SamePass)
	}
	p := c.Broken[0]
	if p.PassRateA == nil || *p.PassRateA != 1 || !near(*p.PassRateB, 1.0/3) || !near(c.Delta, -1.0/3) {
		t.Fatalf("pair %+v, delta %v", p, c.Delta)
	}
	if c.PassA.N != 6 || c.PassA.Passed != 6 || c.PassB.Passed != 4 {
		t.Fatalf("pass rates over runs: %+v %+v", c.PassA, c.PassB)
	}
}
