package main

import (
	"path/filepath"
	"strings"
	"testing"
)

// A --score that reads a loop the pipeline does not have is refused with
// exit 2, pointing into the expression with a did-you-mean. What the
// trajectory scores give on a replayed sir run is batch's
// TestTrajectoryScoresOfAShippedRun.
func TestBatchTrajectoryScoresSIR(t *testing.T) {
	t.Setenv("OPENAI_API_KEY", "")
	t.Setenv("OPENAI_BASE_URL", "")
	dir := t.TempDir()
	data := writeFile(t, dir, "one.jsonl", `{"id": "default", "expected": "Q2"}`+"\n")
	db := filepath.Join(dir, "runs.db")
	code, _, stderr := flowrun(t, "batch", sirPipeline, "--dataset", data, "--store", db, "--replay", "../../pipelines/sir.cassette.yaml",
		"--score", "revisions=run.iterations.refin")
	if code != exitInvalid || !strings.Contains(stderr, `run.iterations has no field "refin" (did you mean "refine"?)`) {
		t.Fatalf("a misspelt loop id: exit %d\n%s", code, stderr)
	}
}
