package main

import (
	"encoding/csv"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/flowrun/flowrun/llm/llmtest"
)

// judgedQA is qaPipeline scored by a judge pipeline whose model explains
// its verdict: the explanation (a text output) is the judge's reasoning,
// not a metric.
func judgedQA(t *testing.T) (dir, pipeline, data string) {
	t.Helper()
	dir = t.TempDir()
	writeFile(t, dir, "judge.yaml", `
version: 1
name: judge
models:
  default: {model: gpt-4.1-mini}
inputs:
  item: {type: object}
  outputs: {type: object}
nodes:
  - id: why
    llm: {prompt: "Judge ${{ inputs.outputs.answer }} against ${{ inputs.item.expected }}"}
outputs:
  verdict: inputs.outputs.answer == inputs.item.expected
  reason: trim(nodes.why.text)
`)
	pipeline = writeFile(t, dir, "qa.yaml", strings.Replace(fmt.Sprintf(qaPipeline, ""), "score:\n", "score:\n  pipeline: judge.yaml\n", 1))
	data = writeFile(t, dir, "qa.json", `[{"question": "q1", "expected": "A1", "topic": "x"}, {"question": "q2", "expected": "no", "topic": "y"},
		{"question": "q3", "expected": "A3", "topic": "z"}]`)
	srv := llmtest.New(t)
	srv.Handle(func(r llmtest.Request) llmtest.Reply {
		msgs, _ := r.Body["messages"].([]any)
		last, _ := msgs[len(msgs)-1].(map[string]any)
		prompt := llmtest.MessageText(last["content"])
		if rest, ok := strings.CutPrefix(prompt, "Judge "); ok {
			got, want, _ := strings.Cut(rest, " against ")
			if got == want {
				return llmtest.Reply{Text: "The answer " + got + " is the expected one."}
			}
			return llmtest.Reply{Text: "The answer " + got + " is not " + want + "."}
		}
		return llmtest.Reply{Text: "A" + strings.TrimPrefix(strings.TrimPrefix(prompt, "Q: "), "q")}
	})
	useModel(t, srv)
	return dir, pipeline, data
}

// TestBatchShowItemWhy runs a judged batch against the fake model server
// and checks that every export says why an item failed: its inputs, the
// dataset field its metric reads (expected, not topic), its outputs, its
// scores and the judge's reasoning; --item and --failures show items
// whole.
func TestBatchShowItemWhy(t *testing.T) {
	dir, p, data := judgedQA(t)
	db := filepath.Join(dir, "runs.db")
	if code, _, stderr := flowrun(t, "batch", p, "--dataset", data, "--store", db); code != exitOK {
		t.Fatalf("batch: exit %d\n%s", code, stderr)
	}
	code, out, stderr := flowrun(t, "batch", "show", "last", "--store", db, "--format", "jsonl")
	if code != exitOK {
		t.Fatalf("jsonl: exit %d\n%s", code, stderr)
	}
	var row map[string]any
	if err := json.Unmarshal([]byte(strings.Split(out, "\n")[1]), &row); err != nil {
		t.Fatal(err)
	}
	got := fmt.Sprint(row["inputs"], row["expected"], row["outputs"], row["reasoning"], row["verdict"], row["exact"])
	if want := "map[question:q2] map[expected:no] map[answer:A2] map[reason:The answer A2 is not no.] false false"; got != want {
		t.Errorf("jsonl row 2\n got %s\nwant %s", got, want)
	}
	if _, isMetric := row["reason"]; isMetric {
		t.Error("the judge's reasoning became a metric column")
	}
	code, out, _ = flowrun(t, "batch", "show", "last", "--store", db, "--format", "csv")
	recs, err := csv.NewReader(strings.NewReader(out)).ReadAll()
	if code != exitOK || err != nil || len(recs) != 4 {
		t.Fatalf("csv: exit %d, %v\n%s", code, err, out)
	}
	header := strings.Join(recs[0], ",")
	if !strings.HasSuffix(header, ",inputs,expected,outputs,reasoning,checks,note") || !strings.Contains(strings.Join(recs[2], ","), `{"reason":"The answer A2 is not no."}`) {
		t.Errorf("csv header %s\nrow %v", header, recs[2])
	}
	code, out, _ = flowrun(t, "batch", "show", "last", "--store", db, "--item", "item 2")
	for _, want := range []string{"item item 2  completed  fail", "inputs\n    question: q2", "expected\n    expected: no", "outputs\n    answer: A2",
		"scores  exact ✗  chars 2  verdict ✗", "judge's reason\n    The answer A2 is not no."} {
		if code != exitOK || !strings.Contains(out, want) {
			t.Errorf("--item 2 lacks %q (exit %d):\n%s", want, code, out)
		}
	}
	code, out, _ = flowrun(t, "batch", "show", "last", "--store", db, "--failures")
	if code != exitOK || strings.Count(out, "\nitem ")+strings.Count(out[:5], "item ") != 1 || !strings.Contains(out, "item item 2 ") {
		t.Errorf("--failures: want item 2 alone (exit %d):\n%s", code, out)
	}
	code, out, _ = flowrun(t, "batch", "show", "last", "--store", db)
	if code != exitOK || !strings.Contains(out, "OUTPUT OR ERROR") || !strings.Contains(out, "answer: A2") {
		t.Errorf("the item lines lack the outputs:\n%s", out)
	}
	if code, _, stderr := flowrun(t, "batch", "show", "last", "--store", db, "--item", "nope"); code != exitInvalid || !strings.Contains(stderr, `has no item "nope"`) {
		t.Errorf("an unknown item: exit %d %s", code, stderr)
	}
}

