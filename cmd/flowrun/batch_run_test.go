package main

import (
	"context"
	"encoding/json"
	"fmt"
	"math"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/flowrun/flowrun/batch"
	"github.com/flowrun/flowrun/batch/batchtest"
	"github.com/flowrun/flowrun/llm/llmtest"
	"github.com/flowrun/flowrun/store"
)

// qaPipeline is the pipeline batch's own tests run: one question per
// item, scored against the item's expected field, at exact prices.
const qaPipeline = batchtest.QAPipeline

// newQAModel starts batchtest's model for qaPipeline, answering after
// delay, and returns it with its server.
func newQAModel(t *testing.T, delay time.Duration) (*batchtest.QAModel, *llmtest.Server) {
	m := batchtest.NewQAModel(t, delay)
	return m, m.Server
}

// batchStore opens a test's store and returns its only batch and items.
func batchStore(t *testing.T, db string) (*store.Batch, []*store.BatchItem) {
	t.Helper()
	st, err := store.Open(db)
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	all, err := st.Batches(context.Background())
	if err != nil || len(all) != 1 {
		t.Fatalf("batches %v %v, want one", all, err)
	}
	items, err := st.BatchItems(context.Background(), all[0].ID)
	if err != nil {
		t.Fatal(err)
	}
	return all[0], items
}

func useModel(t *testing.T, srv *llmtest.Server) {
	t.Setenv("OPENAI_BASE_URL", srv.URL)
	t.Setenv("OPENAI_API_KEY", "sk-batch-test")
}

// A batch over a JSONL file with good items, a malformed line, a line
// missing the input's field and an item whose run fails: each problem is
// reported naming its line, the summary figures are printed exactly, and
// the flags are kept as the batch's settings. What each item's result
// is, and that a resume asks nothing again, is batch's
// TestRunScoresEveryItemAndKeepsBadLines.
func TestBatchScoresEveryItemAndNamesBadLines(t *testing.T) {
	dir := t.TempDir()
	p := writeFile(t, dir, "qa.yaml", fmt.Sprintf(qaPipeline, ""))
	data := writeFile(t, dir, "qa.jsonl", strings.Join(batchtest.QAMixedLines(), "\n")+"\n")
	_, srv := newQAModel(t, 0)
	useModel(t, srv)
	db := filepath.Join(dir, "runs.db")

	code, stdout, stderr := flowrun(t, "batch", p, "--dataset", data, "--store", db, "--concurrency", "3")
	if code != exitOK {
		t.Fatalf("exit %d\n%s\n%s", code, stdout, stderr)
	}
	for _, want := range []string{
		"FAIL line 9", "qa.jsonl:9: not JSON: unexpected EOF",
		"FAIL line 10", `qa.jsonl:10: no field for the required input "question" (fields: expected); map a field of the items to it`,
		"FAIL line 11", "the model refuses this question",
		"completed: 11 items, 8 completed, 3 failed; $1.12, 960 tokens",
		"exact                 36.4%  4/11 (pass rate)",
		"chars                mean 2 over 8 items",
	} {
		if !strings.Contains(stderr, want) {
			t.Errorf("stderr lacks %q:\n%s", want, stderr)
		}
	}
	b, _ := batchStore(t, db)
	if saved, err := batch.SettingsOf(b); err != nil || b.Status != "completed" || saved.Primary != "exact" || fmt.Sprint(saved.Metrics) != "[exact chars]" || saved.Concurrency != 3 {
		t.Fatalf("batch %+v", b)
	}
	// Resuming a finished batch reports it again.
	code, _, stderr = flowrun(t, "batch", "resume", "last", "--store", db)
	if code != exitOK || !strings.Contains(stderr, "completed: 11 items, 8 completed, 3 failed") {
		t.Fatalf("resume: exit %d\n%s", code, stderr)
	}
}

