package main

import (
	"regexp"
	"strconv"
	"strings"
	"sync"
	"testing"

	"github.com/flowrun/flowrun/llm/llmtest"
)

// Programs the scripted arc_evolve model writes.
const (
	evIdentity  = "def transform(grid):\n    return [list(row) for row in grid]"
	evMirror    = "def transform(grid):\n    return [row[::-1] for row in grid]"
	evFlip      = "def transform(grid):\n    return [list(row) for row in grid[::-1]]"
	evRotate180 = "def transform(grid):\n    return [row[::-1] for row in grid[::-1]]"
	evTranspose = "def transform(grid):\n    return [list(col) for col in zip(*grid)]"
	evRaises    = "def transform(grid):\n    return [grid[r][c] for r in range(len(grid)) for c in range(len(grid) + 1)]"
	evNoCode    = "I think the colours move around; let me look at it again."
)

// evolveScript is what the scripted model answers for one ARC task: write
// is programmer n's program in generation one (write[n-1]); fix is what
// programmer 1 makes of the best parent when revising, "" to leave it as it
// was. Every other reviser hands back its parent unchanged, or evRaises
// when raises is set, so that a revision can also break a program.
type evolveScript struct {
	write  []string
	fix    string
	raises bool
}

// evolveScripts is keyed by the task's first training input as the
// prompt shows it: the default task (flip upside down), then the ARC
// sample's four. 6150a2bd is solved in generation one, the default task,
// 74dd1130 and 0d3d703e by a revision in generation two, and ed36ccf7
// never: its revisions transpose instead of rotating.
var evolveScripts = map[string]evolveScript{
	"1 0\n0 1":            {write: []string{evMirror, evIdentity, evRotate180, evNoCode}, fix: evFlip, raises: true},
	"3 3 8\n3 7 0\n5 0 0": {write: []string{evRotate180, evIdentity, evMirror, evTranspose}},
	"2 2 1\n1 5 1\n5 2 2": {write: []string{evMirror, evIdentity, evRotate180, evNoCode}, fix: evTranspose},
	"3 1 2\n3 1 2\n3 1 2": {
		write: []string{
			evIdentity,
			"def transform(grid):\n    swap = {3: 4, 4: 3, 1: 5, 5: 1}\n    return [[swap.get(c, c) for c in row] for row in grid]",
			evMirror, evNoCode},
		fix: "def transform(grid):\n    swap = {1: 5, 5: 1, 2: 6, 6: 2, 3: 4, 4: 3, 8: 9, 9: 8}\n    return [[swap.get(c, c) for c in row] for row in grid]",
	},
	"9 0 0\n9 9 9\n9 9 9": {write: []string{evTranspose, evIdentity, evMirror, evRotate180}, fix: evTranspose},
}

var (
	evProgrammer = regexp.MustCompile(`programmer (\d+) of \d+`)
	evParentCode = regexp.MustCompile("(?s)```python\n(.*?)\n```")
)

// arcEvolveModel answers arc_evolve's coder from the request alone (the
// task, the programmer's number, the parent's code), so that the
// candidates of a generation may be written in any order and recording
// twice gives the same cassette.
func arcEvolveModel(r llmtest.Request) llmtest.Reply {
	usage := llmtest.Usage{Prompt: 600, Completion: 120}
	all := requestText(r)
	m := evProgrammer.FindStringSubmatch(all)
	if m == nil {
		return llmtest.Error(400, "arc_evolve model: no programmer number in the prompt")
	}
	n, _ := strconv.Atoi(m[1])
	for grid, s := range evolveScripts {
		if !strings.Contains(all, "Example 1\nInput:\n"+grid+"\n") {
			continue
		}
		if !strings.Contains(all, "improving the best") {
			return llmtest.Reply{Text: evReply(s.write[(n-1)%len(s.write)]), Usage: usage}
		}
		parent := evParentCode.FindStringSubmatch(all)
		switch {
		case parent == nil:
			return llmtest.Error(400, "arc_evolve model: a revise prompt without the parent's code")
		case n == 1 && s.fix != "":
			return llmtest.Reply{Text: evReply(s.fix), Usage: usage}
		case n == 2 && s.raises:
			return llmtest.Reply{Text: evReply(evRaises), Usage: usage}
		}
		return llmtest.Reply{Text: evReply(parent[1]), Usage: usage}
	}
	return llmtest.Error(400, "arc_evolve model: unknown task")
}

func evReply(code string) string {
	if code == evNoCode {
		return code
	}
	return fenced(code)
}

