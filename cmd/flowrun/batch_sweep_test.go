package main

import (
	"fmt"
	"strings"
	"testing"

	"github.com/flowrun/flowrun/llm/llmtest"
)

// --sweep model.default=A,B runs one batch per model, each asking the
// model it names, and prints them side by side with their comparison.
func TestBatchSweepModels(t *testing.T) {
	c := newQACase(t, 4)
	p, data, db, srv := c.pipeline, c.data, c.db, c.model.Server
	code, _, stderr := flowrun(t, "batch", p, "--dataset", data, "--store", db, "--sweep", "model.default=gpt-4.1-mini,gpt-4.1")
	if code != exitOK {
		t.Fatalf("exit %d\n%s", code, stderr)
	}
	models := map[string]int{}
	for _, r := range srv.Requests() {
		models[r.Model]++
	}
	if models["gpt-4.1-mini"] != 4 || models["gpt-4.1"] != 4 {
		t.Fatalf("requests by model %v, want 4 each", models)
	}
	containsAll(t, "stderr", stderr, "sweep: 2 variants", "model.default=gpt-4.1-mini", "50.0% (15.0%-85.0%)",
		"model.default=gpt-4.1-mini -> model.default=gpt-4.1: +0.0 points")
	if code, _, stderr := flowrun(t, "batch", p, "--dataset", data, "--store", db, "--sweep", "temperature=0,1"); code != exitInvalid || !strings.Contains(stderr, "model.NAME=MODEL1,MODEL2") {
		t.Fatalf("a bad axis: exit %d\n%s", code, stderr)
	}
}

// flowrun batch a.yaml b.yaml runs one batch per pipeline file and
// compares them: b's prompt makes every item fail.
func TestBatchSweepPipelines(t *testing.T) {
	c := newQACase(t, 4)
	a, b := renamedAndReworded(t, c)
	code, stdout, stderr := flowrun(t, "batch", a, b, "--dataset", c.data, "--store", c.db, "--json")
	if code != exitOK {
		t.Fatalf("exit %d\n%s", code, stderr)
	}
	lines := strings.Split(strings.TrimSpace(stdout), "\n")
	last := lines[len(lines)-1]
	containsAll(t, "the last line", strings.ReplaceAll(last, " ", ""),
		`"type":"sweep_finished"`, `"label":"a.yaml"`, `"label":"b.yaml"`, `"a":"a.yaml","b":"b.yaml","fixed":0,"broken":2`)
}

// batch compare --judge asks the model, per item, which output is better
// (shown in a random order) and reports the winner per item and overall.
func TestBatchCompareJudge(t *testing.T) {
	c := newQACase(t, 8)
	a, b := renamedAndReworded(t, c)
	data, m, srv := c.data, c.model, c.model.Server
	srv.Handle(func(r llmtest.Request) llmtest.Reply {
		if r.Model != "judge-1" {
			return m.Reply(r)
		}
		// A's answers are short ("A3"), B's echo the question: the judge
		// prefers the short one, wherever it is shown.
		prompt := string(r.Raw)
		first := prompt[strings.Index(prompt, "First output:"):strings.Index(prompt, "Second output:")]
		better := "second"
		if !strings.Contains(first, "Question") {
			better = "first"
		}
		return llmtest.Reply{Text: `{"reasoning": "the short one", "better": "` + better + `"}`}
	})
	db := c.db
	if code, _, stderr := flowrun(t, "batch", a, b, "--dataset", data, "--store", db); code != exitOK {
		t.Fatalf("batches: exit %d\n%s", code, stderr)
	}
	_, out, _ := flowrun(t, "batches", "--store", db, "--json")
	var ids []string
	for _, part := range strings.Split(out, `"id": "`)[1:] {
		ids = append(ids, strings.SplitN(part, `"`, 2)[0])
	}
	// batches lists the newest first: A is the second.
	code, stdout, stderr := flowrun(t, "batch", "compare", ids[1], ids[0], "--store", db, "--judge", "judge-1", "--rubric", "Prefer the shorter answer.")
	if code != exitOK {
		t.Fatalf("compare --judge: exit %d\n%s", code, stderr)
	}
	containsAll(t, "compare --judge", stdout, "judge judge-1 (order drawn from seed 25): A 8, B 0, tie 0", "A is better", "line 1", "(B shown first)", "(A shown first)")
	for _, r := range srv.Requests() {
		if r.Model == "judge-1" && !strings.Contains(string(r.Raw), "Prefer the shorter answer.") {
			t.Fatalf("the rubric is not in the judge's request: %s", r.Raw)
		}
	}
}

// renamedAndReworded are the case's pipeline as a.yaml, and as b.yaml
// with a prompt the QA model answers wrong every time.
func renamedAndReworded(t *testing.T, c qaCase) (a, b string) {
	t.Helper()
	src := fmt.Sprintf(qaPipeline, "")
	return writeFile(t, c.dir, "a.yaml", src), writeFile(t, c.dir, "b.yaml", strings.Replace(src, `"Q: `, `"Question: `, 1))
}