// --json prints one event per finished item and a summary last.
func TestBatchJSONEvents(t *testing.T) {
	dir := t.TempDir()
	p := writeFile(t, dir, "qa.yaml", fmt.Sprintf(qaPipeline, ""))
	data := writeFile(t, dir, "qa.csv", "id,question,expected\nx1,q1,A1\nx2,q2,A3\nx3,q3\n")
	_, srv := newQAModel(t, 0)
	useModel(t, srv)
	code, stdout, stderr := flowrun(t, "batch", p, "--dataset", data, "--store", filepath.Join(dir, "runs.db"), "--json")
	if code != exitOK {
		t.Fatalf("exit %d\n%s", code, stderr)
	}
	var events []map[string]any
	for _, line := range strings.Split(strings.TrimSpace(stdout), "\n") {
		var e map[string]any
		if err := json.Unmarshal([]byte(line), &e); err != nil {
			t.Fatalf("not JSON: %q", line)
		}
		events = append(events, e)
	}
	if len(events) != 4 {
		t.Fatalf("%d events, want 3 items and a summary:\n%s", len(events), stdout)
	}
	keys := map[string]map[string]any{}
	for _, e := range events[:3] {
		if e["type"] != "item_finished" {
			t.Fatalf("event %v", e)
		}
		keys[e["key"].(string)] = e
	}
	if keys["row 3"]["class"] != "dataset" || !strings.Contains(keys["row 3"]["error"].(string), "qa.csv:4 (row 3): 2 fields, but the header has 3 (id, question, expected)") {
		t.Fatalf("row 3: %v", keys)
	}
	if keys["x1"]["scores"].(map[string]any)["exact"] != true || keys["x2"]["scores"].(map[string]any)["exact"] != false {
		t.Fatalf("scores: %v", keys)
	}
	sum := events[3]
	if sum["type"] != "batch_finished" || sum["status"] != "completed" || sum["passed"] != 1.0 || math.Abs(sum["pass_rate"].(float64)-1.0/3) > 1e-9 ||
		math.Abs(sum["cost_usd"].(float64)-0.28) > 1e-9 || sum["failed"] != 1.0 {
		t.Fatalf("summary %v", sum)
	}
}

// --max-cost-usd stops the batch with exit 1, saying why and how to go
// on; the pass rate printed and shown is over the items that finished;
// batch resume with a higher limit reports the batch completed. What the
// store holds and that no item is asked again is batch's
// TestMaxCostStopsAndResumeFinishes.
func TestBatchMaxCostStopsAndResumes(t *testing.T) {
	dir := t.TempDir()
	p := writeFile(t, dir, "qa.yaml", fmt.Sprintf(qaPipeline, ""))
	var lines []string
	for i := 1; i <= 10; i++ {
		lines = append(lines, fmt.Sprintf(`{"question": "q%d", "expected": "A%d"}`, i, i))
	}
	data := writeFile(t, dir, "qa.jsonl", strings.Join(lines, "\n"))
	_, srv := newQAModel(t, 0)
	useModel(t, srv)
	db := filepath.Join(dir, "runs.db")
	// One item costs $0.14 and reserves $0.102 before its call is sent:
	// the fourth does not fit in the $0.08 left.
	code, _, stderr := flowrun(t, "batch", p, "--dataset", data, "--store", db, "--concurrency", "1", "--max-cost-usd", "0.5")
	if code != exitFailed || !strings.Contains(stderr, "stopped: the batch's cost cap of $0.50 reached: $0.42 spent, and the next model call may cost up to $0.102") ||
		!strings.Contains(stderr, "To continue: flowrun batch resume b") || !strings.Contains(stderr, "--max-cost-usd USD (a higher cap, or 0 for none)") {
		t.Fatalf("exit %d\n%s", code, stderr)
	}
	b, _ := batchStore(t, db)
	// The pass rate is over the items that finished, and says so.
	if want := "exact                100.0%  3/3 (pass rate) over the 3 of 10 items that finished"; !strings.Contains(stderr, want) {
		t.Errorf("stderr lacks %q:\n%s", want, stderr)
	}
	if _, show, _ := flowrun(t, "batch", "show", b.ID, "--store", db); !strings.Contains(show, "pass rate  100.0% (3/3), 95% interval 43.9%-100.0% (exact) over the 3 of 10 items that finished") {
		t.Errorf("batch show:\n%s", show)
	}
	code, _, stderr = flowrun(t, "batch", "resume", b.ID[:10], "--store", db, "--max-cost-usd", "5")
	if code != exitOK || !strings.Contains(stderr, "completed: 10 items, 10 completed, 0 failed; $1.40") {
		t.Fatalf("resume: exit %d\n%s", code, stderr)
	}
}