// TestBatchRate rates items from the command line: the ratings are the
// human metric with its agreement with the judge's verdict, a second
// rating replaces the first, and bad usage is refused with what to type.
func TestBatchRate(t *testing.T) {
	dir, p, data := judgedQA(t)
	db := filepath.Join(dir, "runs.db")
	if code, _, stderr := flowrun(t, "batch", p, "--dataset", data, "--store", db); code != exitOK {
		t.Fatalf("batch: exit %d\n%s", code, stderr)
	}
	for _, args := range [][]string{{"item 1", "--fail"}, {"item 1", "--pass", "--note", "right answer"}, {"item 2", "--fail", "--note", "A2 is wrong"}, {"item 3", "--fail", "--note", "too terse"}} {
		if code, out, stderr := flowrun(t, append([]string{"batch", "rate", "last", "--store", db}, args...)...); code != exitOK || !strings.Contains(out, "rated "+args[0]) {
			t.Fatalf("rate %v: exit %d\n%s%s", args, code, out, stderr)
		}
	}
	code, out, _ := flowrun(t, "batch", "show", "last", "--store", db)
	// human T F F against verdict T F T: 2 of 3 agree; po 2/3, pe 1/3*2/3 + 2/3*1/3 = 4/9, kappa 0.40.
	for _, want := range []string{"human    33.3% (1/3)", "human vs verdict: agree on 2 of 3 rated items, Cohen's kappa 0.40"} {
		if code != exitOK || !strings.Contains(out, want) {
			t.Errorf("show lacks %q:\n%s", want, out)
		}
	}
	code, out, _ = flowrun(t, "batch", "show", "last", "--store", db, "--item", "item 3")
	if code != exitOK || !strings.Contains(out, "human ✗") || !strings.Contains(out, "human note\n    too terse") {
		t.Errorf("--item 3:\n%s", out)
	}
	for _, c := range []struct {
		args []string
		want string
	}{
		{[]string{"item 1"}, "give exactly one of --pass and --fail"},
		{[]string{"item 1", "--pass", "--fail"}, "give exactly one of --pass and --fail"},
		{[]string{"item 9", "--pass"}, `has no item "item 9" (did you mean item 1, item 2, item 3?)`},
	} {
		code, _, stderr := flowrun(t, append([]string{"batch", "rate", "last", "--store", db}, c.args...)...)
		if code == exitOK || !strings.Contains(stderr, c.want) {
			t.Errorf("rate %v: exit %d %s", c.args, code, stderr)
		}
	}
}

// TestJudgedBatchThenRunsListAndFromRunLast is the journey after a
// judged batch: the runs list (with --batch-items, which shows them)
// shows the items' runs and no judge call as a run of its own, and
// `flowrun test --from-run last` makes a case of the last item's run (its
// pipeline, not the judge's), which passes, or, made from an item the
// batch failed, fails expecting the dataset's value.
func TestJudgedBatchThenRunsListAndFromRunLast(t *testing.T) {
	dir, p, data := judgedQA(t)
	db := filepath.Join(dir, "runs.db")
	if code, _, stderr := flowrun(t, "batch", p, "--dataset", data, "--store", db); code != exitOK {
		t.Fatalf("batch: exit %d\n%s", code, stderr)
	}
	code, out, stderr := flowrun(t, "runs", "--batch-items", "--store", db)
	if code != exitOK {
		t.Fatalf("runs: exit %d\n%s", code, stderr)
	}
	if strings.Contains(out, "judge") {
		t.Errorf("the runs list shows judge calls as runs:\n%s", out)
	}
	if n := strings.Count(out, filepath.Base(p)); n != 3 {
		t.Errorf("the runs list shows %d runs of %s, want the batch's 3 items:\n%s", n, filepath.Base(p), out)
	}
	casePath := filepath.Join(dir, "last.test.yaml")
	if code, _, stderr := flowrun(t, "test", "--from-run", "last", "--store", db, "-o", casePath); code != exitOK {
		t.Fatalf("test --from-run last: exit %d\n%s", code, stderr)
	}
	body, err := os.ReadFile(casePath)
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(body), filepath.Base(p)) || strings.Contains(string(body), "judge") {
		t.Errorf("the case made from the last run is not of %s:\n%s", filepath.Base(p), body)
	}
	// The last item to finish may be one the batch failed: its case then
	// expects what the dataset expected, and fails until the pipeline
	// gives it; a passing item's case passes.
	code, out, stderr = flowrun(t, "test", casePath)
	pinned := strings.Contains(string(body), "This case fails until the pipeline gives it.")
	switch {
	case pinned && (code != exitFailed || !strings.Contains(out, `expected "no"`)):
		t.Errorf("the case made from a failing item: exit %d, want it to fail expecting the dataset's no\n%s%s", code, out, stderr)
	case !pinned && code != exitOK:
		t.Errorf("the case made from a passing item fails: exit %d\n%s%s", code, out, stderr)
	}
}
