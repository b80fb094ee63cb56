package main

import (
	"fmt"
	"path/filepath"
	"strings"
	"testing"
)

// --sweep model.default=A,B runs one batch per model, each asking the
// model it names, and prints them side by side with their comparison.
func TestBatchSweepModels(t *testing.T) {
	dir := t.TempDir()
	p := writeFile(t, dir, "qa.yaml", fmt.Sprintf(qaPipeline, ""))
	data := halfRightDataset(t, dir, 4)
	_, srv := newQAModel(t, 0)
	useModel(t, srv)
	db := filepath.Join(dir, "runs.db")
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
	dir := t.TempDir()
	a := writeFile(t, dir, "a.yaml", fmt.Sprintf(qaPipeline, ""))
	b := writeFile(t, dir, "b.yaml", strings.Replace(fmt.Sprintf(qaPipeline, ""), `"Q: `, `"Question: `, 1))
	data := halfRightDataset(t, dir, 4)
	_, srv := newQAModel(t, 0)
	useModel(t, srv)
	code, stdout, stderr := flowrun(t, "batch", a, b, "--dataset", data, "--store", filepath.Join(dir, "runs.db"), "--json")
	if code != exitOK {
		t.Fatalf("exit %d\n%s", code, stderr)
	}
	lines := strings.Split(strings.TrimSpace(stdout), "\n")
	last := lines[len(lines)-1]
	containsAll(t, "the last line", strings.ReplaceAll(last, " ", ""),
		`"type":"sweep_finished"`, `"label":"a.yaml"`, `"label":"b.yaml"`, `"a":"a.yaml","b":"b.yaml","fixed":0,"broken":2`)
}
