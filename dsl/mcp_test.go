package dsl

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

const mcpPipeline = `version: 1
name: mcp-listed
mcp:
  fs: {command: fs-server}
  down: {command: down-server}
nodes:
  - id: read
    tool: {name: fs.read_file, args: {path: 3}}
  - id: typo
    tool: {name: fs.raed_file, args: {path: '"a"'}}
outputs:
  text: nodes.read.content
  size: nodes.read.size
`

// With a lister, a load lists each server once, reports one that fails at
// its line, suggests the tool meant, and types args and results from the
// listed schemas.
func TestLoadWithMCPListing(t *testing.T) {
	path := filepath.Join(t.TempDir(), "p.yaml")
	if err := os.WriteFile(path, []byte(mcpPipeline), 0o644); err != nil {
		t.Fatal(err)
	}
	listed := map[string]int{}
	lister := func(s *MCPServer) ([]MCPTool, error) {
		listed[s.Name]++
		if s.Name == "down" {
			return nil, errors.New("cannot start \"down-server\": not found in PATH")
		}
		return []MCPTool{{
			Name:         "read_file",
			InputSchema:  map[string]any{"type": "object", "properties": map[string]any{"path": map[string]any{"type": "string"}}},
			OutputSchema: map[string]any{"type": "object", "properties": map[string]any{"content": map[string]any{"type": "string"}}, "additionalProperties": false},
		}}, nil
	}
	p, ds := LoadWith(path, Options{ListMCP: lister})
	if p != nil {
		t.Fatal("loaded; want errors")
	}
	got := ds.String()
	for _, want := range []string{
		`p.yaml:5:3: error: mcp server "down": cannot start "down-server": not found in PATH`,
		`p.yaml:8:45: error: node "read": parameter "path" of tool "fs.read_file" is string, but this is integer`,
		`p.yaml:10:18: error: node "typo": MCP server fs has no tool "raed_file" (did you mean "fs.read_file"?)`,
		`p.yaml:13:20: error: in ` + "`nodes.read.size`" + `: nodes.read has no field "size"; its fields are content`,
	} {
		if !strings.Contains(got, want) {
			t.Errorf("diagnostics lack %q:\n%s", want, got)
		}
	}
	if listed["fs"] != 1 || listed["down"] != 1 {
		t.Errorf("listed %v, want each server once", listed)
	}
}
