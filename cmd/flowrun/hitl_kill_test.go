package main

import (
	"fmt"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/flowrun/flowrun/llm/llmtest"
)

// A run whose process is killed with SIGKILL mid-run reads as interrupted
// (not running) everywhere, from any process, and resumes to the end.
func TestHITL05KilledRunIsInterrupted(t *testing.T) {
	srv := llmtest.New(t)
	asked := make(chan struct{}, 1)
	var killed atomic.Bool
	srv.Handle(func(r llmtest.Request) llmtest.Reply {
		if killed.Load() || strings.Contains(string(r.Raw), "quickly") {
			return llmtest.Reply{Text: "fast"}
		}
		asked <- struct{}{}
		return llmtest.Reply{Text: "late", Delay: time.Minute}
	})
	dir := t.TempDir()
	pipeline := writeFile(t, dir, "slow.yaml", `
version: 1
name: slow
models: {default: {model: gpt-4.1-mini}}
state: {n: 0}
nodes:
  - id: before
    llm: {prompt: "answer quickly"}
    set: {n: 1}
  - id: ask
    llm: {prompt: "answer slowly"}
  - id: after
    set: {n: state.n + 1}
outputs: {n: state.n, text: nodes.ask.text}
`)
	db := filepath.Join(dir, "runs.db")
	env := []string{"OPENAI_BASE_URL=" + srv.URL, "OPENAI_API_KEY=k"}
	p := startDurProc(t, env, "run", pipeline, "--store", db)
	select {
	case <-asked:
	case <-time.After(durDeadline):
		t.Fatalf("the model was never asked\nstderr:\n%s", p.abort())
	}
	pid := p.pid()
	p.kill()
	if code := p.wait(); code != -1 {
		t.Fatalf("exit %d, want killed", code)
	}
	killed.Store(true)

	run := durOnlyRun(t, db)
	if run.Status != "interrupted" {
		t.Fatalf("a killed run reads as %s, want interrupted", run.Status)
	}
	s := showJSON(t, db, run.ID)
	if s["status"] != "interrupted" || !strings.Contains(fmt.Sprint(s["reason"]), fmt.Sprintf("pid %d", pid)) ||
		!strings.Contains(fmt.Sprint(s["reason"]), "flowrun resume "+run.ID) {
		t.Fatalf("show --json: status %v, reason %v", s["status"], s["reason"])
	}
	if _, text, _ := flowrunWithInput(t, "", "show", run.ID, "--store", db); !strings.Contains(text, "interrupted: the process that ran it") ||
		!strings.Contains(text, "  1  before") {
		t.Fatalf("show:\n%s", text)
	}
	if _, list, _ := flowrunWithInput(t, "", "runs", "--store", db); !strings.Contains(list, "interrupted") {
		t.Fatalf("runs:\n%s", list)
	}
	if _, list, _ := flowrunWithInput(t, "", "runs", "--json", "--store", db); !strings.Contains(list, `"status": "interrupted"`) {
		t.Fatalf("runs --json:\n%s", list)
	}

	code, stdout, stderr := runDurProc(t, env, "resume", run.ID, "--store", db)
	if code != exitOK {
		t.Fatalf("resume: exit %d\n%s", code, stderr)
	}
	if out := durOutputs(t, stdout); out["n"] != 2.0 || out["text"] != "fast" {
		t.Fatalf("outputs %v", out)
	}
	if strings.Contains(stderr, "ok    before") {
		t.Fatalf("the node finished before the kill ran again:\n%s", stderr)
	}
	if got := durOnlyRun(t, db); got.Status != "completed" {
		t.Fatalf("after resume: %s", got.Status)
	}
}
