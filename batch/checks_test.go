package batch

import (
	"bytes"
	"context"
	"encoding/json"
	"strings"
	"testing"

	"github.com/flowrun/flowrun/batch/batchtest"
	"github.com/flowrun/flowrun/llm/llmtest"
	"github.com/flowrun/flowrun/store"
)

// TestVerdict: promptfoo's pass rule over a metric's checks. Every check
// must pass; a test threshold replaces that by the mean score, weighted;
// a check of weight 0 still fails the item without a threshold (as in
// promptfoo); checks that could not be checked count neither way, and an
// item with none left has no verdict.
func TestVerdict(t *testing.T) {
	yes, no := true, false
	c := func(pass *bool, score, weight float64) store.Check {
		return store.Check{Pass: pass, Score: score, Weight: weight}
	}
	for _, tc := range []struct {
		name         string
		cs           store.Checks
		pass, scored bool
		score        float64
	}{
		{"all pass", store.Checks{List: []store.Check{c(&yes, 1, 1), c(&yes, 1, 1)}}, true, true, 1},
		{"one fails", store.Checks{List: []store.Check{c(&yes, 1, 1), c(&no, 0, 1)}}, false, true, 0.5},
		{"weight 0 still fails", store.Checks{List: []store.Check{c(&yes, 1, 1), c(&no, 0, 0)}}, false, true, 1},
		{"threshold met by weights", store.Checks{Threshold: 0.7, List: []store.Check{c(&yes, 1, 3), c(&no, 0, 1)}}, true, true, 0.75},
		{"threshold missed", store.Checks{Threshold: 0.8, List: []store.Check{c(&yes, 1, 3), c(&no, 0, 1)}}, false, true, 0.75},
		{"threshold over partial scores", store.Checks{Threshold: 0.5, List: []store.Check{c(&no, 0.6, 1)}}, true, true, 0.6},
		{"unchecked ones left out", store.Checks{List: []store.Check{c(&yes, 1, 1), c(nil, 0, 1)}}, true, true, 1},
		{"none checked", store.Checks{List: []store.Check{c(nil, 0, 1)}}, true, false, 0},
		{"no checks", store.Checks{}, true, false, 0},
	} {
		pass, scored := verdict(&tc.cs)
		if pass != tc.pass || scored != tc.scored || !near(tc.cs.Score, tc.score) {
			t.Errorf("%s: pass %v scored %v score %v, want %v %v %v", tc.name, pass, scored, tc.cs.Score, tc.pass, tc.scored, tc.score)
		}
	}
}

