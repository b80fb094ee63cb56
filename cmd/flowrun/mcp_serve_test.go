package main

import (
	"bytes"
	"context"
	"encoding/json"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// connectServe starts `flowrun mcp serve args...` as a subprocess and
// connects the official Go SDK client to it over stdio.
func connectServe(t *testing.T, opts *mcp.ClientOptions, args ...string) (*mcp.ClientSession, *bytes.Buffer) {
	t.Helper()
	cmd := flowrunProcess(t, nil, append([]string{"mcp", "serve"}, args...)...)
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	client := mcp.NewClient(&mcp.Implementation{Name: "flowrun-test-client", Version: "1"}, opts)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
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
	mu.Lock()
	if len(progress) == 0 || !strings.Contains(strings.Join(progress, "\n"), "classify done") {
		t.Errorf("progress notifications %q", progress)
	}
	mu.Unlock()
	if _, stdout, _ := flowrun(t, "runs"); !strings.Contains(stdout, "triage") {
		t.Errorf("the call's run is not in flowrun runs:\n%s", stdout)
	}
}

func jsonText(v any) string {
	b, _ := json.Marshal(v)
	return string(b)
}
