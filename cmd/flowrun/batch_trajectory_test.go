package main

import (
	"fmt"
	"path/filepath"
	"strings"
	"testing"
)

// Score expressions read the trajectory of a shipped pipeline's run: sir's
// cassette loops twice, the reasoner asks the translator once and takes
// three turns, and no person is asked anything.
func TestBatchTrajectoryScoresSIR(t *testing.T) {
	t.Setenv("OPENAI_API_KEY", "")
	t.Setenv("OPENAI_BASE_URL", "")
	dir := t.TempDir()
	data := writeFile(t, dir, "one.jsonl", `{"id": "default", "expected": "Q2"}`+"\n")
	db := filepath.Join(dir, "runs.db")
	code, _, stderr := flowrun(t, "batch", sirPipeline, "--dataset", data, "--store", db, "--replay", "../../pipelines/sir.cassette.yaml",
		"--score", "revisions=run.iterations.refine",
		"--score", `asked=any(run.tool_calls, .tool == "terminate_and_ask_translator" && .ok)`,
		"--score", `ocr_args=any(run.tool_calls, .tool == "ocr" && .arguments.region != "")`,
		"--score", "reason_turns=run.turns.reason",
		"--score", `routed=run.route[0] == "refine" && run.route[len(run.route)-1] == "refine[2]/route"`,
		"--score", "questions=len(run.questions)")
	if code != exitOK {
		t.Fatalf("exit %d\n%s", code, stderr)
	}
	_, items := batchStore(t, db)
	want := map[string]any{"revisions": 2, "asked": true, "ocr_args": true, "reason_turns": 3, "routed": true, "questions": 0}
	for name, v := range want {
		if got := items[0].Scores[name]; fmt.Sprint(got) != fmt.Sprint(v) {
			t.Errorf("%s = %v, want %v (scores %v, error %s)", name, got, v, items[0].Scores, items[0].Error)
		}
	}
	code, _, stderr = flowrun(t, "batch", sirPipeline, "--dataset", data, "--store", db, "--replay", "../../pipelines/sir.cassette.yaml",
		"--score", "revisions=run.iterations.refin")
	if code != exitInvalid || !strings.Contains(stderr, `run.iterations has no field "refin" (did you mean "refine"?)`) {
		t.Fatalf("a misspelt loop id: exit %d\n%s", code, stderr)
	}
}
