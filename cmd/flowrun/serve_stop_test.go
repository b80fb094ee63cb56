package main

import (
	"io"
	"net/http"
	"net/url"
	"path/filepath"
	"regexp"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/flowrun/flowrun/llm/llmtest"
)

// TestServeStopsRunOfAnotherProcess: Stop in flowrun serve stops a run
// that a separate flowrun run process is executing on the same store. The
// model call in flight (which would answer only after an hour) is
// abandoned, the process exits 1 with the run stopped from the web UI,
// and flowrun resume then completes it.
func TestServeStopsRunOfAnotherProcess(t *testing.T) {
	srv := llmtest.New(t)
	var calls atomic.Int32
	asked := make(chan struct{}, 1)
	srv.Handle(func(llmtest.Request) llmtest.Reply {
		if calls.Add(1) == 1 {
			asked <- struct{}{}
			return llmtest.Reply{Text: "late", Delay: time.Hour}
		}
		return llmtest.Text("on time")
	})
	dir := t.TempDir()
	pipeline := writeFile(t, dir, "wait.yaml", `
version: 1
name: wait
models: {default: {model: gpt-4.1-mini}}
nodes:
  - id: ask
    llm: {prompt: "answer slowly"}
outputs: {text: nodes.ask.text}
`)
	db := filepath.Join(t.TempDir(), "runs.db")
	env := []string{"OPENAI_BASE_URL=" + srv.URL, "OPENAI_API_KEY=k"}
	p := startDurProc(t, env, "run", pipeline, "--store", db)
	select {
	case <-asked:
	case <-time.After(durDeadline):
		t.Fatalf("the model was never asked\nstderr:\n%s", p.abort())
	}
	id := durOnlyRun(t, db).ID

	base, _ := serve(t, dir, "--store", db)
	client := &http.Client{CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
	resp, err := client.Get(base + "runs/" + id)
	if err != nil {
		t.Fatal(err)
	}
	page, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	csrf := regexp.MustCompile(`name="csrf" value="([0-9a-f]+)"`).FindSubmatch(page)
	if csrf == nil || !strings.Contains(string(page), `id="stop"`) {
		t.Fatalf("the run page offers no Stop for the CLI's running run:\n%s", page)
	}
	req, _ := http.NewRequest(http.MethodPost, base+"runs/"+id+"/stop", strings.NewReader(url.Values{"csrf": {string(csrf[1])}}.Encode()))
	req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	req.Header.Set("Origin", strings.TrimSuffix(base, "/"))
	resp, err = client.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if loc := resp.Header.Get("Location"); resp.StatusCode != http.StatusSeeOther || strings.Contains(loc, "flash=") {
		t.Fatalf("stop: %d %s", resp.StatusCode, loc)
	}

	// p.wait fails the test if the process is still running after
	// durDeadline, long before the model's hour.
	if code := p.wait(); code != exitFailed || !strings.Contains(p.stderr(), "stopped: stopped from the web UI") {
		t.Fatalf("exit %d after Stop, want %d with the run stopped from the web UI\nstderr:\n%s", code, exitFailed, p.stderr())
	}
	if run := durOnlyRun(t, db); run.Status != "stopped" || run.Reason != "stopped from the web UI" {
		t.Fatalf("run %s %q after Stop, want stopped from the web UI", run.Status, run.Reason)
	}
	code, stdout, stderr := runDurProc(t, env, "resume", id, "--store", db)
	if code != exitOK || durOutputs(t, stdout)["text"] != "on time" {
		t.Fatalf("resume: exit %d, stdout %s\nstderr:\n%s", code, stdout, stderr)
	}
}
