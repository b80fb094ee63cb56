package mcpclient

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/flowrun/flowrun/dsl"
)

// serverRoleEnv makes the test binary an MCP stdio server whose tool
// "big" answers with a text over MaxMessageBytes.
const serverRoleEnv = "MCPCLIENT_TEST_SERVER"

func TestMain(m *testing.M) {
	if os.Getenv(serverRoleEnv) == "big" {
		s := mcp.NewServer(&mcp.Implementation{Name: "big", Version: "1"}, nil)
		s.AddTool(bigTool, func(context.Context, *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
			text := strings.Repeat("x", MaxMessageBytes+1)
			return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: text}}}, nil
		})
		_ = s.Run(context.Background(), &mcp.StdioTransport{})
		os.Exit(0)
	}
	os.Exit(m.Run())
}

var bigTool = &mcp.Tool{Name: "big", Description: "Answers at length.", InputSchema: map[string]any{"type": "object"}}

// hugeHTTPServer serves the MCP handshake, then answers every tool call
// with a reply of four times MaxMessageBytes, as contentType.
func hugeHTTPServer(t *testing.T, contentType string) string {
	s := mcp.NewServer(&mcp.Implementation{Name: "huge", Version: "1"}, nil)
	s.AddTool(bigTool, func(context.Context, *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
		return &mcp.CallToolResult{}, nil
	})
	h := mcp.NewStreamableHTTPHandler(func(*http.Request) *mcp.Server { return s }, nil)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		if !bytes.Contains(body, []byte(`"tools/call"`)) {
			r.Body = io.NopCloser(bytes.NewReader(body))
			h.ServeHTTP(w, r)
			return
		}
		var call struct{ ID json.RawMessage }
		if err := json.Unmarshal(body, &call); err != nil {
			t.Errorf("the tool call %s: %v", body, err)
		}
		w.Header().Set("Content-Type", contentType)
		start := `{"jsonrpc":"2.0","id":` + string(call.ID) + `,"result":{"content":[{"type":"text","text":"`
		if contentType == "text/event-stream" {
			start = "event: message\ndata: " + start
		}
		if _, err := io.WriteString(w, start); err != nil {
			return
		}
		chunk := bytes.Repeat([]byte("x"), 64<<10)
		for range 4 * MaxMessageBytes / len(chunk) {
			// A client that stops reading at the cap drops the connection,
			// which ends this loop.
			if _, err := w.Write(chunk); err != nil {
				return
			}
		}
		_, _ = io.WriteString(w, `"}]}}`+"\n\n")
	}))
	t.Cleanup(srv.Close)
	return srv.URL
}

// A server whose reply passes MaxMessageBytes is cut off, on every
// transport, with an error that names the server and the cap; flowrun
// never holds more than the cap of it.
func TestReplyOverTheCapIsCutOffOnEveryTransport(t *testing.T) {
	servers := []*dsl.MCPServer{
		{Name: "json", URL: hugeHTTPServer(t, "application/json")},
		{Name: "sse", URL: hugeHTTPServer(t, "text/event-stream")},
		{Name: "stdio", Command: os.Args[0], Env: []dsl.MCPValue{{Name: serverRoleEnv, Value: "big"}}},
	}
	for _, s := range servers {
		t.Run(s.Name, func(t *testing.T) {
			s.Timeout = 10 * time.Minute
			ss := &Sessions{}
			defer ss.Close()
			res, err := ss.Call(t.Context(), s, "big", map[string]any{}, nil)
			var tooLarge *MessageTooLargeError
			if !errors.As(err, &tooLarge) {
				t.Fatalf("got %+v, %v; want a MessageTooLargeError", res, err)
			}
			want := "mcp server " + s.Name + " sent a message of more than 16 MiB, the cap on one MCP message"
			if !strings.Contains(err.Error(), want) {
				t.Errorf("error %q does not say %q", err, want)
			}
		})
	}
}
