package main

import (
	"path/filepath"
	goruntime "runtime"
	"syscall"
	"testing"
	"time"

	"github.com/flowrun/flowrun/llm/llmtest"
)

// SIGTERM stops a run as Ctrl-C does: flowrun exits by itself and the run
// is recorded as stopped, not left running.
func TestHardening12SigtermStopsRun(t *testing.T) {
	if goruntime.GOOS == "windows" {
		t.Skip("Windows has no SIGTERM to send")
	}
	srv := llmtest.New(t)
	asked := make(chan struct{}, 1)
	srv.Handle(func(llmtest.Request) llmtest.Reply {
		asked <- struct{}{}
		return llmtest.Reply{Text: "late", Delay: time.Minute}
	})
	dir := t.TempDir()
	pipeline := writeFile(t, dir, "wait.yaml", `
version: 1
name: wait
models: {default: {model: gpt-4.1-mini}}
nodes:
  - id: ask
    llm: {prompt: "answer slowly"}
`)
	db := filepath.Join(dir, "runs.db")
	p := startDurProc(t, []string{"OPENAI_BASE_URL=" + srv.URL, "OPENAI_API_KEY=k"}, "run", pipeline, "--store", db)
	select {
	case <-asked:
	case <-time.After(durDeadline):
		t.Fatalf("the model was never asked\nstderr:\n%s", p.abort())
	}
	if err := p.cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	if code := p.wait(); code != exitFailed {
		t.Errorf("exit %d after SIGTERM, want %d (a stopped run)\nstderr:\n%s", code, exitFailed, p.stderr())
	}
	if run := durOnlyRun(t, db); run.Status != "stopped" {
		t.Errorf("run status %q after SIGTERM, want stopped", run.Status)
	}
}
