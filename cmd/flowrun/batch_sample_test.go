package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/flowrun/flowrun/llm/llmtest"
)

// arcSampleCoder is the coder's program per sample task (found by its
// first training input as the prompt shows it), per round: the last entry
// answers every later round. Three tasks get solved (0d3d703e in the second
// round) and ed36ccf7 never is: its programs transpose instead of rotating.
var arcSampleCoder = map[string][]string{
	"3 3 8\n3 7 0\n5 0 0": {"def transform(grid):\n    return [list(row[::-1]) for row in grid[::-1]]"},
	"2 2 1\n1 5 1\n5 2 2": {"def transform(grid):\n    return [list(col) for col in zip(*grid)]"},
	"3 1 2\n3 1 2\n3 1 2": {
		"def transform(grid):\n    return [list(row) for row in grid]",
		"def transform(grid):\n    swap = {1: 5, 5: 1, 2: 6, 6: 2, 3: 4, 4: 3, 8: 9, 9: 8}\n    return [[swap.get(c, c) for c in row] for row in grid]",
	},
	"9 0 0\n9 9 9\n9 9 9": {"def transform(grid):\n    return [list(col) for col in zip(*grid)]"},
}

// arcSampleModel answers default_refine's dreamer with a plain observation
// and its coder with the scripted program for the task and round, from the
// request alone, so that items may run in any order and at once.
func arcSampleModel(r llmtest.Request) llmtest.Reply {
	usage := llmtest.Usage{Prompt: 400, Completion: 80}
	all := requestText(r)
	if strings.Contains(all, "You study ARC puzzles") {
		return llmtest.Reply{Text: "Observations: compare each output with its input cell by cell.", Usage: usage}
	}
	for grid, programs := range arcSampleCoder {
		if !strings.Contains(all, "Example 1\nInput:\n"+grid+"\n") {
			continue
		}
		round := strings.Count(all, "Your previous code")
		return llmtest.Reply{Text: fenced(programs[min(round, len(programs)-1)]), Usage: usage}
	}
	return llmtest.Error(400, "arc sample model: unknown task")
}

// requestText is the text of a chat request's messages, run together.
func requestText(r llmtest.Request) string {
	msgs, _ := r.Body["messages"].([]any)
	var text strings.Builder
	for _, m := range msgs {
		mm, _ := m.(map[string]any)
		text.WriteString(llmtest.MessageText(mm["content"]))
	}
	return text.String()
}

// TestBatchARCSampleOffline runs the README's offline batch: default_refine
// over the shipped ARC sample with no endpoint, replaying the sample's
// cassette. -record-cassettes records it again against arcSampleModel.
func TestBatchARCSampleOffline(t *testing.T) {
	needPython(t)
	batchARCSample(t, "default_refine.yaml", "cassette.yaml", arcSampleModel,
		"completed: 4 items, 4 completed, 0 failed",
		"solved                75.0%  3/4 (pass rate)",
		"solved_train          75.0%  3/4",
		"miss ed36ccf7")
}

// batchARCSample runs a shipped pipeline over the ARC sample with no key
// and no endpoint and checks that the batch says it replays the sample's
// cassette (the file named, in the sample's directory) and that its stderr
// holds each of wants. With -record-cassettes it first records that
// cassette against model.
func batchARCSample(t *testing.T, pipeline, cassette string, model func(llmtest.Request) llmtest.Reply, wants ...string) {
	t.Helper()
	pipeline = filepath.Join("..", "..", "pipelines", pipeline)
	dataset := filepath.Join("..", "..", "pipelines", "examples", "arc_sample")
	cassette = filepath.Join(dataset, cassette)
	if *recordCassettes {
		srv := llmtest.New(t)
		srv.Handle(model)
		t.Setenv("OPENAI_BASE_URL", srv.URL)
		t.Setenv("OPENAI_API_KEY", "sk-recording-against-the-fake-model")
		code, _, stderr := flowrun(t, "batch", pipeline, "--dataset", dataset, "--record", cassette, "--store", filepath.Join(t.TempDir(), "rec.db"))
		if code != exitOK {
			t.Fatalf("recording: exit %d\n%s", code, stderr)
		}
		os.Unsetenv("OPENAI_BASE_URL")
		os.Unsetenv("OPENAI_API_KEY")
	}
	code, _, stderr := flowrun(t, "batch", pipeline, "--dataset", dataset, "--store", filepath.Join(t.TempDir(), "runs.db"))
	if code != exitOK {
		t.Fatalf("exit %d\n%s", code, stderr)
	}
	wants = append(wants, "no OPENAI_API_KEY or OPENAI_BASE_URL: replaying "+cassette+" (offline)")
	for _, want := range wants {
		if !strings.Contains(stderr, want) {
			t.Errorf("stderr lacks %q:\n%s", want, stderr)
		}
	}
}
