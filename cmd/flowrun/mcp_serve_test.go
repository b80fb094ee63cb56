package main

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"regexp"
	"strings"
	"sync"
	"testing"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/flowrun/flowrun/internal/npmtest"
	"github.com/flowrun/flowrun/internal/testwait"
)

// connectServe starts `flowrun mcp serve args...` as a subprocess and
// connects the official Go SDK client to it over stdio.
func connectServe(t *testing.T, opts *mcp.ClientOptions, args ...string) (*mcp.ClientSession, *bytes.Buffer) {
	t.Helper()
	cmd := flowrunProcess(t, nil, append([]string{"mcp", "serve"}, args...)...)
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	client := mcp.NewClient(&mcp.Implementation{Name: "flowrun-test-client", Version: "1"}, opts)
	ctx, cancel := context.WithTimeout(context.Background(), durDeadline)
	defer cancel()
	cs, err := client.Connect(ctx, &mcp.CommandTransport{Command: cmd}, nil)
	if err != nil {
		t.Fatalf("connecting to flowrun mcp serve: %v\n%s", err, stderr.String())
	}
	t.Cleanup(func() { cs.Close() })
	return cs, &stderr
}

// The shipped pipelines are tools with their schemas; calling triage runs
// it offline from its cassette as a durable run, with progress, and gives
// its outputs as structured content.
func TestMCPServeShippedPipelineToGoSDKClient(t *testing.T) {
	var mu sync.Mutex
	var progress []string
	cs, stderr := connectServe(t, &mcp.ClientOptions{
		ProgressNotificationHandler: func(_ context.Context, r *mcp.ProgressNotificationClientRequest) {
			mu.Lock()
			defer mu.Unlock()
			progress = append(progress, r.Params.Message)
		},
	}, "../../pipelines")
	ctx := context.Background()
	var triage *mcp.Tool
	names := []string{}
	for tool, err := range cs.Tools(ctx, nil) {
		if err != nil {
			t.Fatal(err)
		}
		names = append(names, tool.Name)
		if tool.Name == "triage" {
			triage = tool
		}
	}
	if triage == nil || len(names) < 5 {
		t.Fatalf("tools %v: want every shipped pipeline, triage among them\n%s", names, stderr)
	}
	in, _ := triage.InputSchema.(map[string]any)
	out, _ := triage.OutputSchema.(map[string]any)
	if !strings.Contains(triage.Description, "support ticket") || !strings.Contains(jsonText(in), `"ticket":{"default"`) ||
		!strings.Contains(jsonText(out), `"refund":{"type":"boolean"}`) || !strings.Contains(jsonText(out), `"reply":{"type":"string"}`) {
		t.Errorf("triage is described as %q\ninput %s\noutput %s", triage.Description, jsonText(in), jsonText(out))
	}

	params := &mcp.CallToolParams{Name: "triage", Arguments: map[string]any{}}
	params.SetProgressToken("triage-1")
	res, err := cs.CallTool(ctx, params)
	if err != nil {
		t.Fatalf("call: %v\n%s", err, stderr)
	}
	if res.IsError {
		t.Fatalf("call failed: %s\n%s", jsonText(res.Content), stderr)
	}
	got, _ := res.StructuredContent.(map[string]any)
	if reply, _ := got["reply"].(string); reply == "" || got["category"] != "billing" {
		t.Errorf("structured content %v", got)
	}
	// The client hands notifications to their handler on a goroutine of
	// their own, while it gives the call its result as the result comes: a
	// progress notification sent before the result may reach the handler
	// after CallTool has returned.
	classified := testwait.Until(func() bool {
		mu.Lock()
		defer mu.Unlock()
		return strings.Contains(strings.Join(progress, "\n"), "classify done")
	})
	if !classified {
		mu.Lock()
		t.Errorf("progress notifications %q", progress)
		mu.Unlock()
	}
	if _, stdout, _ := flowrun(t, "runs"); !strings.Contains(stdout, "triage") {
		t.Errorf("the call's run is not in flowrun runs:\n%s", stdout)
	}
}

func jsonText(v any) string {
	b, _ := json.Marshal(v)
	return string(b)
}

// startServeHTTP starts `flowrun mcp serve DIR --http 127.0.0.1:0` and
// returns its URL and token, read from its first line on stderr.
func startServeHTTP(t *testing.T, dir string) (url, token string) {
	t.Helper()
	cmd := flowrunProcess(t, nil, "mcp", "serve", dir, "--http", "127.0.0.1:0")
	pipe, err := cmd.StderrPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = cmd.Process.Kill()
		_ = cmd.Wait()
	})
	line, err := bufio.NewReader(pipe).ReadString('\n')
	if err != nil {
		t.Fatalf("flowrun mcp serve --http printed no address: %v", err)
	}
	m := regexp.MustCompile(`on (http://\S+) \(send the header Authorization: Bearer (\w+)\)`).FindStringSubmatch(line)
	if m == nil {
		t.Fatalf("unexpected first line: %q", line)
	}
	go func() { _, _ = io.Copy(io.Discard, pipe) }()
	return m[1], m[2]
}

