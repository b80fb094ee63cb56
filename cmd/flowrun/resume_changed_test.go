package main

import (
	"path/filepath"
	"regexp"
	"strings"
	"testing"
)

// TestResumeSeesEveryFile checks that a resume refuses when any file the
// pipeline's load read has changed (a prompt file, a called pipeline), not
// only the pipeline file, names the file and the line, and goes on with
// --allow-changed.
func TestResumeSeesEveryFile(t *testing.T) {
	dir := t.TempDir()
	db := filepath.Join(dir, "runs.db")
	pipeline := writeFile(t, dir, "p.yaml", `version: 1
name: guarded
nodes:
  - id: prep
    call: {pipeline: sub.yaml, inputs: {n: 2}}
  - id: approve
    ask: {question: {file: question.md}, schema: {type: boolean}}
outputs:
  doubled: nodes.prep.doubled
  approved: nodes.approve
`)
	writeFile(t, dir, "question.md", "Ship it?\nIt is ready.\n")
	sub := `version: 1
name: sub
inputs: {n: {type: integer}}
outputs:
  doubled: inputs.n * 2
`
	writeFile(t, dir, "sub.yaml", sub)

	code, stdout, stderr := flowrun(t, "run", pipeline, "--no-input", "--store", db)
	if code != exitOK || !strings.Contains(stderr, "waiting") {
		t.Fatalf("first run: exit %d\n%s%s", code, stdout, stderr)
	}
	run := regexp.MustCompile(`\d{8}T\d{6}-[0-9a-f]{8}`).FindString(stderr)
	if run == "" {
		t.Fatalf("no run id in:\n%s", stderr)
	}

	writeFile(t, dir, "question.md", "Ship it?\nIt is NOT ready.\n")
	code, _, stderr = flowrun(t, "resume", run, "--answer", "yes", "--store", db)
	if code == exitOK || !strings.Contains(stderr, "question.md:\n  line 2: was \"It is ready.\", now \"It is NOT ready.\"") {
		t.Fatalf("resume after the prompt file changed: exit %d\n%s", code, stderr)
	}
	writeFile(t, dir, "question.md", "Ship it?\nIt is ready.\n")

	writeFile(t, dir, "sub.yaml", strings.Replace(sub, "inputs.n * 2", "inputs.n * 3", 1))
	code, _, stderr = flowrun(t, "resume", run, "--answer", "yes", "--store", db)
	if code == exitOK || !strings.Contains(stderr, "sub.yaml:\n  line 5: was \"  doubled: inputs.n * 2\", now \"  doubled: inputs.n * 3\"") {
		t.Fatalf("resume after the called pipeline changed: exit %d\n%s", code, stderr)
	}
	if !strings.Contains(stderr, "--allow-changed") {
		t.Fatalf("the refusal should name --allow-changed:\n%s", stderr)
	}

	code, stdout, stderr = flowrun(t, "resume", run, "--answer", "yes", "--allow-changed", "--store", db)
	if code != exitOK || !strings.Contains(stdout, `"approved": true`) {
		t.Fatalf("resume --allow-changed: exit %d\n%s%s", code, stdout, stderr)
	}
}
