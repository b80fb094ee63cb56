package main

import (
	"path/filepath"
	"regexp"
	"strings"
	"testing"
)

// TestShowStateChangesAndAt: flowrun show lists what each checkpoint
// changed in the state under it; --at N prints the state after
// checkpoint N and its change; an unknown checkpoint is refused.
func TestShowStateChangesAndAt(t *testing.T) {
	dir := t.TempDir()
	db := filepath.Join(dir, "runs.db")
	p := writeFile(t, dir, "p.yaml", stepsPipeline(t))
	code, _, stderr := flowrunWithInput(t, "", p, "--store", db)
	run := waitingRun(t, code, stderr, "is waiting for an answer")
	_, text, _ := flowrunWithInput(t, "", "show", run, "--store", db)
	for _, re := range []string{`(?m)^  1 +l\[1\]/inc +\S+ \S+\n +~ n: 0 -> 1$`, `(?m)^  2 +l\[2\]/inc +\S+ \S+\n +~ n: 1 -> 2$`} {
		if !regexp.MustCompile(re).MatchString(text) {
			t.Errorf("show lacks %s:\n%s", re, text)
		}
	}
	code, text, stderr = flowrunWithInput(t, "", "show", run, "--store", db, "--at", "2")
	want := "run " + run + " after checkpoint 2 (l[2]/inc)\nchanges:\n  ~ n: 1 -> 2\nstate:\n  n: 2\n"
	if code != exitOK || !strings.HasPrefix(text, want) || !strings.Contains(text, "flowrun resume "+run+" --from 2 --set state.KEY=VALUE") {
		t.Errorf("show --at 2: exit %d\n%s%s\nwant it to start with\n%s", code, text, stderr, want)
	}
	code, _, stderr = flowrunWithInput(t, "", "show", run, "--store", db, "--at", "9")
	if code != exitInvalid || !strings.Contains(stderr, "has no checkpoint 9 (it has 4;") {
		t.Errorf("show --at 9: exit %d %s", code, stderr)
	}
}

// TestResumeForkWithSetAndInput: flowrun resume --from N --set
// state.NAME=VALUE --input NAME=VALUE forks with the edits (the value
// read as --input reads one), show prints what was edited, and a value
// of the wrong type is refused with exit 2 before anything runs.
func TestResumeForkWithSetAndInput(t *testing.T) {
	dir := t.TempDir()
	db := filepath.Join(dir, "runs.db")
	p := writeFile(t, dir, "p.yaml", `
version: 1
name: edits
inputs:
  word: {type: string, default: hi}
state: {n: 0, tags: []}
nodes:
  - id: l
    loop:
      max_iterations: 2
      body:
        - id: inc
          set: {n: state.n + 1}
  - id: gate
    ask: {question: "go on?", schema: {type: boolean}}
  - id: done
    set: {n: state.n * 10}
outputs: {n: state.n, tags: state.tags, word: inputs.word}
`)
	code, _, stderr := flowrunWithInput(t, "", p, "--store", db)
	run := waitingRun(t, code, stderr, "is waiting for an answer")
	code, stdout, stderr := flowrunWithInput(t, "", "resume", run, "--store", db, "--from", "3", "--set", "state.n=7", "--set", `state.tags=["a"]`,
		"--input", "word=42", "--answer", "true")
	if code != exitOK || !strings.Contains(stdout, `"n": 70`) || !strings.Contains(stdout, `"word": "42"`) || !strings.Contains(stdout, `"tags": [`) {
		t.Fatalf("fork with edits: exit %d\n%s%s", code, stdout, stderr)
	}
	_, text, _ := flowrunWithInput(t, "", "show", "last", "--store", db)
	for _, want := range []string{"forked from run " + run + " at checkpoint 3\n", "edited state.n: 2 -> 7\n", `edited state.tags: [] -> ["a"]` + "\n", `edited inputs.word: "hi" -> "42"` + "\n"} {
		if !strings.Contains(text, want) {
			t.Errorf("show lacks %q:\n%s", want, text)
		}
	}
	code, _, stderr = flowrunWithInput(t, "", "resume", run, "--store", db, "--from", "3", "--set", "state.n=lots")
	if code != exitInvalid || !strings.Contains(stderr, `state.n is of type integer (from its initial value); "lots" is of type string`) {
		t.Errorf("a wrong type: exit %d\n%s", code, stderr)
	}
}

// TestHITLConfirmShowsContext: the prompt of a confirmation on a
// terminal, and the waiting message when nobody answers, say what will
// run (a code node's code, rendered) and the output that led there.
func TestHITLConfirmShowsContext(t *testing.T) {
	needPython(t)
	dir := t.TempDir()
	p := writeFile(t, dir, "c.yaml", engineTestdata(t, "confirmcode.yaml"))
	t.Setenv("FLOWRUN_INTERACTIVE", "1")
	_, _, stderr := flowrunWithInput(t, "n\n", p, "--store", filepath.Join(dir, "runs.db"))
	want := "  will run: tool node compute\n  tool: python_execute with {\"code\":\"print(41 + 1)\"}\n  after count, whose output was:\n    {\n      \"n\": 41\n    }\n? run compute?\n"
	if !strings.Contains(stderr, want) {
		t.Errorf("the prompt lacks\n%s\nin:\n%s", want, stderr)
	}
	t.Setenv("FLOWRUN_INTERACTIVE", "")
	_, _, stderr = flowrunWithInput(t, "", p, "--store", filepath.Join(dir, "runs.db"))
	if !strings.Contains(stderr, "needs your confirmation.\n  will run: tool node compute\n") {
		t.Errorf("the waiting message lacks the context:\n%s", stderr)
	}
	if _, text, _ := flowrunWithInput(t, "", "show", "last", "--store", filepath.Join(dir, "runs.db")); !strings.Contains(text, "  will run: tool node compute\n") {
		t.Errorf("show of the waiting run lacks the context:\n%s", text)
	}
}
