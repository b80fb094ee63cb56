package main

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/flowrun/flowrun/internal/npmtest"
	"github.com/flowrun/flowrun/llm/llmtest"
)

// mcpBins are the npm MCP servers the suite runs against: paths of their
// executables, installed once (skipped without Node.js).
func everythingBin(t *testing.T) string {
	return npmtest.Command(t, "@modelcontextprotocol/server-everything", "mcp-server-everything").Path
}

func filesystemBin(t *testing.T) string {
	return npmtest.Command(t, "@modelcontextprotocol/server-filesystem", "mcp-server-filesystem").Path
}

// mcpSecret is a value only the environment holds; the server gets it
// through env: and no record may show it.
const mcpSecret = "sk-mcp-test-4f1d9a7c2b8e6d3f0a5c"

const mcpAgentPipeline = `
version: 1
name: mcp-agent
models:
  default: {model: gpt-4.1-mini}
mcp:
  every:
    command: %q
    env: {API_TOKEN: "env:FLOWRUN_MCP_TEST_TOKEN", GREETING: hello}
  fs:
    command: %q
    args: [%q]
tools:
  answer:
    description: The final answer.
    parameters: {type: object, properties: {text: {type: string}}, required: [text]}
nodes:
  - id: solve
    agent:
      prompt: "Read notes.txt and add 2 and 3."
      tools: [fs.read_text_file, every.*]
      finish: [answer]
  - id: env
    tool: {name: every.get-env}
outputs:
  text: nodes.solve.finish.args.text
  env: nodes.env
`

// scriptMCPAgent has the fake model read a file through server-filesystem,
// add through server-everything, fetch its tiny image, read a file the
// server refuses, then finish.
func scriptMCPAgent(srv *llmtest.Server, notes string) {
	srv.Push(
		llmtest.Calls(llmtest.Call("fs__read_text_file", map[string]any{"path": notes})),
		llmtest.Calls(llmtest.Call("every__get-sum", map[string]any{"a": 2, "b": 3}), llmtest.Call("every__get-tiny-image", map[string]any{})),
		llmtest.Calls(llmtest.Call("fs__read_text_file", map[string]any{"path": "/etc/hostname"})),
		llmtest.Calls(llmtest.Call("answer", map[string]any{"text": "done"})),
	)
}

