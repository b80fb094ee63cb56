package main

import (
	"path/filepath"
	"strings"
	"testing"

	"github.com/flowrun/flowrun/llm/llmtest"
)

// show marks tokens counted locally for a server that reported no usage,
// per turn and in its summary, in text and in --json.
func TestShowMarksEstimatedTokens(t *testing.T) {
	srv := llmtest.New(t)
	srv.Handle(func(llmtest.Request) llmtest.Reply { return llmtest.Reply{Text: "four", NoUsage: true} })
	useModel(t, srv)
	dir := t.TempDir()
	p := writeFile(t, dir, "p.yaml", `
version: 1
name: t
models: {default: {model: gpt-4.1-mini}}
nodes:
  - id: ask
    llm: {prompt: "2+2?"}
`)
	db := filepath.Join(dir, "runs.db")
	code, stdout, stderr := flowrun(t, "run", p, "--store", db, "--json")
	if code != exitOK {
		t.Fatalf("exit %d\n%s", code, stderr)
	}
	run := runOf(t, eventsOf(t, stdout))
	code, text, stderr := flowrun(t, "show", run, "--store", db)
	if code != exitOK {
		t.Fatalf("show: exit %d %s", code, stderr)
	}
	if !strings.Contains(text, "tokens (estimated)") || !strings.Contains(text, "(some counted locally: the server reported no usage)") {
		t.Fatalf("show does not mark the estimate:\n%s", text)
	}
	if s := showJSON(t, db, run); s["tokens_estimated"] != true {
		t.Fatalf("show --json tokens_estimated = %v", s["tokens_estimated"])
	}
}

// Each failed try a model call retries shows its class and the wait before
// the next one.
func TestLiveViewShowsRetryWait(t *testing.T) {
	srv := llmtest.New(t)
	srv.Push(llmtest.Error(500, "overloaded"))
	srv.Handle(func(llmtest.Request) llmtest.Reply { return llmtest.Text("ok") })
	useModel(t, srv)
	dir := t.TempDir()
	p := writeFile(t, dir, "p.yaml", `
version: 1
name: t
models: {default: {model: gpt-4.1-mini, retry: {backoff: 1ms, jitter: 0}}}
nodes:
  - id: ask
    llm: {prompt: "hi"}
`)
	code, _, stderr := flowrun(t, "run", p, "--store", filepath.Join(dir, "runs.db"))
	if code != exitOK {
		t.Fatalf("exit %d\n%s", code, stderr)
	}
	if !strings.Contains(stderr, "try 1: server: 500 Internal Server Error") || !strings.Contains(stderr, "(retry in 1.0ms)") {
		t.Fatalf("live view:\n%s", stderr)
	}
}
