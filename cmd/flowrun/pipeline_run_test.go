package main

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	"github.com/flowrun/flowrun/llm/llmtest"
)

// What the tests of the shipped pipelines (pipeline_*_test.go) share: a
// fake model to run them live against, and readers of what a run printed.

// shippedPath is the path of a shipped pipeline, pipelines/NAME.
func shippedPath(name string) string { return filepath.Join("..", "..", "pipelines", name) }

// fakeKey is the API key the CLI sends the fake model. It holds no word:
// any 8 characters of a key are redacted process-wide.
const fakeKey = "sk-fake-QPXVZKWJ"

// fakeModel is a fake OpenAI server the CLI is pointed at for one test
// (OPENAI_BASE_URL, OPENAI_API_KEY), with a run store of its own
// (FLOWRUN_STORE). It keeps the requests its reply function answered.
type fakeModel struct {
	srv      *llmtest.Server
	mu       sync.Mutex
	reply    func(llmtest.Request) llmtest.Reply
	answered []llmtest.Request
}

func newFakeModel(t *testing.T, reply func(llmtest.Request) llmtest.Reply) *fakeModel {
	t.Helper()
	m := &fakeModel{srv: llmtest.New(t), reply: reply}
	m.srv.Handle(func(r llmtest.Request) llmtest.Reply {
		m.mu.Lock()
		m.answered = append(m.answered, r)
		f := m.reply
		m.mu.Unlock()
		return f(r)
	})
	t.Setenv("OPENAI_BASE_URL", m.srv.URL)
	t.Setenv("OPENAI_API_KEY", fakeKey)
	t.Setenv("FLOWRUN_STORE", filepath.Join(t.TempDir(), "runs.db"))
	return m
}

// setReply changes how the model answers from now on.
func (m *fakeModel) setReply(f func(llmtest.Request) llmtest.Reply) {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.reply = f
}

// requests are the requests the reply function answered so far (not
// those the server's Push queue did), in order.
func (m *fakeModel) requests() []llmtest.Request {
	m.mu.Lock()
	defer m.mu.Unlock()
	return append([]llmtest.Request(nil), m.answered...)
}

// liveRun runs the pipeline at path with --json against a fake model
// answering with reply, requires it to exit 0, and returns its outputs and
// events.
func liveRun(t *testing.T, path string, reply func(llmtest.Request) llmtest.Reply, args ...string) (map[string]any, []map[string]any) {
	t.Helper()
	newFakeModel(t, reply)
	code, stdout, stderr := flowrun(t, append([]string{path, "--json"}, args...)...)
	if code != exitOK {
		t.Fatalf("exit %d\n%s\n%s", code, stderr, stdout)
	}
	evs := eventsOf(t, stdout)
	return finishedOutputs(evs), evs
}

// replayRun runs the pipeline at path with --json and no model endpoint,
// so that it replays its cassette, requires it to exit 0 having started
// the nodes of route in order, and returns its events.
func replayRun(t *testing.T, path string, route []string, args ...string) []map[string]any {
	t.Helper()
	code, stdout, stderr := flowrun(t, append([]string{path, "--json"}, args...)...)
	if code != exitOK {
		t.Fatalf("exit %d\n%s", code, stderr)
	}
	evs := eventsOf(t, stdout)
	if got := pathsOf(evs, "node_started"); !jsonEqual(got, route) {
		t.Fatalf("route %q\nwant  %q", got, route)
	}
	return evs
}

// eventsOf parses --json output into events.
func eventsOf(t *testing.T, stdout string) []map[string]any {
	t.Helper()
	var evs []map[string]any
	for _, line := range strings.Split(strings.TrimSpace(stdout), "\n") {
		var e map[string]any
		if err := json.Unmarshal([]byte(line), &e); err != nil {
			t.Fatalf("not a JSON event: %q", line)
		}
		evs = append(evs, e)
	}
	return evs
}

// finishedOutputs are the outputs in a run's run_finished event.
func finishedOutputs(evs []map[string]any) map[string]any {
	var out map[string]any
	for _, e := range evs {
		if e["type"] == "run_finished" {
			out, _ = e["outputs"].(map[string]any)
		}
	}
	return out
}

// pathsOf lists the paths of the events of type typ, in order.
func pathsOf(evs []map[string]any, typ string) []string {
	var out []string
	for _, e := range evs {
		if e["type"] == typ {
			p, _ := e["path"].(string)
			out = append(out, p)
		}
	}
	return out
}

// runOf is the run id in a --json event stream.
func runOf(t *testing.T, evs []map[string]any) string {
	t.Helper()
	id, _ := evs[0]["run"].(string)
	if id == "" {
		t.Fatalf("no run id in %v", evs[0])
	}
	return id
}

// sandboxRuns returns the output of each sandbox_run event, in order.
func sandboxRuns(events []map[string]any) []map[string]any {
	var out []map[string]any
	for _, e := range events {
		if e["type"] == "sandbox_run" {
			out = append(out, e["output"].(map[string]any))
		}
	}
	return out
}

// scores is an ARC pipeline's scores output, one entry per round.
func scores(t *testing.T, out map[string]any) []map[string]any {
	t.Helper()
	list, _ := out["scores"].([]any)
	var s []map[string]any
	for _, x := range list {
		s = append(s, x.(map[string]any))
	}
	return s
}

// marker is text by which a request tells who sent it (a line of a system
// prompt) and the name of that caller.
type marker struct{ text, caller string }

// callerOf names who sent r: the caller of the first marker its body
// holds, or "".
func callerOf(r llmtest.Request, markers []marker) string {
	raw := string(r.Raw)
	for _, m := range markers {
		if strings.Contains(raw, m.text) {
			return m.caller
		}
	}
	return ""
}

// lastUserText is the text of the request's last user message.
func lastUserText(r llmtest.Request) string {
	msgs, _ := r.Body["messages"].([]any)
	for i := len(msgs) - 1; i >= 0; i-- {
		if m, _ := msgs[i].(map[string]any); m["role"] == "user" {
			return contentText(m["content"])
		}
	}
	return ""
}

// contentText is a chat message's text, whether content is a string or
// a list of parts.
func contentText(c any) string {
	if s, ok := c.(string); ok {
		return s
	}
	var b strings.Builder
	parts, _ := c.([]any)
	for _, p := range parts {
		if p, ok := p.(map[string]any); ok && p["type"] == "text" {
			s, _ := p["text"].(string)
			b.WriteString(s)
		}
	}
	return b.String()
}

// checkDocumented requires docs/pipelines.md to have a section on each
// shipped pipeline named, embedding its current graph.
func checkDocumented(t *testing.T, names ...string) {
	t.Helper()
	doc, err := os.ReadFile(filepath.Join("..", "..", "docs", "pipelines.md"))
	if err != nil {
		t.Fatal(err)
	}
	for _, name := range names {
		code, graph, stderr := flowrun(t, "graph", shippedPath(name))
		if code != exitOK {
			t.Fatalf("graph %s: exit %d\n%s", name, code, stderr)
		}
		if !strings.Contains(string(doc), "\n## "+name+" ") || !strings.Contains(string(doc), "```mermaid\n"+graph) {
			t.Fatalf("docs/pipelines.md has no section on %s embedding its current graph:\n%s", name, graph)
		}
	}
}