// --score metrics and a judge pipeline's outputs are the batch's
// metrics, kept in its settings with the primary; a --score that does
// not compile is refused with exit 2, pointing into it. The scores the
// judge and the expressions give are batch's
// TestJudgePipelineAndScoreExpressions.
func TestBatchJudgePipelineAndScoreFlag(t *testing.T) {
	dir := t.TempDir()
	p := batchtest.WriteJudgedQA(t, dir)
	data := writeFile(t, dir, "qa.yaml.json", `[{"question": "q1", "expected": "A1"}, {"question": "q2", "expected": "no"}]`)
	_, srv := newQAModel(t, 0)
	useModel(t, srv)
	db := filepath.Join(dir, "runs.db")
	code, _, stderr := flowrun(t, "batch", p, "--dataset", data, "--store", db, "--score", "chars=len(outputs.answer) * 10", "--score", "pass=outputs.answer == \"A1\"")
	if code != exitOK {
		t.Fatalf("exit %d\n%s", code, stderr)
	}
	b, _ := batchStore(t, db)
	if saved, err := batch.SettingsOf(b); err != nil || fmt.Sprint(saved.Metrics) != "[exact chars pass verdict tokens]" || saved.Primary != "pass" {
		t.Fatalf("settings %+v, %v", saved, err)
	}
	code, _, stderr = flowrun(t, "batch", p, "--dataset", data, "--store", db, "--score", "chars=outputs.nope")
	if code != exitInvalid || !strings.Contains(stderr, `--score chars:1:9: error: in `+"`outputs.nope`"+`: outputs has no field "nope"`) {
		t.Fatalf("a bad --score: exit %d\n%s", code, stderr)
	}
}

// TestBatchResumeNamesWhatChanged checks that a batch whose pipeline was
// edited since it started is not resumed, and that the refusal says which
// file and line changed.
func TestBatchResumeNamesWhatChanged(t *testing.T) {
	dir := t.TempDir()
	p := writeFile(t, dir, "qa.yaml", fmt.Sprintf(qaPipeline, ""))
	data := writeFile(t, dir, "qa.jsonl", "{\"question\": \"q1\", \"expected\": \"A1\"}\n{\"question\": \"q2\", \"expected\": \"A2\"}\n{\"question\": \"q3\", \"expected\": \"A3\"}\n")
	_, srv := newQAModel(t, 0)
	useModel(t, srv)
	db := filepath.Join(dir, "runs.db")
	code, _, stderr := flowrun(t, "batch", p, "--dataset", data, "--store", db, "--concurrency", "1", "--max-cost-usd", "0.2")
	if code != exitFailed {
		t.Fatalf("exit %d\n%s", code, stderr)
	}
	writeFile(t, dir, "qa.yaml", strings.Replace(fmt.Sprintf(qaPipeline, ""), `"Q: ${{ inputs.question }}"`, `"Question: ${{ inputs.question }}"`, 1))
	b, _ := batchStore(t, db)
	code, _, stderr = flowrun(t, "batch", "resume", b.ID, "--store", db, "--max-cost-usd", "5")
	if code != exitInvalid || !strings.Contains(stderr, "qa.yaml:\n  line 10: was") || !strings.Contains(stderr, "--allow-changed") {
		t.Fatalf("resume after an edit: exit %d\n%s", code, stderr)
	}
}

// dollarPipeline is qaPipeline priced so that each item costs exactly $1:
// whole-dollar settings are stored as JSON integers.
var dollarPipeline = batchtest.DollarQAPipeline

