package main

import (
	"context"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"

	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// mcpAnswerKey names the one input request a waiting run makes.
const mcpAnswerKey = "answer"

// A declined confirmation's request state cannot be replayed to approve
// it: a state is single-use, and bound to the session it was issued to.
func TestMCPServeRequestStateIsSingleUse(t *testing.T) {
	dir := t.TempDir()
	writeFile(t, dir, "launch.yaml", confirmPipeline)
	// The client answers input requests itself, as a client of the
	// current protocol may, so that it can keep and resend a state.
	cs, stderr := connectServe(t, &mcp.ClientOptions{
		Capabilities:   &mcp.ClientCapabilities{Elicitation: &mcp.ElicitationCapabilities{}},
		MultiRoundTrip: &mcp.MultiRoundTripOptions{Disabled: true},
	}, dir)
	ctx := context.Background()
	first, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: "launch", Arguments: map[string]any{}})
	if err != nil || first.RequestState == "" {
		t.Fatalf("the confirmation was not asked: %v %s\n%s", err, jsonText(first), stderr)
	}
	answer := func(action string, content map[string]any) *mcp.CallToolResult {
		res, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: "launch", Arguments: map[string]any{},
			RequestState:   first.RequestState,
			InputResponses: mcp.InputResponseMap{mcpAnswerKey: &mcp.ElicitResult{Action: action, Content: content}}})
		if err != nil {
			t.Fatal(err)
		}
		return res
	}
	if res := answer("decline", nil); !res.IsError || !strings.Contains(jsonText(res.Content), "declined") {
		t.Fatalf("declining: %s", jsonText(res))
	}
	res := answer("accept", map[string]any{mcpAnswerKey: true})
	if !res.IsError || res.StructuredContent != nil || !strings.Contains(jsonText(res.Content), "the request state was already used") {
		t.Fatalf("a replayed state was accepted: %s", jsonText(res))
	}
}

const askThenConfirmPipeline = `
version: 1
name: greet_then_launch
nodes:
  - id: who
    ask: {question: "Whom should I greet?", schema: {type: string}}
  - id: careful
    confirm: true
    set: {}
outputs:
  greeting: '"hello " + nodes.who'
`

// Every client that elicits gets the outputs of a pipeline that asks
// and then confirms: one of the newest protocol (stdio), which answers
// input requests itself, and one of an older protocol (HTTP).
func TestMCPServeAskThenConfirmOnEveryProtocol(t *testing.T) {
	dir := t.TempDir()
	writeFile(t, dir, "p.yaml", askThenConfirmPipeline)
	// A client of an older protocol that does not retry with a request
	// state itself (the Go SDK's client does) is asked every question
	// within the one call.
	for _, transport := range []string{"stdio", "http", "http-without-retries"} {
		t.Run(transport, func(t *testing.T) {
			var mu sync.Mutex
			var asked []string
			opts := &mcp.ClientOptions{
				ElicitationHandler: func(_ context.Context, r *mcp.ElicitRequest) (*mcp.ElicitResult, error) {
					mu.Lock()
					defer mu.Unlock()
					asked = append(asked, r.Params.Message)
					if strings.Contains(r.Params.Message, "confirmation") {
						return &mcp.ElicitResult{Action: "accept", Content: map[string]any{mcpAnswerKey: true}}, nil
					}
					return &mcp.ElicitResult{Action: "accept", Content: map[string]any{mcpAnswerKey: "Ada"}}, nil
				},
			}
			var cs *mcp.ClientSession
			switch transport {
			case "stdio":
				cs, _ = connectServe(t, opts, dir)
			case "http":
				cs = connectHTTP(t, dir, opts)
			default:
				opts.MultiRoundTrip = &mcp.MultiRoundTripOptions{Disabled: true}
				cs = connectHTTP(t, dir, opts)
			}
			res, err := cs.CallTool(context.Background(), &mcp.CallToolParams{Name: "greet_then_launch", Arguments: map[string]any{}})
			if err != nil || res.IsError {
				t.Fatalf("call: %v %s", err, jsonText(res))
			}
			if got := jsonText(res.StructuredContent); got != `{"greeting":"hello Ada"}` || len(asked) != 2 {
				t.Errorf("asked %q, got %s (%s)", asked, got, jsonText(res))
			}
		})
	}
}

// A symbolic link under DIR to a pipeline outside it is not served.
func TestMCPServeRefusesASymlinkOutOfDir(t *testing.T) {
	dir, outside := t.TempDir(), t.TempDir()
	writeFile(t, dir, "greet.yaml", greetPipeline)
	secret := writeFile(t, outside, "launch.yaml", confirmPipeline)
	if err := os.Symlink(secret, filepath.Join(dir, "launch.yaml")); err != nil {
		t.Skip(err)
	}
	cs, stderr := connectServe(t, nil, dir)
	var served []string
	for tool, err := range cs.Tools(context.Background(), nil) {
		if err != nil {
			t.Fatal(err)
		}
		served = append(served, tool.Name)
	}
	// Closing waits for the server to exit, and so for its stderr.
	cs.Close()
	if slices.Contains(served, "launch") {
		t.Fatalf("the pipeline outside DIR is served\n%s", stderr)
	}
	if !strings.Contains(stderr.String(), "launch.yaml is not served: it leads outside") {
		t.Errorf("stderr does not say why launch.yaml is left out:\n%s", stderr)
	}
}

// bearerClient sends the token of flowrun mcp serve --http.
func bearerClient(token string) *http.Client {
	return &http.Client{Transport: roundTripFunc(func(r *http.Request) (*http.Response, error) {
		r = r.Clone(r.Context())
		r.Header.Set("Authorization", "Bearer "+token)
		return http.DefaultTransport.RoundTrip(r)
	})}
}

type roundTripFunc func(*http.Request) (*http.Response, error)

func (f roundTripFunc) RoundTrip(r *http.Request) (*http.Response, error) { return f(r) }

// connectHTTP starts `flowrun mcp serve DIR --http` and connects a client
// of the newest protocol to it.
func connectHTTP(t *testing.T, dir string, opts *mcp.ClientOptions) *mcp.ClientSession {
	t.Helper()
	url, token := startServeHTTP(t, dir)
	client := mcp.NewClient(&mcp.Implementation{Name: "flowrun-test-client", Version: "1"}, opts)
	cs, err := client.Connect(t.Context(), &mcp.StreamableClientTransport{Endpoint: url, HTTPClient: bearerClient(token)}, nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cs.Close() })
	return cs
}