// TestChecksMetric: a metric whose value is a list of checks scores each
// item by promptfoo's rule; each check's result and reason is kept with
// the item and shown by batch show --item, the HTML of the report and
// the web page, --junit and the exports; an item with no check is
// unscored, never passed.
func TestChecksMetric(t *testing.T) {
	dir := t.TempDir()
	pipeline := write(t, dir, "qa.yaml", `
version: 1
name: qa
models: {default: {model: gpt-4.1-mini}}
inputs:
  question: {type: string}
nodes:
  - id: answer
    llm: {prompt: "Q: ${{ inputs.question }}"}
outputs:
  answer: nodes.answer.text
score:
  pass: >-
    {checks: map(item.asserts, {{pass: outputs.answer contains .value, name: "contains " + .value, weight: .weight ?? 1,
      reason: outputs.answer contains .value ? "" : "the answer does not contain " + .value}}), threshold: item.threshold}
`)
	dataset := write(t, dir, "qa.jsonl", strings.Join([]string{
		`{"id": "both", "question": "q1", "asserts": [{"value": "Paris"}, {"value": "France"}]}`,
		`{"id": "one missing", "question": "q2", "asserts": [{"value": "Paris"}, {"value": "Lyon"}]}`,
		`{"id": "weighed", "question": "q3", "threshold": 0.7, "asserts": [{"value": "Paris", "weight": 3}, {"value": "Lyon"}]}`,
		`{"id": "nothing to check", "question": "q4", "asserts": []}`,
	}, "\n")+"\n")
	srv := llmtest.New(t)
	srv.Handle(func(llmtest.Request) llmtest.Reply { return llmtest.Reply{Text: "Paris, France"} })
	st := batchtest.OpenStore(t)
	b, _ := startBatch(t, st, pipeline, dataset, Settings{Concurrency: 1, Metrics: []string{"pass"}, Primary: "pass"}, srv.Env("sk-checks"))
	s, err := SummarizeDetailed(context.Background(), st, b)
	if err != nil {
		t.Fatal(err)
	}
	want := map[string]struct {
		pass  any
		class string
	}{"both": {true, ""}, "one missing": {false, ""}, "weighed": {true, ""}, "nothing to check": {nil, ClassUnscored}}
	for _, r := range s.Rows {
		w := want[r.Key]
		if r.Scores["pass"] != w.pass || r.Class != w.class {
			t.Errorf("item %s: pass %v class %q (%s), want %v %q", r.Key, r.Scores["pass"], r.Class, r.Error, w.pass, w.class)
		}
	}
	if s.PassRate == nil || s.PassRate.Passed != 2 || s.PassRate.N != 4 {
		t.Errorf("pass rate %+v, want 2 of 4 (an unscored item never passes)", s.PassRate)
	}
	missing, _ := s.Row("one missing")
	var text bytes.Buffer
	WriteItemText(&text, s, missing, 100)
	for _, w := range []string{"checks of pass: 1 of 2 passed, score 0.50", "✓ contains Paris", "✗ contains Lyon", "the answer does not contain Lyon"} {
		if !strings.Contains(text.String(), w) {
			t.Errorf("batch show --item lacks %q:\n%s", w, text.String())
		}
	}
	weighed, _ := s.Row("weighed")
	if html := string(ItemHTML(s, weighed)); !strings.Contains(html, "score 0.75 (threshold 0.7)") || !strings.Contains(html, `<tr class="check fail"><td class="mark">✗</td><td class="cname">contains Lyon</td>`) {
		t.Errorf("the item's HTML lacks its checks:\n%s", html)
	}
	var report bytes.Buffer
	if err := WriteReport(context.Background(), st, &report, b, nil); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(report.String(), "outputs, checks</summary>") || !strings.Contains(report.String(), `<td class="cname">contains Lyon</td><td class="creason">the answer does not contain Lyon</td>`) {
		t.Errorf("the report does not show the checks")
	}
	var junit bytes.Buffer
	if err := WriteJUnit(&junit, s); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(junit.String(), "failed: contains Lyon") || !strings.Contains(junit.String(), "unscored: it has no checks") {
		t.Errorf("--junit says nothing of the checks:\n%s", junit.String())
	}
	var jsonl bytes.Buffer
	if err := WriteJSONL(&jsonl, s); err != nil {
		t.Fatal(err)
	}
	first, _, _ := strings.Cut(jsonl.String(), "\n")
	var rec struct {
		Checks map[string]store.Checks `json:"checks"`
	}
	if err := json.Unmarshal([]byte(first), &rec); err != nil || len(rec.Checks["pass"].List) != 2 || *rec.Checks["pass"].List[1].Pass != true {
		t.Errorf("the JSONL export's checks column: %s (%v)", first, err)
	}
	var csv bytes.Buffer
	if err := WriteCSV(&csv, s); err != nil {
		t.Fatal(err)
	}
	if header, _, _ := strings.Cut(csv.String(), "\n"); !strings.Contains(header, ",checks,") {
		t.Errorf("the CSV export has no checks column: %s", header)
	}
}

// TestChecksMetricIsPrimary: a metric of checks passes or fails, so with
// no metric named pass it is the batch's pass rate when it comes first.
func TestChecksMetricIsPrimary(t *testing.T) {
	p := load(t, t.TempDir(), `
version: 1
name: qa
models: {default: {provider: echo}}
nodes:
  - id: answer
    llm: {prompt: "hi"}
outputs:
  answer: nodes.answer.text
score:
  chars: len(outputs.answer)
  asserts: 'map(item.asserts, {{pass: outputs.answer contains .value}})'
  exact: outputs.answer == item.expected
`)
	if s := NewScorer(p, nil); s.Primary != "asserts" {
		t.Errorf("primary %q, want the metric of checks", s.Primary)
	}
}
