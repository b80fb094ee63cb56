package main

import (
	"context"
	"encoding/json"
	"fmt"
	"math"
	"path/filepath"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/flowrun/flowrun/batch"
	"github.com/flowrun/flowrun/llm/llmtest"
	"github.com/flowrun/flowrun/store"
)

// qaPipeline asks the model one question per item and scores the answer
// against the item's expected field. Its price makes costs exact: a turn
// of 100 prompt and 20 completion tokens costs $0.14.
const qaPipeline = `
version: 1
name: qa
models:
  default: {model: gpt-4.1-mini, price: {input_per_mtok: 1000, output_per_mtok: 2000}%s}
inputs:
  question: {type: string}
nodes:
  - id: answer
    llm: {prompt: "Q: ${{ inputs.question }}"}
outputs:
  answer: trim(nodes.answer.text)
score:
  exact: outputs.answer == item.expected
  chars: len(outputs.answer)
`

// qaModel answers "Q: qN" with "AN"; the question "boom" gets a 400.
type qaModel struct {
	mu    sync.Mutex
	asked map[string]int // requests per prompt
	delay time.Duration
}

func newQAModel(t *testing.T, delay time.Duration) (*qaModel, *llmtest.Server) {
	m := &qaModel{asked: map[string]int{}, delay: delay}
	srv := llmtest.New(t)
	srv.Handle(m.reply)
	return m, srv
}

func (m *qaModel) reply(r llmtest.Request) llmtest.Reply {
	msgs, _ := r.Body["messages"].([]any)
	last, _ := msgs[len(msgs)-1].(map[string]any)
	prompt := durMessageText(last["content"])
	m.mu.Lock()
	m.asked[prompt]++
	m.mu.Unlock()
	q := strings.TrimPrefix(prompt, "Q: ")
	if q == "boom" {
		return llmtest.Error(400, "the model refuses this question")
	}
	return llmtest.Reply{Text: "A" + strings.TrimPrefix(q, "q"), Usage: llmtest.Usage{Prompt: 100, Completion: 20}, Delay: m.delay}
}

