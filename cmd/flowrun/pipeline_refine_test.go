package main

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	"github.com/flowrun/flowrun/arc"
	"github.com/flowrun/flowrun/jsonvalue"
	"github.com/flowrun/flowrun/llm/llmtest"
)

// The default_refine pipeline's scripted model: the default task flips the
// grid upside down. The first transform mirrors left-right instead, which
// passes the first (symmetric) training pair and fails the second; after
// the report the coder flips the rows, which solves every pair.
const (
	refineWrongCode = "def transform(grid):\n    return [row[::-1] for row in grid]"
	refineRightCode = "def transform(grid):\n    return [list(row) for row in grid[::-1]]"
	refineRaises    = "def transform(grid):\n    if len(grid) > 2:\n        raise ValueError(\"grid too tall\")\n    return [row[::-1] for row in grid]"
)

func fenced(code string) string {
	return "Here is the program.\n\n```python\n" + code + "\n```\n"
}

// refineScript answers the dreamer and the coder. coders lists the coder's
// replies in order (one per round); the dreamer's reply names the round.
type refineScript struct {
	mu     sync.Mutex
	coders []string
	coded  int
	// fail429 answers this many requests with a 429 when the coder's
	// round fail429At comes (0: never).
	fail429At, fail429 int
}

func (s *refineScript) reply(r llmtest.Request) llmtest.Reply {
	s.mu.Lock()
	defer s.mu.Unlock()
	usage := llmtest.Usage{Prompt: 400, Completion: 80}
	raw := string(r.Raw)
	switch {
	case strings.Contains(raw, "You study ARC puzzles"):
		if strings.Contains(raw, "Round ") {
			return llmtest.Reply{Text: "The report shows the rows must be reversed top to bottom, not each row mirrored: the output is the input flipped upside down.", Usage: usage}
		}
		return llmtest.Reply{Text: "Observations: the output has the same size and colours as the input. The cells are mirrored; the first example looks like a left-right mirror.", Usage: usage}
	case strings.Contains(raw, "You write Python 3"):
		if s.fail429At == s.coded+1 && s.fail429 > 0 {
			s.fail429--
			return llmtest.RateLimited("Retry-After", "0")
		}
		i := min(s.coded, len(s.coders)-1)
		s.coded++
		return llmtest.Reply{Text: s.coders[i], Usage: usage}
	}
	return llmtest.Error(400, "unexpected request")
}

// refineModel is the shipped cassette's script: wrong, then right. It
// tells the rounds apart by the request alone (the second coder request
// carries the previous code), so recording twice gives the same cassette.
func refineModel(r llmtest.Request) llmtest.Reply {
	coders := []string{fenced(refineWrongCode), fenced(refineRightCode)}
	if strings.Contains(string(r.Raw), "Your previous code") {
		coders = coders[1:]
	}
	return (&refineScript{coders: coders}).reply(r)
}

// refineRun runs default_refine live against a fake model answering with
// script, and returns the outputs and the events.
func refineRun(t *testing.T, script *refineScript, args ...string) (map[string]any, []map[string]any) {
	t.Helper()
	return liveRun(t, shippedPath("default_refine.yaml"), script.reply, args...)
}

func TestDefaultRefineRouteAndSandbox(t *testing.T) {
	out, events := refineRun(t, &refineScript{coders: []string{fenced(refineWrongCode), fenced(refineRightCode)}})
	want := []string{"prepare",
		"refine[1]/dream", "refine[1]/code", "refine[1]/test", "refine[1]/score", "refine[1]/record",
		"refine[2]/dream", "refine[2]/code", "refine[2]/test", "refine[2]/score", "refine[2]/record",
		"refine"}
	if got := pathsOf(events, "node_finished"); strings.Join(got, " ") != strings.Join(want, " ") {
		t.Fatalf("route:\n got %v\nwant %v", got, want)
	}
	runs := sandboxRuns(events)
	if len(runs) != 2 {
		t.Fatalf("%d sandbox runs, want 2", len(runs))
	}
	// The first run really ran the mirror: pair 2 came out mirrored.
	first := runs[0]["result"].([]any)
	if got := fmt.Sprint(first[1].(map[string]any)["output"]); got != "[[0 1 1] [0 0 0] [2 0 0]]" {
		t.Fatalf("first attempt on train 2 produced %s", got)
	}
	second := runs[1]["result"].([]any)
	if got := fmt.Sprint(second[2].(map[string]any)["output"]); got != "[[0 0 0] [3 3 0] [3 0 0]]" {
		t.Fatalf("second attempt on the test input produced %s", got)
	}
	s := scores(t, out)
	if len(s) != 2 || s[0]["train_passed"] != 1.0 || s[1]["train_passed"] != 2.0 || s[1]["test_passed"] != 1.0 {
		t.Fatalf("scores %v", s)
	}
	if out["solved_train"] != true || out["solved_test"] != true || out["best_iteration"] != 2.0 || out["best_code"] != refineRightCode {
		t.Fatalf("outputs %v", out)
	}
	// The second round's dreamer saw the first report.
	for _, e := range events {
		if e["type"] == "node_finished" && e["path"] == "refine[1]/score" {
			text := e["output"].(map[string]any)["report"].(map[string]any)["text"].(string)
			if !strings.Contains(text, "train 1: PASS") || !strings.Contains(text, "train 2: FAIL 4 pixels off") {
				t.Fatalf("first report:\n%s", text)
			}
		}
	}
}

