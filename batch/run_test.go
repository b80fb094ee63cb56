package batch

import (
	"context"
	"fmt"
	"maps"
	"math"
	"path/filepath"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/flowrun/flowrun/batch/batchtest"
	"github.com/flowrun/flowrun/dsl"
	"github.com/flowrun/flowrun/engine"
	"github.com/flowrun/flowrun/runtime"
	"github.com/flowrun/flowrun/sandbox/sandboxtest"
	"github.com/flowrun/flowrun/store"
)

// qaLines are n dataset lines asking qI and expecting AI.
func qaLines(n int) []string {
	var lines []string
	for i := 1; i <= n; i++ {
		lines = append(lines, fmt.Sprintf(`{"question": "q%d", "expected": "A%d"}`, i, i))
	}
	return lines
}

// qaBatch writes the qa pipeline (with model settings extra) and a
// dataset of lines into a new directory.
func qaBatch(t *testing.T, extra string, lines []string) (pipeline, dataset string) {
	dir := t.TempDir()
	return write(t, dir, "qa.yaml", fmt.Sprintf(batchtest.QAPipeline, extra)), write(t, dir, "qa.jsonl", strings.Join(lines, "\n")+"\n")
}

// qaEnv points a model client at model's server.
func qaEnv(model *batchtest.QAModel) func(string) (string, bool) {
	return model.Server.Env("sk-batch-test")
}

// rows are the batch's items as the store holds them.
func rows(t *testing.T, st *store.Store, b *store.Batch) []*store.BatchItem {
	t.Helper()
	items, err := st.BatchItems(context.Background(), b.ID)
	if err != nil {
		t.Fatal(err)
	}
	return items
}

// spent is the cost of the batch's items and how many completed.
func spent(t *testing.T, st *store.Store, b *store.Batch) (cost float64, completed int) {
	t.Helper()
	return batchtest.Spent(rows(t, st, b))
}

// TestRunScoresEveryItemAndKeepsBadLines: a batch over a JSONL file
// with good items, a malformed line, a line missing the input's field
// and an item whose run fails gives every item one result, the bad
// lines failed with class dataset and no run, the figures exact, each
// good question asked once; resuming the finished batch asks nothing
// again. (The behaviour of cmd/flowrun's
// TestBatchScoresEveryItemAndNamesBadLines, which keeps what it prints.)
func TestRunScoresEveryItemAndKeepsBadLines(t *testing.T) {
	st := batchtest.OpenStore(t)
	pipeline, dataset := qaBatch(t, "", batchtest.QAMixedLines())
	model := batchtest.NewQAModel(t, 0)
	b, status := startBatch(t, st, pipeline, dataset, Settings{Concurrency: 3}, qaEnv(model))
	if status != runtime.StatusCompleted {
		t.Fatalf("status %s", status)
	}
	items := rows(t, st, b)
	if len(items) != 11 {
		t.Fatalf("%d items, want 11", len(items))
	}
	for i, it := range items {
		if want := fmt.Sprintf("line %d", i+1); it.Key != want || it.Index != i {
			t.Errorf("item %d: key %q index %d, want %q", i, it.Key, it.Index, want)
		}
		switch {
		case i < 8:
			if it.Status != runtime.StatusCompleted || it.Run == "" || it.Tokens != 120 || math.Abs(it.CostUSD-0.14) > 1e-9 || it.Scores["exact"] != (i%2 == 0) {
				t.Errorf("item %d: %+v", i, it)
			}
		case i == 8:
			if it.Status != runtime.StatusFailed || it.Class != "dataset" || it.Run != "" || !strings.Contains(it.Error, "qa.jsonl:9: not JSON: unexpected EOF") {
				t.Errorf("item %d: %+v", i, it)
			}
		case i == 9:
			if it.Status != runtime.StatusFailed || it.Class != "dataset" || it.Run != "" || !strings.Contains(it.Error, `qa.jsonl:10: no field for the required input "question" (fields: expected)`) {
				t.Errorf("item %d: %+v", i, it)
			}
		default:
			if it.Status != runtime.StatusFailed || it.Run == "" || it.Scores != nil || !strings.Contains(it.Error, "refuses") {
				t.Errorf("item %d: %+v", i, it)
			}
		}
	}
	sum, err := Summarize(context.Background(), st, b)
	if err != nil {
		t.Fatal(err)
	}
	if sum.Items.Completed != 8 || sum.Items.Failed != 3 || math.Abs(sum.CostUSD-1.12) > 1e-9 || sum.Tokens != 960 ||
		sum.PassRate == nil || sum.Primary != "exact" || sum.PassRate.Passed != 4 || sum.PassRate.N != 11 {
		t.Fatalf("summary: %+v items, $%v, %d tokens, %s %+v", sum.Items, sum.CostUSD, sum.Tokens, sum.Primary, sum.PassRate)
	}
	asked := model.Requests()
	for i := 1; i <= 8; i++ {
		if q := fmt.Sprintf("Q: q%d", i); asked[q] != 1 {
			t.Errorf("%s asked %d times", q, asked[q])
		}
	}
	if _, status, _ := resume(t, st, b.ID, Overrides{}, qaEnv(model)); status != runtime.StatusCompleted {
		t.Fatalf("resuming the finished batch: %s", status)
	}
	if after := model.Requests(); !maps.Equal(after, asked) {
		t.Fatalf("resuming a finished batch asked the model again: %v, was %v", after, asked)
	}
}

