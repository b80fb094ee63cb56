package main

import (
	"path/filepath"
	"regexp"
	"strings"
	"testing"
)

// TestResumeSeesEveryFile checks that resume refuses a run when a file
// the pipeline's load read has changed (here a called pipeline), names
// the file and the line and the flag that goes on anyway, and goes on
// with --allow-changed. That every file counts (a prompt file too) is
// engine's TestResumeSeesEveryFileTheLoadRead.
func TestResumeSeesEveryFile(t *testing.T) {
	dir := t.TempDir()
	db := filepath.Join(dir, "runs.db")
	for _, name := range []string{"p.yaml", "question.md", "sub.yaml"} {
		writeFile(t, dir, name, engineTestdata(t, filepath.Join("guarded", name)))
	}
	code, stdout, stderr := flowrun(t, "run", filepath.Join(dir, "p.yaml"), "--no-input", "--store", db)
	if code != exitOK || !strings.Contains(stderr, "waiting") {
		t.Fatalf("first run: exit %d\n%s%s", code, stdout, stderr)
	}
	run := regexp.MustCompile(`\d{8}T\d{6}-[0-9a-f]{8}`).FindString(stderr)
	if run == "" {
		t.Fatalf("no run id in:\n%s", stderr)
	}

	writeFile(t, dir, "sub.yaml", strings.Replace(engineTestdata(t, filepath.Join("guarded", "sub.yaml")), "inputs.n * 2", "inputs.n * 3", 1))
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
