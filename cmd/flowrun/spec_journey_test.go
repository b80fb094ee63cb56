package main

import (
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/flowrun/flowrun/internal/testwait"
	"github.com/flowrun/flowrun/llm/llmtest"
)

// TestModelOverrideSurvivesKillAndResume: a run started with --model
// default=gpt-4.1 is killed with SIGKILL while its second model call is
// in flight; flowrun resume, given no --model, goes on with gpt-4.1, as
// the run recorded.
func TestModelOverrideSurvivesKillAndResume(t *testing.T) {
	dir := t.TempDir()
	pipeline := writeFile(t, dir, "two.yaml", `version: 1
name: two
models:
  default: {model: gpt-4.1-mini}
nodes:
  - id: first
    llm: {prompt: "one"}
  - id: second
    llm: {prompt: "two"}
outputs: {text: nodes.second.text}
`)
	db := filepath.Join(dir, "runs.db")
	fake := llmtest.New(t)
	held := make(chan struct{})
	fake.Handle(func(req llmtest.Request) llmtest.Reply {
		if req.N == 2 {
			close(held)
			return llmtest.Reply{Text: "never", Delay: time.Hour}
		}
		return llmtest.Text("reply " + req.Model)
	})
	p := startDurProc(t, []string{"OPENAI_BASE_URL=" + fake.URL, "OPENAI_API_KEY=sk-test"},
		"run", pipeline, "--model", "default=gpt-4.1", "--store", db)
	select {
	case <-held:
	case <-p.exited():
		t.Fatalf("flowrun run ended before its second model call:\n%s", p.stderr())
	case <-time.After(testwait.Hang()):
		t.Fatalf("no second model call within %s:\n%s", testwait.Hang(), p.abort())
	}
	p.kill()
	p.wait()

	fake.Handle(func(req llmtest.Request) llmtest.Reply { return llmtest.Text("reply " + req.Model) })
	t.Setenv("OPENAI_BASE_URL", fake.URL)
	t.Setenv("OPENAI_API_KEY", "sk-test")
	code, stdout, stderr := flowrunIn(t, db, "resume", durOnlyRun(t, db).ID)
	if code != exitOK || !strings.Contains(stdout, "reply gpt-4.1") {
		t.Fatalf("resume: exit %d, %s\n%s", code, stdout, stderr)
	}
	for _, req := range fake.Requests() {
		if req.Model != "gpt-4.1" {
			t.Errorf("request %d went to %s, want the override gpt-4.1", req.N, req.Model)
		}
	}
}