// TestRateLimitIsBatchWide: every run of a batch shares one model
// client, so the model's rpm and max_concurrency hold for the batch as a
// whole however many items run at once. (Was cmd/flowrun's
// TestBatchRateLimitIsBatchWide.)
func TestRateLimitIsBatchWide(t *testing.T) {
	st := batchtest.OpenStore(t)
	const rpm = 600 // one request every 100ms
	pipeline, dataset := qaBatch(t, fmt.Sprintf(", rpm: %d, max_concurrency: 2", rpm), qaLines(12))
	model := batchtest.NewQAModel(t, 30*time.Millisecond)
	b, status := startBatch(t, st, pipeline, dataset, Settings{Concurrency: 8}, qaEnv(model))
	if _, done := spent(t, st, b); status != runtime.StatusCompleted || done != 12 {
		t.Fatalf("%s with %d of 12 items completed", status, done)
	}
	if n := model.Server.MaxInFlight(); n > 2 {
		t.Errorf("%d requests in flight at once; max_concurrency is 2", n)
	}
	var at []time.Time
	for _, r := range model.Server.Requests() {
		at = append(at, r.At)
	}
	sort.Slice(at, func(i, j int) bool { return at[i].Before(at[j]) })
	// rpm 600 spaces starts 100ms apart: a second holds at most 10 of
	// them, 11 with a start delayed onto the window's edge.
	for i := range at {
		n := 0
		for _, t2 := range at[i:] {
			if t2.Sub(at[i]) < time.Second {
				n++
			}
		}
		if n > 11 {
			t.Fatalf("%d requests within a second from request %d; rpm %d allows 10", n, i+1, rpm)
		}
	}
}

// TestMaxCostStopsAndResumeFinishes: a cost cap stops the batch before
// the spend would pass it, the batch ends stopped, held by no process;
// a resume with a higher cap finishes it without asking the model again
// for an item it answered. (The behaviour of cmd/flowrun's
// TestBatchMaxCostStopsAndResumes, which keeps what batch, batch show
// and batch resume print.)
func TestMaxCostStopsAndResumeFinishes(t *testing.T) {
	st := batchtest.OpenStore(t)
	pipeline, dataset := qaBatch(t, "", qaLines(10))
	model := batchtest.NewQAModel(t, 0)
	// One item costs $0.14 and reserves $0.10 of input and an output
	// token before its call is sent: the fourth does not fit in $0.08.
	b, status := startBatch(t, st, pipeline, dataset, Settings{Concurrency: 1, MaxCostUSD: 0.5}, qaEnv(model))
	stopped, err := st.Batch(context.Background(), b.ID)
	if err != nil {
		t.Fatal(err)
	}
	if cost, done := spent(t, st, b); status != runtime.StatusStopped || stopped.Status != runtime.StatusStopped || done != 3 || math.Abs(cost-0.42) > 1e-9 || stopped.PID != 0 ||
		stopped.Reason != "the batch's cost cap of $0.50 reached: $0.42 spent, and the next model call may cost up to $0.102" {
		t.Fatalf("batch %s (%s), $%v on %d items, pid %d", stopped.Status, stopped.Reason, cost, done, stopped.PID)
	}
	higher := 5.0
	if _, status, reason := resume(t, st, b.ID[:10], Overrides{MaxCostUSD: &higher}, qaEnv(model)); status != runtime.StatusCompleted {
		t.Fatalf("resume with a $5 cap: %s (%s)", status, reason)
	}
	if cost, done := spent(t, st, b); done != 10 || math.Abs(cost-1.40) > 1e-9 {
		t.Fatalf("after the resume: $%v on %d items, want $1.40 on 10", cost, done)
	}
	for q, n := range model.Requests() {
		if n != 1 {
			t.Errorf("%q asked %d times", q, n)
		}
	}
}