func qaDataset(t *testing.T, dir string, n int) string {
	t.Helper()
	var lines []string
	for i := 1; i <= n; i++ {
		lines = append(lines, fmt.Sprintf(`{"question": "q%d", "expected": "A%d"}`, i, i))
	}
	return writeFile(t, dir, "qa.jsonl", strings.Join(lines, "\n"))
}

// batchSpend is the total cost and the number of completed items of the
// store's only batch.
func batchSpend(t *testing.T, db string) (float64, int) {
	t.Helper()
	_, items := batchStore(t, db)
	return batchtest.Spent(items)
}

// batch resume keeps the cost cap and the concurrency the batch started
// with, whole numbers included: a resume without flags stops at once at
// the cap it stopped at, and one that raises the cap runs two items at a
// time, as the batch began.
func TestBatchResumeKeepsSettings(t *testing.T) {
	dir := t.TempDir()
	p := writeFile(t, dir, "qa.yaml", dollarPipeline)
	data := qaDataset(t, dir, 10)
	model, srv := newQAModel(t, 50*time.Millisecond)
	useModel(t, srv)
	db := filepath.Join(dir, "runs.db")
	code, _, stderr := flowrun(t, "batch", p, "--dataset", data, "--store", db, "--concurrency", "2", "--max-cost-usd", "3")
	if cost, done := batchSpend(t, db); code != exitFailed || cost != 3 || done != 3 {
		t.Fatalf("exit %d, $%v spent on %d items, want $3 on 3\n%s", code, cost, done, stderr)
	}
	b, _ := batchStore(t, db)
	saved, err := batch.SettingsOf(b)
	if err != nil || saved.MaxCostUSD != 3 || saved.Concurrency != 2 || !strings.Contains(string(b.Settings), `"max_cost_usd":3,`) {
		t.Fatalf("settings %s: %+v, %v", b.Settings, saved, err)
	}

	code, _, stderr = flowrun(t, "batch", "resume", "last", "--store", db)
	if cost, done := batchSpend(t, db); code != exitFailed || cost != 3 || done != 3 || !strings.Contains(stderr, "stopped: the batch's cost cap of $3.00 reached: $3.00 spent") {
		t.Fatalf("resume without flags: exit %d, $%v spent on %d items, want the $3 cap kept\n%s", code, cost, done, stderr)
	}
	if n := len(model.Requests()); n != 3 {
		t.Fatalf("resume past the cap asked %d questions in all, want 3", n)
	}

	code, _, stderr = flowrun(t, "batch", "resume", "last", "--store", db, "--max-cost-usd", "7")
	if cost, done := batchSpend(t, db); code != exitFailed || cost != 7 || done != 7 {
		t.Fatalf("resume with a $7 cap: exit %d, $%v spent on %d items\n%s", code, cost, done, stderr)
	}
	if n := srv.MaxInFlight(); n > 2 {
		t.Fatalf("%d requests in flight at once; the batch runs 2 items at a time", n)
	}
}

// An item waiting on a question says so once: its line reads
// "waiting: <question>", not "waiting: waiting: <question>".
func TestBatchWaitingItemSaysWaitingOnce(t *testing.T) {
	dir := t.TempDir()
	p := writeFile(t, dir, "ask.yaml", `
version: 1
name: ask
inputs:
  question: {type: string}
nodes:
  - id: confirm
    ask: {question: "Is ${{ inputs.question }} right?"}
outputs:
  answer: nodes.confirm
`)
	data := writeFile(t, dir, "ask.jsonl", `{"question": "q1"}`+"\n")
	code, stdout, stderr := flowrun(t, "batch", p, "--dataset", data, "--store", filepath.Join(dir, "runs.db"))
	if code != exitFailed || !strings.Contains(stderr, ": waiting: Is q1 right?") || strings.Contains(stderr, "waiting: waiting:") {
		t.Fatalf("exit %d\n%s\n%s", code, stdout, stderr)
	}
}
