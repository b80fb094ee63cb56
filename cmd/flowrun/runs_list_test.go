package main

import (
	"fmt"
	"path/filepath"
	"strings"
	"testing"
)

// echoPipeline needs no model: its output holds a ">" and its input.
const echoPipeline = `
version: 1
name: echo
inputs:
  n: {type: integer}
nodes:
  - id: say
    set: {}
outputs:
  text: '"n > " + string(inputs.n)'
  n: inputs.n
score:
  big: outputs.n > 1
`

// TestRunsListsRecentAndFilters: after a batch and many runs, flowrun
// runs shows the newest 20 with a count of the rest, leaves the batch's
// item runs out unless asked, and filters by pipeline, status and batch.
func TestRunsListsRecentAndFilters(t *testing.T) {
	dir := t.TempDir()
	db := filepath.Join(dir, "runs.db")
	p := writeFile(t, dir, "echo.yaml", echoPipeline)
	other := writeFile(t, dir, "other.yaml", "version: 1\nname: other\nnodes:\n  - id: boom\n    set: {}\n    when: fromJSON(\"{\") == 1\n")
	for i := 0; i < 22; i++ {
		if code, _, stderr := flowrun(t, p, "--input", fmt.Sprintf("n=%d", i), "--store", db); code != exitOK {
			t.Fatalf("run %d: exit %d\n%s", i, code, stderr)
		}
	}
	if code, _, _ := flowrun(t, other, "--store", db); code != exitFailed {
		t.Fatalf("the failing pipeline exited %d", code)
	}
	data := writeFile(t, dir, "items.jsonl", "{\"n\": 1}\n{\"n\": 2}\n{\"n\": 3}\n")
	if code, _, stderr := flowrun(t, "batch", p, "--dataset", data, "--store", db); code != exitOK {
		t.Fatalf("batch: exit %d\n%s", code, stderr)
	}
	rows := func(stdout string) int { return strings.Count(stdout, "\n20") } // run ids start with the year

	code, stdout, _ := flowrun(t, "runs", "--store", db)
	if code != exitOK || rows(stdout) != 20 || !strings.Contains(stdout, "... and 3 older (--limit 0 lists all)") ||
		!strings.Contains(stdout, "3 batch item runs not shown (--batch BATCH or --batch-items lists them)") {
		t.Errorf("runs: exit %d, %d rows\n%s", code, rows(stdout), stdout)
	}
	for _, c := range []struct {
		args []string
		rows int
	}{
		{[]string{"--limit", "0"}, 23},
		{[]string{"--limit", "0", "--batch-items"}, 26},
		{[]string{"--batch", "last"}, 3},
		{[]string{"--status", "failed"}, 1},
		{[]string{"--pipeline", "other"}, 1},
		{[]string{"--pipeline", p, "--limit", "5"}, 5},
	} {
		code, stdout, stderr := flowrun(t, append([]string{"runs", "--store", db}, c.args...)...)
		if code != exitOK || rows(stdout) != c.rows {
			t.Errorf("runs %v: exit %d, %d rows, want %d\n%s%s", c.args, code, rows(stdout), c.rows, stdout, stderr)
		}
	}
	if code, _, stderr := flowrun(t, "runs", "--store", db, "--status", "complete"); code != exitInvalid ||
		!strings.Contains(stderr, `--status complete is not a run status (did you mean "completed"?)`) {
		t.Errorf("a bad status: exit %d\n%s", code, stderr)
	}
}

// TestShowPrintsInputsAndOutputs: flowrun show gives what went in and
// what came out, and JSON output leaves ">" as it is.
func TestShowPrintsInputsAndOutputs(t *testing.T) {
	dir := t.TempDir()
	db := filepath.Join(dir, "runs.db")
	p := writeFile(t, dir, "echo.yaml", echoPipeline)
	code, stdout, stderr := flowrun(t, p, "--input", "n=7", "--store", db)
	if code != exitOK || !strings.Contains(stdout, `"text": "n > 7"`) {
		t.Fatalf("run: exit %d\n%s%s", code, stdout, stderr)
	}
	if _, stdout, _ := flowrun(t, p, "--input", "n=7", "--store", db, "--json"); !strings.Contains(stdout, `"text":"n > 7"`) {
		t.Errorf("--json escapes or lacks the output:\n%s", stdout)
	}
	_, stdout, _ = flowrun(t, "show", "last", "--store", db)
	for _, want := range []string{"inputs:\n  n: 7\n", "outputs:\n  n: 7\n  text: \"n > 7\"\n", ", $0, 0 tokens"} {
		if !strings.Contains(stdout, want) {
			t.Errorf("show lacks %q:\n%s", want, stdout)
		}
	}
}