// An agent driven by the fake model calls tools of two real MCP servers
// (text, numbers, an image, and a bad call it is told about), finishes,
// and the run records a cassette that replays with no server at all.
func TestMCPAgentCallsRealServersAndReplaysOffline(t *testing.T) {
	every, fsBin := everythingBin(t), filesystemBin(t)
	dir := t.TempDir()
	files := t.TempDir()
	notes := writeFile(t, files, "notes.txt", "hello from disk")
	t.Setenv("FLOWRUN_MCP_TEST_TOKEN", mcpSecret)
	p := writeFile(t, dir, "agent.yaml", fmt.Sprintf(mcpAgentPipeline, every, fsBin, files))
	srv := llmtest.New(t)
	useModel(t, srv)
	scriptMCPAgent(srv, notes)
	cassette := filepath.Join(dir, "agent.cassette.yaml")

	code, stdout, stderr := flowrun(t, p, "--record", cassette)
	if code != exitOK {
		t.Fatalf("exit %d\n%s\n%s", code, stdout, stderr)
	}
	var out struct {
		Text string
		Env  string
	}
	if err := json.Unmarshal([]byte(stdout), &out); err != nil {
		t.Fatalf("outputs: %v\n%s", err, stdout)
	}
	if out.Text != "done" {
		t.Errorf("text %q, want done", out.Text)
	}
	// The server saw the variables listed, and not flowrun's others.
	if !strings.Contains(out.Env, `"GREETING": "hello"`) || !strings.Contains(out.Env, "API_TOKEN") || strings.Contains(out.Env, "OPENAI_BASE_URL") {
		t.Errorf("the server's environment is not the listed one:\n%s", out.Env)
	}
	reqs := srv.Requests()
	if len(reqs) != 4 {
		t.Fatalf("%d model requests, want 4", len(reqs))
	}
	for _, want := range []string{"hello from disk", "The sum of 2 and 3 is 5", "image_url", "data:image/png;base64,", `{\"error\":\"Access denied - path outside allowed directories`} {
		if !strings.Contains(string(reqs[3].Raw), want) {
			t.Errorf("the model was not shown %q", want)
		}
	}
	tools, _ := reqs[0].Body["tools"].([]any)
	if len(tools) < 10 {
		t.Errorf("the agent offered %d tools; every.* should add all of server-everything's", len(tools))
	}
	rec, err := os.ReadFile(cassette)
	if err != nil {
		t.Fatal(err)
	}
	if strings.Contains(string(rec), mcpSecret) || strings.Contains(stderr, mcpSecret) {
		t.Errorf("the secret reached the cassette or the progress output")
	}
	// The run's record in the store: MCP calls are tool_call events named
	// server.tool, and the secret the server echoed is not there.
	_, runsJSON, _ := flowrun(t, "runs", "--json")
	var runs []struct{ ID string }
	if err := json.Unmarshal([]byte(runsJSON), &runs); err != nil || len(runs) == 0 {
		t.Fatalf("runs: %v\n%s", err, runsJSON)
	}
	_, shown, _ := flowrun(t, "show", runs[0].ID, "--json")
	if !strings.Contains(shown, `"every.get-sum"`) || !strings.Contains(shown, `"tool_call"`) {
		t.Errorf("the run's events lack the MCP tool calls:\n%.2000s", shown)
	}
	if strings.Contains(shown, mcpSecret) || strings.Contains(stdout, mcpSecret) {
		t.Errorf("the secret reached the run's events or outputs")
	}
	for _, want := range []string{"mcp_tools:", "node: solve[1]/fs.read_text_file", "tool: fs.read_text_file", "node: solve[2]/every.get-sum", "tool: every.get-sum"} {
		if !strings.Contains(string(rec), want) {
			t.Errorf("cassette lacks %q", want)
		}
	}

	// Offline: no model endpoint, and servers that cannot start.
	os.Unsetenv("OPENAI_BASE_URL")
	os.Unsetenv("OPENAI_API_KEY")
	offline := writeFile(t, dir, "agent.yaml", fmt.Sprintf(mcpAgentPipeline, "/nonexistent/every", "/nonexistent/fs", files))
	code, stdout2, stderr := flowrun(t, offline)
	if code != exitOK {
		t.Fatalf("replay: exit %d\n%s", code, stderr)
	}
	if stdout2 != stdout {
		t.Errorf("replayed outputs differ:\n%s\nwant\n%s", stdout2, stdout)
	}
	// A cassette that lacks one of the calls fails the node, naming the
	// call, instead of showing the model an error it would work around.
	short := strings.Replace(string(rec), "tool: every.get-sum", "tool: every.get-sum-removed", 1)
	writeFile(t, dir, "short.cassette.yaml", short)
	code, _, stderr = flowrun(t, offline, "--replay", filepath.Join(dir, "short.cassette.yaml"))
	if code != exitFailed || !regexp.MustCompile(`node "solve": replay: cassette \S+ has no recorded call 1 of MCP tool every.get-sum`).MatchString(stderr) {
		t.Errorf("replaying a cassette without the every.get-sum call: exit %d, want %d and the missing call named\n%s", code, exitFailed, stderr)
	}
	// flowrun test replays the same cassette in a case.
	writeFile(t, dir, "agent.test.yaml", `
cases:
  - name: reads, adds and finishes
    cassette: agent.cassette.yaml
    expect:
      status: completed
      outputs: {text: done}
`)
	if code, stdout, stderr := flowrun(t, "test", filepath.Join(dir, "agent.test.yaml")); code != exitOK {
		t.Errorf("flowrun test: exit %d\n%s\n%s", code, stdout, stderr)
	}
}

const mcpValidatePipeline = `
version: 1
name: mcp-validate
models:
  default: {model: gpt-4.1-mini}
mcp:
  every:
    command: /bin/sh
    args: [-c, "echo started >> %s; exec %s"]
  gone:
    command: /nonexistent/mcp-server
tools:
  answer: {description: done}
nodes:
  - id: solve
    agent:
      prompt: hi
      tools: [every.get-summ, every.*]
      finish: [answer]
  - id: weather
    tool:
      name: every.get-structured-content
      args: {location: 3}
outputs:
  wind: nodes.weather.wind
`