// Over Streamable HTTP: a request without the token is refused, and a
// flowrun pipeline consumes the served counter pipeline as an MCP tool,
// sending the token from its environment and nothing else.
func TestMCPServeHTTPWithTokenConsumedByAPipeline(t *testing.T) {
	url, token := startServeHTTP(t, "../../pipelines")
	resp, err := http.Post(url, "application/json", strings.NewReader(`{"jsonrpc":"2.0","id":1,"method":"tools/list"}`))
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusUnauthorized {
		t.Errorf("a request without the token got %d, want 401", resp.StatusCode)
	}

	dir := t.TempDir()
	t.Setenv("XDG_CACHE_HOME", t.TempDir())
	t.Setenv("FLOWRUN_TEST_MCP_AUTH", "Bearer "+token)
	p := writeFile(t, dir, "p.yaml", fmt.Sprintf(`
version: 1
name: consumer
mcp:
  flow:
    url: %s
    headers: {Authorization: "env:FLOWRUN_TEST_MCP_AUTH"}
nodes:
  - id: count
    tool:
      name: flow.counter
      args: {target: 5, words: '["a", "bbb"]'}
outputs:
  count: nodes.count.count
  longest: nodes.count.longest
`, url))
	code, stdout, stderr := flowrun(t, "validate", p)
	if code != exitOK {
		t.Fatalf("validate: exit %d\n%s", code, stderr)
	}
	code, stdout, stderr = flowrun(t, p, "--json")
	if code != exitOK {
		t.Fatalf("exit %d\n%s\n%s", code, stdout, stderr)
	}
	if !strings.Contains(stdout, `"outputs":{"count":5,"longest":3}`) {
		t.Errorf("outputs:\n%s", stdout)
	}
	if strings.Contains(stdout, token) {
		t.Errorf("the token reached the events")
	}
}

// The MCP Inspector's CLI mode (a client nobody here wrote) lists the
// served pipelines and calls one, reading its structured result.
func TestMCPServeToInspectorCLI(t *testing.T) {
	inspect := func(args ...string) string {
		t.Helper()
		base := []string{"--cli", "-e", "FLOWRUN_TEST_AS_CLI=1", "-e", "FLOWRUN_STORE=" + os.Getenv("FLOWRUN_STORE"), "-e", "GORACE=atexit_sleep_ms=0",
			os.Args[0], "mcp", "serve", "../../pipelines"}
		cmd := npmtest.Command(t, "@modelcontextprotocol/inspector", "mcp-inspector", append(base, args...)...)
		out, err := cmd.CombinedOutput()
		if err != nil {
			t.Fatalf("mcp-inspector %s: %v\n%s", strings.Join(args, " "), err, out)
		}
		return string(out)
	}
	if out := inspect("--method", "tools/list"); !strings.Contains(out, `"name": "counter"`) || !strings.Contains(out, `"outputSchema"`) {
		t.Errorf("tools/list:\n%s", out)
	}
	out := inspect("--method", "tools/call", "--tool-name", "counter", "--tool-arg", "target=2")
	var res struct {
		StructuredContent map[string]any `json:"structuredContent"`
	}
	if err := json.Unmarshal([]byte(out), &res); err != nil || res.StructuredContent["count"] != 2.0 {
		t.Errorf("tools/call counter: %v\n%s", err, out)
	}
}

// flowrun serves MCP over HTTP on this machine only.
func TestMCPServeHTTPRefusesANonLoopbackAddress(t *testing.T) {
	code, _, stderr := flowrun(t, "mcp", "serve", "../../pipelines", "--http", "0.0.0.0:8765")
	if code != exitInvalid || !strings.Contains(stderr, "--http 0.0.0.0:8765: give a loopback address such as 127.0.0.1:8765") {
		t.Fatalf("exit %d\n%s", code, stderr)
	}
}

// A tool's outputs come back as the CLI prints them: > left as it is
// (not \u003e), and a registered secret redacted in the text and in the
// structured content alike.
func TestMCPServeOutputsAreUnescapedAndRedacted(t *testing.T) {
	const key = "sk-test-mcp-serve-0123456789abcdef"
	t.Setenv("OPENAI_API_KEY", key)
	dir := t.TempDir()
	writeFile(t, dir, "echo.yaml", `
version: 1
name: echo
description: Says its text back.
inputs:
  text: {type: string}
state:
  said: ""
nodes:
  - id: say
    set: {said: inputs.text}
outputs:
  said: inputs.text
`)
	cs, stderr := connectServe(t, nil, dir)
	res, err := cs.CallTool(context.Background(), &mcp.CallToolParams{Name: "echo", Arguments: map[string]any{"text": "a > b, key " + key}})
	if err != nil {
		t.Fatalf("call: %v\n%s", err, stderr)
	}
	if res.IsError || len(res.Content) != 1 {
		t.Fatalf("call failed: %s\n%s", jsonText(res.Content), stderr)
	}
	text := res.Content[0].(*mcp.TextContent).Text
	said, _ := res.StructuredContent.(map[string]any)["said"].(string)
	for _, got := range []string{text, said} {
		if !strings.Contains(got, "a > b, key ") || strings.Contains(got, key[8:20]) || strings.Contains(got, `\u003e`) {
			t.Errorf("output %q: want a > b unescaped and the key redacted", got)
		}
	}
}