// TestJudgePipelineAndScoreExpressions: a judge pipeline (score:
// {pipeline: FILE}) runs per completed item with the item, the outputs
// and the run's figures as inputs; its outputs are metrics after the
// expressions, a given NAME=EXPR metric replaces the one of the same
// name, and a metric named pass is the primary. (Was cmd/flowrun's
// TestBatchJudgePipelineAndScoreFlag, which keeps how a bad --score is
// reported.)
func TestJudgePipelineAndScoreExpressions(t *testing.T) {
	st := batchtest.OpenStore(t)
	dir := t.TempDir()
	pipeline := batchtest.WriteJudgedQA(t, dir)
	dataset := write(t, dir, "qa.json", `[{"question": "q1", "expected": "A1"}, {"question": "q2", "expected": "no"}]`)
	model := batchtest.NewQAModel(t, 0)
	scores := []string{"chars=len(outputs.answer) * 10", `pass=outputs.answer == "A1"`}
	b, status := startBatch(t, st, pipeline, dataset, Settings{Score: scores}, qaEnv(model))
	if status != runtime.StatusCompleted {
		t.Fatalf("status %s", status)
	}
	p, ds := dsl.Load(pipeline)
	if p == nil {
		t.Fatal(ds)
	}
	scorer, err := ParseScorer(p, scores)
	if err != nil || fmt.Sprint(scorer.Names()) != "[exact chars pass verdict tokens]" || scorer.Primary != "pass" {
		t.Fatalf("scorer %v primary %q, %v", scorer.Names(), scorer.Primary, err)
	}
	items := rows(t, st, b)
	got := fmt.Sprint(items[0].Scores, items[1].Scores)
	if want := "map[chars:20 exact:true pass:true tokens:120 verdict:true] map[chars:20 exact:false pass:false tokens:120 verdict:false]"; got != want {
		t.Fatalf("scores\n got %s\nwant %s", got, want)
	}
}

// TestCostCapHoldsAtConcurrency8: at concurrency 8 with a cap of five
// items' cost, each call reserves its worst case from the batch's ledger
// before it is sent (these set no max_tokens, so each reserves all that
// is left and they go one at a time): the batch spends no more than the
// cap, where admitting on the spend so far alone would start eight items
// before the first one's cost is known. (Was cmd/flowrun's
// TestBatchCostCapHoldsAtConcurrency8.)
func TestCostCapHoldsAtConcurrency8(t *testing.T) {
	st := batchtest.OpenStore(t)
	pipeline, dataset := qaBatch(t, "", qaLines(24))
	model := batchtest.NewQAModel(t, 50*time.Millisecond)
	const item, limit = 0.14, 5 * 0.14
	b, status := startBatch(t, st, pipeline, dataset, Settings{Concurrency: 8, MaxCostUSD: limit}, qaEnv(model))
	stopped, err := st.Batch(context.Background(), b.ID)
	if err != nil {
		t.Fatal(err)
	}
	if status != runtime.StatusStopped || !strings.Contains(stopped.Reason, "the batch's cost cap of $0.70") {
		t.Fatalf("%s (%s), want stopped by the cap", status, stopped.Reason)
	}
	if cost, done := spent(t, st, b); cost > limit+1e-9 || done < 4 {
		t.Fatalf("$%.4f spent on %d items with a $%.2f cap and $%.2f items", cost, done, limit, item)
	}
}

// TestTrajectoryScoresOfAShippedRun: score expressions read the
// trajectory of a shipped pipeline's run, replayed from its cassette
// with the real sandbox: sir loops twice, the reasoner asks the
// translator once and takes three turns, and no person is asked
// anything. (The behaviour of cmd/flowrun's
// TestBatchTrajectoryScoresSIR, which keeps how a misspelt loop id in
// --score is reported.)
func TestTrajectoryScoresOfAShippedRun(t *testing.T) {
	sandboxtest.NeedPython(t)
	st := batchtest.OpenStore(t)
	pipeline := filepath.Join("..", "pipelines", "sir.yaml")
	eng, err := engine.New(engine.Options{Store: st, Replay: filepath.Join("..", "pipelines", "sir.cassette.yaml"),
		LookupEnv: func(string) (string, bool) { return "", false }})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { eng.Close() })
	dataset := write(t, t.TempDir(), "one.jsonl", `{"id": "default", "expected": "Q2"}`+"\n")
	scores := []string{"revisions=run.iterations.refine",
		`asked=any(run.tool_calls, .tool == "terminate_and_ask_translator" && .ok)`,
		`ocr_args=any(run.tool_calls, .tool == "ocr" && .arguments.region != "")`,
		"reason_turns=run.turns.reason",
		`routed=run.route[0] == "refine" && run.route[len(run.route)-1] == "refine[2]/route"`,
		"questions=len(run.questions)"}
	b, status := runBatch(t, st, pipeline, dataset, Settings{Score: scores}, eng)
	items := rows(t, st, b)
	if status != runtime.StatusCompleted || len(items) != 1 {
		t.Fatalf("%s with %d items", status, len(items))
	}
	want := map[string]any{"revisions": 2, "asked": true, "ocr_args": true, "reason_turns": 3, "routed": true, "questions": 0}
	for name, v := range want {
		if got := items[0].Scores[name]; fmt.Sprint(got) != fmt.Sprint(v) {
			t.Errorf("%s = %v, want %v (scores %v, error %s)", name, got, v, items[0].Scores, items[0].Error)
		}
	}
}