// validate lists each server once (then from the cache until
// --refresh-mcp, which lists it once however many files declare it), suggests the tool meant, types a tool node's args and
// result from the tool's schemas, and names a server that cannot start
// at its line.
func TestMCPValidateListsChecksAndTypes(t *testing.T) {
	every := everythingBin(t)
	t.Setenv("XDG_CACHE_HOME", t.TempDir())
	dir := t.TempDir()
	starts := filepath.Join(dir, "starts.log")
	p := writeFile(t, dir, "p.yaml", fmt.Sprintf(mcpValidatePipeline, starts, every))
	code, _, stderr := flowrun(t, "validate", p)
	if code != exitInvalid {
		t.Fatalf("exit %d, want %d\n%s", code, exitInvalid, stderr)
	}
	for _, want := range []string{
		`p.yaml:10:3: error: mcp server "gone": cannot start "/nonexistent/mcp-server": no such executable file`,
		`p.yaml:18:15: error: node "solve": MCP server every has no tool "get-summ" (did you mean "every.get-sum"?)`,
		`tools); flowrun validate --refresh-mcp lists them again`,
		`p.yaml:23:24: error: node "weather": parameter "location" of tool "every.get-structured-content" is string, but this is integer`,
		`p.yaml:25:23: error: in ` + "`nodes.weather.wind`" + `: nodes.weather has no field "wind"; its fields are conditions, humidity, temperature`,
	} {
		if !strings.Contains(stderr, want) {
			t.Errorf("validate output lacks %q:\n%s", want, stderr)
		}
	}
	startCount := func() int {
		b, _ := os.ReadFile(starts)
		return strings.Count(string(b), "started")
	}
	if n := startCount(); n != 1 {
		t.Fatalf("server started %d times, want 1", n)
	}
	flowrun(t, "validate", p)
	if n := startCount(); n != 1 {
		t.Errorf("validating again started the server (%d starts); the listing should be cached", n)
	}
	flowrun(t, "validate", "--refresh-mcp", p)
	if n := startCount(); n != 2 {
		t.Errorf("--refresh-mcp: %d starts, want 2", n)
	}
	same := writeFile(t, dir, "same.yaml", fmt.Sprintf(mcpValidatePipeline, starts, every))
	flowrun(t, "validate", "--refresh-mcp", p, same)
	if n := startCount(); n != 3 {
		t.Errorf("--refresh-mcp over two files declaring the same server: %d starts, want 3 (one more)", n)
	}
}

// Each MCP call counts toward limits.max_steps: an agent (one step) whose
// model keeps calling a tool stops at the limit, before the call.
func TestMCPCallsCountInMaxSteps(t *testing.T) {
	dir := t.TempDir()
	p := writeFile(t, dir, "p.yaml", fmt.Sprintf(`
version: 1
name: steps
models:
  default: {model: gpt-4.1-mini}
limits: {max_steps: 3}
mcp:
  helper:
    command: %q
    env: {%s: steps}
nodes:
  - id: solve
    agent:
      prompt: go
      tools: [helper.ok]
`, os.Args[0], testMCPServerEnv))
	srv := llmtest.New(t)
	useModel(t, srv)
	ok := llmtest.Call("helper__ok", map[string]any{})
	srv.Push(llmtest.Calls(ok), llmtest.Calls(ok), llmtest.Calls(ok))
	code, _, stderr := flowrun(t, p)
	if code != exitFailed || !strings.Contains(stderr, "limits.max_steps (3) reached before MCP tool call helper.ok") {
		t.Fatalf("exit %d\n%s", code, stderr)
	}
	if n := strings.Count(stderr, "helper.ok ok"); n != 2 {
		t.Errorf("%d calls ran, want 2 (the agent is step 1)\n%s", n, stderr)
	}
}