func TestDefaultRefineRateLimitMidLoop(t *testing.T) {
	script := &refineScript{coders: []string{fenced(refineWrongCode), fenced(refineRightCode)}, fail429At: 2, fail429: 1}
	out, events := refineRun(t, script)
	if out["solved_train"] != true || len(scores(t, out)) != 2 {
		t.Fatalf("outputs %v", out)
	}
	retried := false
	for _, e := range events {
		if e["type"] == "model_turn" || e["type"] == "node_retry" {
			if strings.Contains(fmt.Sprint(e), "rate_limit") {
				retried = true
			}
		}
	}
	if !retried || script.fail429 != 0 {
		t.Fatalf("the 429 in round 2 was not retried (left %d)", script.fail429)
	}
}

func TestDefaultRefineReplyWithoutCode(t *testing.T) {
	out, events := refineRun(t, &refineScript{coders: []string{"I think the grid should be flipped.", fenced(refineRightCode)}})
	s := scores(t, out)
	if len(s) != 2 || !strings.Contains(s[0]["error"].(string), "no code block") || s[0]["train_passed"] != 0.0 {
		t.Fatalf("scores %v", s)
	}
	if out["solved_train"] != true {
		t.Fatalf("outputs %v", out)
	}
	if n := len(sandboxRuns(events)); n != 1 {
		t.Fatalf("%d sandbox runs, want 1 (the reply without code runs nothing)", n)
	}
	failed := false
	for _, e := range events {
		if e["type"] == "node_failed" && e["path"] == "refine[1]/test" && strings.Contains(fmt.Sprint(e["error"]), "extract_code: no code block") {
			failed = true
		}
	}
	if !failed {
		t.Fatal("no node_failed event for refine[1]/test naming the missing code block")
	}
}

func TestDefaultRefineTransformRaises(t *testing.T) {
	out, events := refineRun(t, &refineScript{coders: []string{fenced(refineRaises), fenced(refineRightCode)}})
	runs := sandboxRuns(events)
	if len(runs) != 2 || runs[0]["ok"] != true {
		t.Fatalf("sandbox runs %v", runs)
	}
	first := runs[0]["result"].([]any)
	if first[0].(map[string]any)["output"] == nil || first[1].(map[string]any)["error"] != "ValueError: grid too tall" {
		t.Fatalf("first run: one pair's exception must not hide the others: %v", first)
	}
	for _, e := range events {
		if e["type"] == "node_finished" && e["path"] == "refine[1]/score" {
			text := e["output"].(map[string]any)["report"].(map[string]any)["text"].(string)
			if !strings.Contains(text, "train 2: ERROR ValueError: grid too tall") {
				t.Fatalf("report:\n%s", text)
			}
		}
	}
	if out["solved_train"] != true || len(scores(t, out)) != 2 {
		t.Fatalf("outputs %v", out)
	}
}

func TestDefaultRefineUnsolvedKeepsBest(t *testing.T) {
	out, events := refineRun(t, &refineScript{coders: []string{fenced(refineWrongCode)}},
		"--input", "task=@../../pipelines/examples/arc/flip_vertical.json")
	if len(scores(t, out)) != 3 || out["solved_train"] != false || out["best_iteration"] != 1.0 {
		t.Fatalf("outputs %v", out)
	}
	exhausted := false
	for _, e := range events {
		exhausted = exhausted || e["type"] == "loop_exhausted"
	}
	if !exhausted {
		t.Fatal("no loop_exhausted event after 3 unsolved rounds")
	}
}

