package mcpclient

import (
	"encoding/json"
	"os"
	"strings"
	"testing"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/flowrun/flowrun/dsl"
)

// Results reach flowrun as the protocol gives them: structured content
// first, else text, else the items with images passed on whole.
func TestConvertKeepsWhatTheServerGave(t *testing.T) {
	png := []byte{0x89, 'P', 'N', 'G'}
	cases := []struct {
		name string
		in   *mcp.CallToolResult
		want string
	}{
		{"text", &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: "a"}, &mcp.TextContent{Text: "b"}}},
			`{"value":"a\nb"}`},
		{"structured", &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: "{}"}}, StructuredContent: map[string]any{"n": 1}},
			`{"value":{"n":1}}`},
		{"image", &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: "see"}, &mcp.ImageContent{Data: png, MIMEType: "image/png"}}},
			`{"value":[{"text":"see","type":"text"},{"bytes":4,"mime_type":"image/png","note":"the image follows this message","type":"image"}],"images":["data:image/png;base64,iVBORw=="]}`},
		{"error", &mcp.CallToolResult{IsError: true, Content: []mcp.Content{&mcp.TextContent{Text: "no such file"}}},
			`{"value":null,"error":"no such file"}`},
		{"silent error", &mcp.CallToolResult{IsError: true},
			`{"value":null,"error":"the tool reported an error without text"}`},
	}
	for _, c := range cases {
		b, _ := json.Marshal(Convert(c.in))
		if string(b) != c.want {
			t.Errorf("%s: %s\nwant %s", c.name, b, c.want)
		}
	}
}

// Closing a run's sessions when no server was started is a no-op, and a
// closed Sessions starts nothing more.
func TestClosedSessionsStartNothing(t *testing.T) {
	ss := &Sessions{}
	ss.Close()
	_, err := ss.Tools(t.Context(), &dsl.MCPServer{Name: "late", Command: "true"})
	if err == nil || err.Error() != "mcp server late: the run has ended" {
		t.Fatalf("a closed Sessions answered %v", err)
	}
}

// A server that does not start says why, with its stderr, and what to
// check: validate and run show it at the server's line.
func TestServerThatExitsAtStartSaysWhatToCheck(t *testing.T) {
	if _, err := os.Stat("/bin/sh"); err != nil {
		t.Skip("no /bin/sh")
	}
	_, err := List(t.Context(), &dsl.MCPServer{Name: "bad", Command: "/bin/sh", Args: []string{"-c", "echo no such module >&2; exit 3"}})
	if err == nil {
		t.Fatal("listed a server that exits at start")
	}
	for _, want := range []string{"no such module", "check command: and args:; run them by hand"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("error lacks %q: %v", want, err)
		}
	}
	_, err = List(t.Context(), &dsl.MCPServer{Name: "down", URL: "http://127.0.0.1:1/mcp"})
	if err == nil || !strings.Contains(err.Error(), "check url:") {
		t.Errorf("an unreachable URL gave %v, want what to check", err)
	}
}