func (m *qaModel) requests() map[string]int {
	m.mu.Lock()
	defer m.mu.Unlock()
	out := map[string]int{}
	for k, v := range m.asked {
		out[k] = v
	}
	return out
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
// reported naming its line, the rest runs, every item has one result, and
// the summary figures are exact.
func TestBatchScoresEveryItemAndNamesBadLines(t *testing.T) {
	dir := t.TempDir()
	p := writeFile(t, dir, "qa.yaml", fmt.Sprintf(qaPipeline, ""))
	var lines []string
	for i := 1; i <= 8; i++ {
		expected := fmt.Sprintf("A%d", i)
		if i%2 == 0 {
			expected = "wrong"
		}
		lines = append(lines, fmt.Sprintf(`{"question": "q%d", "expected": %q}`, i, expected))
	}
	lines = append(lines, `{"question": "q9", "expected": `, `{"expected": "A10"}`, `{"question": "boom", "expected": "A11"}`)
	data := writeFile(t, dir, "qa.jsonl", strings.Join(lines, "\n")+"\n")
	model, srv := newQAModel(t, 0)
	useModel(t, srv)
	db := filepath.Join(dir, "runs.db")

	code, stdout, stderr := flowrun(t, "batch", p, "--dataset", data, "--store", db, "--concurrency", "3")
	if code != exitOK {
		t.Fatalf("exit %d\n%s\n%s", code, stdout, stderr)
	}
	for _, want := range []string{
		"FAIL line 9", "qa.jsonl:9: not JSON: unexpected EOF",
		"FAIL line 10", `qa.jsonl:10: no field for the required input "question" (fields: expected); name the field with --map question=FIELD`,
		"FAIL line 11", "the model refuses this question",
		"completed: 11 items, 8 completed, 3 failed; $1.12, 960 tokens",
		"exact                 36.4%  4/11 (pass rate)",
		"chars                mean 2 over 8 items",
	} {
		if !strings.Contains(stderr, want) {
			t.Errorf("stderr lacks %q:\n%s", want, stderr)
		}
	}
	b, items := batchStore(t, db)
	if saved, err := batch.SettingsOf(b); err != nil || b.Status != "completed" || saved.Primary != "exact" || fmt.Sprint(saved.Metrics) != "[exact chars]" || saved.Concurrency != 3 {
		t.Fatalf("batch %+v", b)
	}
	if len(items) != 11 {
		t.Fatalf("%d items, want 11", len(items))
	}
	var cost float64
	passed, classes := 0, map[string]int{}
	for i, it := range items {
		cost += it.CostUSD
		if it.Scores["exact"] == true {
			passed++
		}
		classes[it.Class]++
		want := fmt.Sprintf("line %d", i+1)
		if it.Key != want || it.Index != i {
			t.Errorf("item %d: key %q index %d, want %q", i, it.Key, it.Index, want)
		}
		switch {
		case i < 8:
			if it.Status != "completed" || it.Run == "" || it.Tokens != 120 || math.Abs(it.CostUSD-0.14) > 1e-9 || it.Scores["exact"] != (i%2 == 0) {
				t.Errorf("item %d: %+v", i, it)
			}
		case i < 10:
			if it.Status != "failed" || it.Class != "dataset" || it.Run != "" {
				t.Errorf("item %d: %+v", i, it)
			}
		default:
			if it.Status != "failed" || it.Run == "" || it.Scores != nil || !strings.Contains(it.Error, "refuses") {
				t.Errorf("item %d: %+v", i, it)
			}
		}
	}
	if passed != 4 || math.Abs(cost-1.12) > 1e-9 || classes["dataset"] != 2 {
		t.Fatalf("passed %d, cost %v, classes %v", passed, cost, classes)
	}
	asked := model.requests()
	for i := 1; i <= 8; i++ {
		if asked[fmt.Sprintf("Q: q%d", i)] != 1 {
			t.Errorf("q%d asked %d times", i, asked[fmt.Sprintf("Q: q%d", i)])
		}
	}

	// Resuming a finished batch runs nothing again.
	code, _, stderr = flowrun(t, "batch", "resume", "last", "--store", db)
	if code != exitOK || !strings.Contains(stderr, "completed: 11 items, 8 completed, 3 failed") {
		t.Fatalf("resume: exit %d\n%s", code, stderr)
	}
	if after := model.requests(); fmt.Sprint(after) != fmt.Sprint(asked) {
		t.Fatalf("resuming a finished batch asked the model again: %v, was %v", after, asked)
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

// Every run of a batch shares one model client: the model's rpm and
// max_concurrency hold for the batch as a whole, however many items run
// at once.
func TestBatchRateLimitIsBatchWide(t *testing.T) {
	dir := t.TempDir()
	const rpm = 600 // one request every 100ms
	p := writeFile(t, dir, "qa.yaml", fmt.Sprintf(qaPipeline, fmt.Sprintf(", rpm: %d, max_concurrency: 2", rpm)))
	var lines []string
	for i := 1; i <= 12; i++ {
		lines = append(lines, fmt.Sprintf(`{"question": "q%d", "expected": "A%d"}`, i, i))
	}
	data := writeFile(t, dir, "qa.jsonl", strings.Join(lines, "\n"))
	_, srv := newQAModel(t, 30*time.Millisecond)
	useModel(t, srv)
	code, _, stderr := flowrun(t, "batch", p, "--dataset", data, "--store", filepath.Join(dir, "runs.db"), "--concurrency", "8")
	if code != exitOK || !strings.Contains(stderr, "100.0%  12/12") {
		t.Fatalf("exit %d\n%s", code, stderr)
	}
	if n := srv.MaxInFlight(); n > 2 {
		t.Errorf("%d requests in flight at once; max_concurrency is 2", n)
	}
	var at []time.Time
	for _, r := range srv.Requests() {
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

// --max-cost-usd stops the batch before the spend would pass it, the
// batch ends stopped and resumable, and resume with a higher limit
// finishes it without asking the model again for an item it answered.
func TestBatchMaxCostStopsAndResumes(t *testing.T) {
	dir := t.TempDir()
	p := writeFile(t, dir, "qa.yaml", fmt.Sprintf(qaPipeline, ""))
	var lines []string
	for i := 1; i <= 10; i++ {
		lines = append(lines, fmt.Sprintf(`{"question": "q%d", "expected": "A%d"}`, i, i))
	}
	data := writeFile(t, dir, "qa.jsonl", strings.Join(lines, "\n"))
	model, srv := newQAModel(t, 0)
	useModel(t, srv)
	db := filepath.Join(dir, "runs.db")
	// One item costs $0.14: with one at a time, the fourth would pass $0.50.
	code, _, stderr := flowrun(t, "batch", p, "--dataset", data, "--store", db, "--concurrency", "1", "--max-cost-usd", "0.5")
	if code != exitFailed || !strings.Contains(stderr, "stopped: --max-cost-usd 0.5: $0.4200 spent, and an item costs up to $0.1400") ||
		!strings.Contains(stderr, "To continue: flowrun batch resume b") {
		t.Fatalf("exit %d\n%s", code, stderr)
	}
	b, items := batchStore(t, db)
	done := 0
	for _, it := range items {
		if it.Status == "completed" {
			done++
		}
	}
	if b.Status != "stopped" || done != 3 || b.PID != 0 {
		t.Fatalf("batch %s (%s), %d items done, pid %d", b.Status, b.Reason, done, b.PID)
	}
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
	for q, n := range model.requests() {
		if n != 1 {
			t.Errorf("%q asked %d times", q, n)
		}
	}
}

// A judge pipeline (score: {pipeline: FILE}) runs per completed item with
// the item, the outputs and the run's figures as inputs; its outputs are
// metrics after the expressions, and a --score metric replaces one of the
// same name.
func TestBatchJudgePipelineAndScoreFlag(t *testing.T) {
	dir := t.TempDir()
	writeFile(t, dir, "judge.yaml", `
version: 1
name: judge
inputs:
  item: {type: object}
  outputs: {type: object}
  run: {type: object}
outputs:
  verdict: inputs.outputs.answer == inputs.item.expected
  tokens: inputs.run.tokens
`)
	p := writeFile(t, dir, "qa.yaml", strings.Replace(fmt.Sprintf(qaPipeline, ""), "score:\n", "score:\n  pipeline: judge.yaml\n", 1))
	data := writeFile(t, dir, "qa.yaml.json", `[{"question": "q1", "expected": "A1"}, {"question": "q2", "expected": "no"}]`)
	_, srv := newQAModel(t, 0)
	useModel(t, srv)
	db := filepath.Join(dir, "runs.db")
	code, _, stderr := flowrun(t, "batch", p, "--dataset", data, "--store", db, "--score", "chars=len(outputs.answer) * 10", "--score", "pass=outputs.answer == \"A1\"")
	if code != exitOK {
		t.Fatalf("exit %d\n%s", code, stderr)
	}
	b, items := batchStore(t, db)
	if saved, err := batch.SettingsOf(b); err != nil || fmt.Sprint(saved.Metrics) != "[exact chars pass verdict tokens]" || saved.Primary != "pass" {
		t.Fatalf("settings %+v, %v", saved, err)
	}
	got := fmt.Sprint(items[0].Scores, items[1].Scores)
	if want := "map[chars:20 exact:true pass:true tokens:120 verdict:true] map[chars:20 exact:false pass:false tokens:120 verdict:false]"; got != want {
		t.Fatalf("scores\n got %s\nwant %s", got, want)
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
var dollarPipeline = strings.Replace(fmt.Sprintf(qaPipeline, ""), "input_per_mtok: 1000, output_per_mtok: 2000", "input_per_mtok: 10000, output_per_mtok: 0", 1)

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
	cost, done := 0.0, 0
	for _, it := range items {
		cost += it.CostUSD
		if it.Status == "completed" {
			done++
		}
	}
	return cost, done
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
	if cost, done := batchSpend(t, db); code != exitFailed || cost != 3 || done != 3 || !strings.Contains(stderr, "stopped: --max-cost-usd 3: $3.0000 spent") {
		t.Fatalf("resume without flags: exit %d, $%v spent on %d items, want the $3 cap kept\n%s", code, cost, done, stderr)
	}
	if n := len(model.requests()); n != 3 {
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

// At concurrency 8 with a cap of five items' cost, the items that run at
// once reserve what they may still spend: the batch spends no more than
// the cap plus one item, where admitting on the spend so far alone would
// start eight items before the first one's cost is known.
func TestBatchCostCapHoldsAtConcurrency8(t *testing.T) {
	dir := t.TempDir()
	p := writeFile(t, dir, "qa.yaml", fmt.Sprintf(qaPipeline, ""))
	data := qaDataset(t, dir, 24)
	_, srv := newQAModel(t, 50*time.Millisecond)
	useModel(t, srv)
	db := filepath.Join(dir, "runs.db")
	const item, limit = 0.14, 5 * 0.14
	code, _, stderr := flowrun(t, "batch", p, "--dataset", data, "--store", db, "--concurrency", "8", "--max-cost-usd", fmt.Sprint(limit))
	cost, done := batchSpend(t, db)
	if code != exitFailed || !strings.Contains(stderr, "stopped: --max-cost-usd 0.7") {
		t.Fatalf("exit %d\n%s", code, stderr)
	}
	if cost > limit+item+1e-9 || done < 4 {
		t.Fatalf("$%.4f spent on %d items with a $%.2f cap and $%.2f items", cost, done, limit, item)
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
