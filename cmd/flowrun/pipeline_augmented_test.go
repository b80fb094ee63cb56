package main

import (
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

// The augmented pipeline's scripted model, on its default task (recolor:
// every 1 becomes 2). The first transform turns every non-zero cell into
// 2, which fails the pairs holding a 3; after the report the coder
// recolours only the 1s, which solves every pair.
const (
	augmentedWrongCode = "def transform(grid):\n    return [[2 if c else 0 for c in row] for row in grid]"
	augmentedRightCode = "def transform(grid):\n    return [[2 if c == 1 else c for c in row] for row in grid]"
)

// augmentedModel answers default_refine's dreamer and coder as called by
// augmented.yaml. Like refineModel it tells the rounds apart by the
// request alone.
func augmentedModel(r llmtest.Request) llmtest.Reply {
	usage := llmtest.Usage{Prompt: 900, Completion: 80}
	raw := string(r.Raw)
	switch {
	case strings.Contains(raw, "You study ARC puzzles"):
		if strings.Contains(raw, "Round ") {
			return llmtest.Reply{Text: "Only colour 1 changes: it becomes 2. Colour 3 and the background 0 stay as they are.", Usage: usage}
		}
		return llmtest.Reply{Text: "Observations: the output has the input's size and shape; the coloured cells become 2 and the background 0 stays.", Usage: usage}
	case strings.Contains(raw, "You write Python 3"):
		if strings.Contains(raw, "Your previous code") {
			return llmtest.Reply{Text: fenced(augmentedRightCode), Usage: usage}
		}
		return llmtest.Reply{Text: fenced(augmentedWrongCode), Usage: usage}
	}
	return llmtest.Error(400, "unexpected request")
}

// augmentedTrainPairs is how many training pairs arc_augment makes of the
// default task: the 3 originals, then the copies not equal to an earlier
// pair: 3 of train 1 (its left-right mirror is itself and upside down is
// its 180 rotation), all 5 of train 2, and 1 of train 3 ([[1,3],[3,1]]
// rotated by 90; the other copies repeat it or the original).
const augmentedTrainPairs = 3 + 3 + 5 + 1

func TestAugmentedRouteAndCalledPipeline(t *testing.T) {
	out, events := liveRun(t, shippedPath("augmented.yaml"), augmentedModel)
	want := []string{"augment",
		"solve/prepare",
		"solve/refine[1]/dream", "solve/refine[1]/code", "solve/refine[1]/test", "solve/refine[1]/score", "solve/refine[1]/record",
		"solve/refine[2]/dream", "solve/refine[2]/code", "solve/refine[2]/test", "solve/refine[2]/score", "solve/refine[2]/record",
		"solve/refine", "solve"}
	if got := pathsOf(events, "node_finished"); strings.Join(got, " ") != strings.Join(want, " ") {
		t.Fatalf("route:\n got %v\nwant %v", got, want)
	}
	// The called pipeline's sandbox ran the code on every augmented
	// training input, then the test input.
	runs := sandboxRuns(events)
	if len(runs) != 2 {
		t.Fatalf("%d sandbox runs, want 2", len(runs))
	}
	for i, run := range runs {
		if n := len(run["result"].([]any)); n != augmentedTrainPairs+1 {
			t.Fatalf("sandbox run %d scored %d inputs, want %d", i+1, n, augmentedTrainPairs+1)
		}
	}
	// The third original pair [[1,3],[3,1]] came out all 2s the first time.
	if got := fmt.Sprint(runs[0]["result"].([]any)[2].(map[string]any)["output"]); got != "[[2 2] [2 2]]" {
		t.Fatalf("first attempt on train 3 produced %s", got)
	}
	s := scores(t, out)
	if len(s) != 2 || s[0]["train_total"] != float64(augmentedTrainPairs) || s[1]["train_passed"] != float64(augmentedTrainPairs) {
		t.Fatalf("scores %v", s)
	}
	// 10 pairs hold no 3: trains 1 and 2 and their copies.
	if s[0]["train_passed"] != float64(1+3+1+5) {
		t.Fatalf("first round passed %v pairs, want 10", s[0]["train_passed"])
	}
	if out["original_pairs"] != 3.0 || out["augmented_pairs"] != float64(augmentedTrainPairs) ||
		out["solved_train"] != true || out["solved_test"] != true || out["best_code"] != augmentedRightCode {
		t.Fatalf("outputs %v", out)
	}
	if got := fmt.Sprint(out["test_predictions"]); got != "[[[3 2 0] [2 0 3]]]" {
		t.Fatalf("test_predictions %s", got)
	}
}

// The cassette shows the augmented task reaching the called pipeline: the
// dreamer's first prompt, recorded under the call's node path, lists every
// augmented pair, among them a rotated copy no original has.
func TestAugmentedCassetteShowsAugmentedPairs(t *testing.T) {
	b, err := os.ReadFile("../../pipelines/augmented.cassette.yaml")
	if err != nil {
		t.Fatal(err)
	}
	c := string(b)
	i := strings.Index(c, "- node: solve/refine[1]/dream\n")
	if i < 0 {
		t.Fatal("no model exchange recorded under solve/refine[1]/dream")
	}
	entry := c[i+1:]
	if j := strings.Index(entry, "\n  - node: "); j >= 0 {
		entry = entry[:j]
	}
	if !strings.Contains(entry, fmt.Sprintf("Example %d\n", augmentedTrainPairs)) || strings.Contains(entry, fmt.Sprintf("Example %d\n", augmentedTrainPairs+1)) {
		t.Fatalf("the dreamer's prompt does not list %d training pairs:\n%s", augmentedTrainPairs, entry)
	}
	// train 1 rotated 90 degrees clockwise: [[0,1],[1,0],[0,1]] -> 2s.
	rotated := "Input:\n            0 1\n            1 0\n            0 1\n            Output:\n            0 2\n            2 0\n            0 2\n"
	if !strings.Contains(entry, rotated) {
		t.Fatalf("the rotated copy of train 1 is not in the dreamer's prompt:\n%s", entry)
	}
}

// Each example task's augmentation keeps every original pair first and
// only adds pairs the task's own rule still fits where the rule commutes
// with rotations and flips (recolor, border).
func TestAugmentedExampleTasks(t *testing.T) {
	for _, name := range []string{"recolor.json", "border.json"} {
		b, err := os.ReadFile(filepath.Join("../../pipelines/examples/arc", name))
		if err != nil {
			t.Fatal(err)
		}
		task, err := jsonvalue.Decode(b)
		if err != nil {
			t.Fatal(err)
		}
		aug, err := arc.Augment(task)
		if err != nil {
			t.Fatal(err)
		}
		orig := task.(map[string]any)["train"].([]any)
		train := aug["train"].([]any)
		if len(train) <= len(orig) || fmt.Sprint(train[:len(orig)]) != fmt.Sprint(orig) {
			t.Fatalf("%s: augmented train %v", name, train)
		}
	}
}

// --model coder=... and --model default=... reach the called pipeline's
// coder and dreamer (augmented.yaml declares the same model names).
func TestAugmentedModelOverrideReachesCall(t *testing.T) {
	var mu sync.Mutex
	seen := map[string]bool{}
	out, _ := liveRun(t, shippedPath("augmented.yaml"), func(r llmtest.Request) llmtest.Reply {
		mu.Lock()
		raw := string(r.Raw)
		role := "dreamer"
		if strings.Contains(raw, "You write Python 3") {
			role = "coder"
		}
		seen[role+"="+fmt.Sprint(r.Body["model"])] = true
		mu.Unlock()
		return augmentedModel(r)
	}, "--model", "coder=gpt-coder-x", "--model", "default=gpt-dreamer-y")
	if !seen["coder=gpt-coder-x"] || !seen["dreamer=gpt-dreamer-y"] || len(seen) != 2 || out["solved_train"] != true {
		t.Fatalf("models seen %v, outputs %v", seen, out)
	}
}