// TestArcEvolveRevisesWithTheDiff runs arc_evolve against the scripted
// model and reads what the revisers were sent: each revises a parent of
// the pool (the best first), shown its code, its report and the
// cell-by-cell diff of the pairs it got wrong; the best child's output is
// the first attempt and the runner-up's the second.
func TestArcEvolveRevisesWithTheDiff(t *testing.T) {
	var mu sync.Mutex
	var revisions []string
	out, _ := liveRun(t, shippedPath("arc_evolve.yaml"), func(r llmtest.Request) llmtest.Reply {
		if strings.Contains(string(r.Raw), "improving the best") {
			mu.Lock()
			revisions = append(revisions, string(r.Raw))
			mu.Unlock()
		}
		return arcEvolveModel(r)
	})
	if out["solved_test"] != true || out["stopped_by"] != "solved" || out["best_code"] != evFlip {
		t.Fatalf("outputs: %v", out)
	}
	if gens := out["generations"].([]any); len(gens) != 2 {
		t.Fatalf("%d generations, want 2: %v", len(gens), gens)
	}
	want := []any{map[string]any{
		"attempt_1": []any{[]any{0.0, 0.0, 0.0}, []any{3.0, 3.0, 0.0}, []any{3.0, 0.0, 0.0}},
		"attempt_2": []any{[]any{0.0, 0.0, 3.0}, []any{0.0, 3.0, 3.0}, []any{0.0, 0.0, 0.0}},
	}}
	if !jsonEqual(out["attempts"], want) {
		t.Fatalf("attempts %v, want %v", out["attempts"], want)
	}
	if len(revisions) != 4 {
		t.Fatalf("%d revise requests, want 4", len(revisions))
	}
	// keep: 2, so the best (the mirror, which passes example 1) is revised
	// by programmers 1 and 3 and the runner-up (rotate 180) by 2 and 4.
	mirror, rotate := 0, 0
	for _, raw := range revisions {
		switch {
		case strings.Contains(raw, `return [row[::-1] for row in grid]\n`):
			mirror++
			for _, s := range []string{
				`train 1: PASS`,
				`Example 2: 4 of 9 cells differ (expected/got; . where they agree):\n.   0/1 2/1\n.   .   .\n1/2 1/0 .`,
			} {
				if !strings.Contains(raw, s) {
					t.Errorf("the mirror's revise request lacks %q:\n%s", s, raw)
				}
			}
		case strings.Contains(raw, `return [row[::-1] for row in grid[::-1]]`):
			rotate++
			if !strings.Contains(raw, `Example 1: 4 of 4 cells differ`) {
				t.Errorf("the rotation's revise request lacks its diff:\n%s", raw)
			}
		}
	}
	if mirror != 2 || rotate != 2 {
		t.Errorf("revisions of the mirror %d, of the rotation %d; want 2 each", mirror, rotate)
	}
}

// TestArcEvolveReviserSeesWhyItDidNotRun: a program that does not compile
// scores nothing but is a parent all the same, and its reviser is told
// the compiler's message along with the report.
func TestArcEvolveReviserSeesWhyItDidNotRun(t *testing.T) {
	var revise string
	out, _ := liveRun(t, shippedPath("arc_evolve.yaml"), func(r llmtest.Request) llmtest.Reply {
		if !strings.Contains(requestText(r), "improving the best") {
			return llmtest.Reply{Text: fenced("def transform(grid)\n    return grid[::-1]")}
		}
		revise = requestText(r)
		return llmtest.Reply{Text: fenced(evFlip)}
	}, "--input", "population=1")
	if out["stopped_by"] != "solved" {
		t.Fatalf("outputs %v", out)
	}
	for _, want := range []string{"def transform(grid)\n    return grid[::-1]", "It did not run: compile_error: SyntaxError",
		"train 1: ERROR no output: the code did not run"} {
		if !strings.Contains(revise, want) {
			t.Errorf("the revise prompt lacks %q:\n%s", want, revise)
		}
	}
}

// TestBatchArcEvolveSampleOffline runs arc_evolve over the shipped ARC
// sample with no endpoint: the batch replays the sample's cassette for
// this pipeline, arc_evolve.cassette.yaml, not default_refine's
// cassette.yaml. -record-cassettes records it again against
// arcEvolveModel.
func TestBatchArcEvolveSampleOffline(t *testing.T) {
	needPython(t)
	batchARCSample(t, "arc_evolve.yaml", "arc_evolve.cassette.yaml", arcEvolveModel,
		"completed: 4 items, 4 completed, 0 failed",
		"solved                75.0%  3/4 (pass rate)",
		"ok   74dd1130",
		"miss ed36ccf7")
}