// A server that is not installed fails the node that needs it at run
// time too, naming the server and the command.
func TestMCPServerNotInstalledFailsTheNode(t *testing.T) {
	dir := t.TempDir()
	p := writeFile(t, dir, "p.yaml", `
version: 1
name: missing
mcp:
  gone: {command: flowrun-no-such-mcp-server}
nodes:
  - id: call
    tool: {name: gone.anything}
`)
	code, _, stderr := flowrun(t, p)
	if code != exitFailed || !strings.Contains(stderr, `MCP server gone: cannot start "flowrun-no-such-mcp-server": not found in PATH`) {
		t.Fatalf("exit %d\n%s", code, stderr)
	}
}

// An MCP call is traced like any tool: an execute_tool span named after
// server.tool, with its arguments and result.
func TestMCPCallIsTraced(t *testing.T) {
	otelEnv(t)
	rc, url := startOTLPReceiver(t)
	srv := llmtest.New(t)
	t.Setenv("OPENAI_BASE_URL", srv.URL)
	srv.Push(llmtest.Calls(llmtest.Call("helper__ok", map[string]any{})), llmtest.Text("done"))
	p := writeFile(t, t.TempDir(), "p.yaml", fmt.Sprintf(`
version: 1
name: traced
models:
  default: {model: gpt-4.1-mini}
mcp:
  helper:
    command: %q
    env: {%s: traced}
nodes:
  - id: solve
    agent: {prompt: go, tools: [helper.ok]}
`, os.Args[0], testMCPServerEnv))
	if code, _, stderr := flowrun(t, p, "--otel", url); code != exitOK {
		t.Fatalf("exit %d\n%s", code, stderr)
	}
	spans, _ := rc.take()
	for _, s := range spans {
		if s.Name == "execute_tool helper.ok" {
			if got := spanAttr(s, "gen_ai.tool.call.result").GetStringValue(); got != `"fine"` {
				t.Errorf("the span's result is %q", got)
			}
			return
		}
	}
	t.Errorf("no execute_tool helper.ok span among %d spans", len(spans))
}

// In flowrun test a tool node calling an MCP tool takes a mock like any
// tool node, and one without a mock or cassette fails the case saying how
// to answer it; no server starts either way.
func TestMCPToolNodeInFlowrunTest(t *testing.T) {
	dir := t.TempDir()
	writeFile(t, dir, "p.yaml", `
version: 1
name: mocked
mcp:
  gone: {command: flowrun-no-such-mcp-server}
nodes:
  - id: call
    tool: {name: gone.search, args: {q: '"x"'}}
outputs:
  hits: nodes.call.hits
`)
	tf := writeFile(t, dir, "p.test.yaml", `
cases:
  - name: mocked
    mocks:
      call: {output: {hits: 3}}
    expect:
      outputs: {hits: 3}
  - name: unmocked
    expect:
      status: completed
`)
	code, stdout, stderr := flowrun(t, "test", tf)
	if code != exitFailed || !strings.Contains(stdout+stderr, "1 passed, 1 failed") ||
		!strings.Contains(stdout+stderr, "no MCP server is started here; mock its tools in the test case (tools: {gone.TOOL: {output: ...}}) or answer them from a cassette") {
		t.Fatalf("exit %d\n%s\n%s", code, stdout, stderr)
	}
}

// blippingMCPServer serves an MCP tool "ok" over Streamable HTTP; after
// the first call answers, the next request's connection is dropped, as
// when the server goes away, and later requests are served by a new
// handler that knows no earlier session, as a restarted server would.
func blippingMCPServer(t *testing.T) string {
	s := mcp.NewServer(&mcp.Implementation{Name: "blip", Version: "1"}, nil)
	var calls, drop atomic.Int32
	s.AddTool(&mcp.Tool{Name: "ok", Description: "Answers.", InputSchema: map[string]any{"type": "object"}},
		func(context.Context, *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
			if calls.Add(1) == 1 {
				drop.Store(1)
			}
			return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: "fine"}}}, nil
		})
	var h atomic.Pointer[mcp.StreamableHTTPHandler]
	h.Store(mcp.NewStreamableHTTPHandler(func(*http.Request) *mcp.Server { return s }, nil))
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if drop.CompareAndSwap(1, 0) {
			conn, _, err := w.(http.Hijacker).Hijack()
			if err == nil {
				conn.Close()
			}
			h.Store(mcp.NewStreamableHTTPHandler(func(*http.Request) *mcp.Server { return s }, nil))
			return
		}
		h.Load().ServeHTTP(w, r)
	}))
	t.Cleanup(srv.Close)
	return srv.URL
}