func TestInputFromFile(t *testing.T) {
	dir := t.TempDir()
	p := writeFile(t, dir, "p.yaml", `
version: 1
name: echo
inputs:
  task: {type: object}
  note: {type: string, default: ""}
nodes:
  - id: a
    set: {}
outputs:
  n: len(inputs.task.train)
  first: inputs.task.train[0].input[0][0]
  note: inputs.note
`)
	js := writeFile(t, dir, "t.json", `{"train": [{"input": [[7]], "output": [[1]]}], "test": []}`)
	ym := writeFile(t, dir, "t.yaml", "train:\n  - {input: [[8]], output: [[1]]}\n  - {input: [[2]], output: [[1]]}\ntest: []\n")
	txt := writeFile(t, dir, "note.txt", "hello\n")
	for _, c := range []struct{ file, first, n string }{{js, "7", "1"}, {ym, "8", "2"}} {
		code, stdout, stderr := flowrun(t, p, "--input", "task=@"+c.file, "--input", "note=@"+txt)
		if code != exitOK {
			t.Fatalf("exit %d: %s", code, stderr)
		}
		var out map[string]any
		_ = json.Unmarshal([]byte(stdout), &out)
		if fmt.Sprint(out["first"]) != c.first || fmt.Sprint(out["n"]) != c.n || out["note"] != "hello\n" {
			t.Fatalf("%s: outputs %v", c.file, out)
		}
	}
	code, _, stderr := flowrun(t, p, "--input", "task=@"+filepath.Join(dir, "missing.json"))
	if code != exitInvalid || !strings.Contains(stderr, "missing.json") {
		t.Fatalf("a missing file: exit %d: %s", code, stderr)
	}
	bad := writeFile(t, dir, "bad.json", "{train: [")
	code, _, stderr = flowrun(t, p, "--input", "task=@"+bad)
	if code != exitInvalid || !strings.Contains(stderr, "not JSON or YAML") {
		t.Fatalf("a broken file: exit %d: %s", code, stderr)
	}
	_ = os.Remove(bad)
}

// A task whose test output is unknown (border.json), and a first reply
// that does not compile: the round records the sandbox's error, the next
// round solves the training pairs, and solved_test stays null while the
// prediction is still given.
func TestDefaultRefineUnknownTestAndCompileError(t *testing.T) {
	border := "def transform(grid):\n    h, w = len(grid), len(grid[0])\n    return [[4 if i in (0, h - 1) or j in (0, w - 1) else grid[i][j] for j in range(w)] for i in range(h)]"
	out, _ := refineRun(t, &refineScript{coders: []string{fenced("def transform(grid)\n    return grid"), fenced(border)}},
		"--input", "task=@../../pipelines/examples/arc/border.json")
	s := scores(t, out)
	if len(s) != 2 || !strings.HasPrefix(s[0]["error"].(string), "compile_error: ") || s[1]["error"] != "" {
		t.Fatalf("scores %v", s)
	}
	if out["solved_train"] != true || out["solved_test"] != nil {
		t.Fatalf("outputs %v", out)
	}
	if got := fmt.Sprint(out["test_predictions"]); got != "[[[4 4 4 4] [4 0 0 4] [4 0 6 4] [4 4 4 4]]]" {
		t.Fatalf("test_predictions %s", got)
	}
}

// The example tasks are well-formed: arc_report scores each task's own
// training outputs as a full pass.
func TestARCExampleTasks(t *testing.T) {
	files, _ := filepath.Glob("../../pipelines/examples/arc/*.json")
	if len(files) < 2 {
		t.Fatalf("example tasks: %v", files)
	}
	for _, f := range files {
		b, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		task, err := jsonvalue.Decode(b)
		if err != nil {
			t.Fatalf("%s: %v", f, err)
		}
		var outs []any
		for _, p := range task.(map[string]any)["train"].([]any) {
			outs = append(outs, map[string]any{"output": p.(map[string]any)["output"]})
		}
		rep, err := arc.Report(outs, task)
		if err != nil || rep["solved_train"] != true {
			t.Fatalf("%s: %v %v", f, err, rep["text"])
		}
	}
}
