package batch

import (
	"context"
	"fmt"
	"strings"
	"testing"

	"github.com/flowrun/flowrun/batch/batchtest"
	"github.com/flowrun/flowrun/llm/llmtest"
	"github.com/flowrun/flowrun/store"
)

// TestJudgeMetricScoresWithReasoning: a score: metric given as an inline
// rubric is judged by the model it names, through the fake OpenAI server;
// its verdict is the metric, its reasoning is stored beside it, and the
// judge's spend counts toward the item's.
func TestJudgeMetricScoresWithReasoning(t *testing.T) {
	dir := t.TempDir()
	pipeline := write(t, dir, "qa.yaml", `
version: 1
name: qa
models:
  default: {model: gpt-4.1-mini, price: {input_per_mtok: 10000, output_per_mtok: 0}}
  grader: {model: gpt-4.1, price: {input_per_mtok: 10000, output_per_mtok: 0}}
inputs:
  question: {type: string}
nodes:
  - id: answer
    llm: {prompt: "Q: ${{ inputs.question }}"}
outputs:
  answer: nodes.answer.text
score:
  polite: {judge: {rubric: "The answer says please.", model: grader}}
`)
	dataset := write(t, dir, "qa.jsonl", `{"question": "q1"}`+"\n"+`{"question": "q2"}`+"\n")
	srv := llmtest.New(t)
	srv.Handle(func(req llmtest.Request) llmtest.Reply {
		if req.Model == "gpt-4.1" {
			polite := strings.Contains(string(req.Raw), "yes please")
			return llmtest.Reply{Text: fmt.Sprintf(`{"reasoning": "it says please: %t", "verdict": %t}`, polite, polite), Usage: llmtest.Usage{Prompt: 100}}
		}
		text := "no"
		if strings.Contains(string(req.Raw), "q1") {
			text = "yes please"
		}
		return llmtest.Reply{Text: text, Usage: llmtest.Usage{Prompt: 100}}
	})
	st := batchtest.OpenStore(t)
	b, _ := startBatch(t, st, pipeline, dataset, Settings{Concurrency: 1, Metrics: []string{"polite"}, Primary: "polite"}, srv.Env("sk-judge"))
	rows, err := st.BatchItems(context.Background(), b.ID)
	if err != nil || len(rows) != 2 {
		t.Fatalf("rows %v %v", rows, err)
	}
	for i, want := range []bool{true, false} {
		r := rows[i]
		if r.Scores["polite"] != want || r.Reasoning["polite"] != fmt.Sprintf("it says please: %t", want) || r.Error != "" || !near(r.CostUSD, 2) {
			t.Fatalf("item %d: scores %v, error %q, cost %v", i, r.Scores, r.Error, r.CostUSD)
		}
	}
	var judged int
	for _, req := range srv.Requests() {
		if req.Model == "gpt-4.1" {
			judged++
			if _, ok := req.Body["response_format"]; !ok || !strings.Contains(string(req.Raw), "The answer says please.") {
				t.Fatalf("the judge's request has no schema or no rubric: %s", req.Raw)
			}
		}
	}
	if judged != 2 {
		t.Fatalf("%d judge requests, want 2", judged)
	}
	// Each judge call is a child run of the item's run: listed under it,
	// never in the runs list, never what last names.
	for _, r := range rows {
		children, n, err := st.RunsMatching(context.Background(), store.RunQuery{ChildOf: r.Run})
		if err != nil || n != 1 || children[0].PipelineName == "qa" {
			t.Fatalf("item %s's run %s has %d child runs (%v), want its judge's", r.Key, r.Run, n, err)
		}
	}
	if lines, total, err := st.RunList(context.Background(), store.RunQuery{}, store.ListOrder{}); err != nil || total != 1 || lines[0].Batch == nil {
		t.Fatalf("the runs list has %d lines (%v), want the batch alone", total, err)
	}
	if last, err := st.FindRun(context.Background(), "last"); err != nil || last.ChildOf != "" || last.PipelineName != "qa" {
		t.Fatalf("last is %+v (%v), want an item's run", last, err)
	}
}