// An HTTP server that cannot be reached mid-run fails the node with class
// connection, naming the server and the tool (the model is not asked to
// work around it); the node's retry connects again and goes on.
func TestMCPUnreachableHTTPServerFailsTheNodeAndRetryReconnects(t *testing.T) {
	url := blippingMCPServer(t)
	pipeline := `
version: 1
name: unreachable
models:
  default: {model: gpt-4.1-mini}
mcp:
  web: {url: %q}
tools:
  answer:
    description: The final answer.
    parameters: {type: object, properties: {text: {type: string}}, required: [text]}
nodes:
  - id: solve
    agent:
      prompt: go
      tools: [web.ok]
      finish: [answer]
%s
outputs:
  text: nodes.solve.finish.args.text
`
	ok := llmtest.Call("web__ok", map[string]any{})
	srv := llmtest.New(t)
	useModel(t, srv)
	srv.Push(llmtest.Calls(ok), llmtest.Calls(ok))
	p := writeFile(t, t.TempDir(), "p.yaml", fmt.Sprintf(pipeline, url, ""))
	code, stdout, stderr := flowrun(t, p, "--json")
	if code != exitFailed || !strings.Contains(stderr, "mcp server web could not be reached during a call to ok") {
		t.Fatalf("exit %d, want %d\n%s", code, exitFailed, stderr)
	}
	if !strings.Contains(stdout, `"class":"connection"`) {
		t.Errorf("the node's failure is not of class connection:\n%s", stdout)
	}
	if n := len(srv.Requests()); n != 2 {
		t.Errorf("%d model requests, want 2: the failed call must end the node, not go back to the model", n)
	}

	url = blippingMCPServer(t)
	srv = llmtest.New(t)
	useModel(t, srv)
	srv.Push(llmtest.Calls(ok), llmtest.Calls(ok), llmtest.Calls(ok), llmtest.Calls(llmtest.Call("answer", map[string]any{"text": "done"})))
	p = writeFile(t, t.TempDir(), "p.yaml", fmt.Sprintf(pipeline, url, "    retry: {max_attempts: 2, backoff: 10ms}"))
	code, stdout, stderr = flowrun(t, p)
	if code != exitOK || !strings.Contains(stdout, `"done"`) {
		t.Fatalf("with retry: exit %d\n%s\n%s", code, stdout, stderr)
	}
}

// The progress and log notifications a server sends during a call are
// tool_progress events of the node, and show in the progress view.
func TestMCPServerProgressAndLogsAreEvents(t *testing.T) {
	p := writeFile(t, t.TempDir(), "p.yaml", fmt.Sprintf(`
version: 1
name: progress
mcp:
  helper:
    command: %q
    env: {%s: progress}
nodes:
  - id: call
    tool: {name: helper.slow}
outputs:
  text: nodes.call
`, os.Args[0], testMCPServerEnv))
	code, stdout, stderr := flowrun(t, p, "--json")
	if code != exitOK {
		t.Fatalf("exit %d\n%s\n%s", code, stdout, stderr)
	}
	var got []string
	for _, line := range strings.Split(stdout, "\n") {
		var e struct {
			Type, Path, Message string
			Output              map[string]any
			Tool                struct{ Name string }
		}
		if json.Unmarshal([]byte(line), &e) != nil || e.Type != "tool_progress" {
			continue
		}
		got = append(got, fmt.Sprintf("%s %s %s %v", e.Path, e.Tool.Name, e.Message, e.Output))
	}
	want := []string{
		"call helper.slow step 1 of 2 map[progress:1 total:2]",
		"call helper.slow step 2 of 2 map[progress:2 total:2]",
		"call helper.slow slow: disk almost full map[level:warning]",
	}
	if strings.Join(got, "\n") != strings.Join(want, "\n") {
		t.Errorf("tool_progress events:\n%s\nwant\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
	_, _, stderr = flowrun(t, p)
	if !strings.Contains(stderr, "helper.slow step 2 of 2") {
		t.Errorf("the progress view does not show the server's progress:\n%s", stderr)
	}
}
