package flowtest

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/flowrun/flowrun/runtime"
)

// mcpPipeline declares servers that cannot start: only mocks answer.
const mcpPipeline = `
version: 1
name: mcp-mocked
models:
  default: {model: gpt-4.1-mini}
mcp:
  fs: {command: flowrun-no-such-mcp-server}
  docs: {url: "http://127.0.0.1:1/mcp"}
tools:
  answer:
    description: The final answer.
    parameters: {type: object, properties: {text: {type: string}}, required: [text]}
nodes:
  - id: solve
    agent:
      prompt: go
      tools: [fs.*, docs.search, docs.fetch]
      finish: [answer]
  - id: page
    tool: {name: docs.search, args: {q: '"x"'}}
outputs:
  text: nodes.solve.finish.args.text
  page: nodes.page
`

func loadMCPTest(t *testing.T, cases string) (*File, string) {
	t.Helper()
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "p.yaml"), []byte(mcpPipeline), 0o644); err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(dir, "p.test.yaml")
	if err := os.WriteFile(path, []byte(cases), 0o644); err != nil {
		t.Fatal(err)
	}
	f, ds := Load(path)
	return f, ds.String()
}

func runMCPTest(t *testing.T, cases string) []*Result {
	t.Helper()
	f, ds := loadMCPTest(t, cases)
	if f == nil {
		t.Fatalf("load: %s", ds)
	}
	return (&Runner{}).RunAll(context.Background(), []*File{f}, nil, 2)
}

// A case mocks MCP tools by server.tool: results in call order, a tool
// error the model reads, and a server that dies, failing the node. No
// server starts and no cassette is needed.
func TestMCPToolMocksAnswerAgentAndToolNode(t *testing.T) {
	results := runMCPTest(t, `
cases:
  - name: mocked
    mocks:
      solve:
        - {calls: [{name: fs.read_text_file, args: {path: a.txt}}, {name: docs.search, args: {q: y}}]}
        - {calls: [{name: fs.write_file, args: {path: b.txt}}]}
        - {finish: {name: answer, args: {text: ok}}}
    tools:
      fs.read_text_file: {output: hello}
      fs.write_file: {error: tool, message: read-only file system}
      docs.search: [{output: {hits: 1}}, {output: {hits: 2}}]
    expect:
      outputs: {text: ok, page: {hits: 2}}
      events:
        - {type: tool_call, node: solve, count: 4}   # three MCP calls and the finish
  - name: server dies
    mocks:
      solve: {calls: [{name: fs.read_text_file, args: {path: a.txt}}]}
    tools:
      fs.read_text_file: {error: server, message: exit status 3}
    expect:
      status: failed
      class: server
`)
	for _, r := range results {
		if !r.Pass {
			t.Errorf("case %q: %s", r.Case.Name, strings.Join(r.Problems, "\n"))
		}
	}
	got := map[string]*runtime.ToolCall{}
	for _, e := range results[0].Events {
		if e.Type == runtime.EventToolCall {
			got[e.Tool.Name] = e.Tool
		}
	}
	if c := got["fs.read_text_file"]; c == nil || c.Result != "hello" {
		t.Errorf("fs.read_text_file event: %+v", c)
	}
	if c := got["fs.write_file"]; c == nil || c.Error != "read-only file system" {
		t.Errorf("fs.write_file event: %+v", c)
	}
}

// A call to an MCP tool with no mock fails the case, naming the tool and
// where it was called, even though the agent's model read it as an error.
func TestMCPToolWithoutMockFailsTheCase(t *testing.T) {
	results := runMCPTest(t, `
cases:
  - name: unmocked fetch
    mocks:
      solve:
        - {calls: [{name: docs.fetch, args: {url: x}}]}
        - {finish: {name: answer, args: {text: ok}}}
      page: {output: {hits: 0}}
    tools:
      docs.search: {output: {hits: 1}}
      fs.stat: {output: {size: 1}}
`)
	all := strings.Join(results[0].Problems, "\n")
	if results[0].Pass || !strings.Contains(all, "MCP tool docs.fetch was called at solve[1]/docs.fetch but has no mock: add one under tools: docs.fetch") {
		t.Fatalf("want a failure naming the unmocked tool, got pass=%v:\n%s", results[0].Pass, all)
	}
}

// tools: names are checked against the servers the pipeline declares and
// the tools its nodes call, with a did-you-mean.
func TestMCPToolMocksAreChecked(t *testing.T) {
	f, ds := loadMCPTest(t, `
cases:
  - name: typos
    tools:
      fss.read_text_file: {output: x}
      docs.serch: {output: x}
      search: {output: x}
      fs.stat: {error: boom}
      docs.fetch: {output: x, error: tool}
`)
	if f != nil {
		t.Fatal("a test file with bad tools: loaded")
	}
	for _, want := range []string{
		`p.test.yaml:5:7: error: tools: the pipeline has no MCP server "fss" (it declares docs, fs) (did you mean "fs"?)`,
		`p.test.yaml:6:7: error: tools: no node calls MCP tool "docs.serch", so its mock would answer nothing (the pipeline calls docs.search, docs.fetch) (did you mean "docs.search"?)`,
		`p.test.yaml:7:7: error: tools: "search" is not an MCP tool; write server.tool`,
		`p.test.yaml:8:24: error: error: "boom" is not how an MCP call fails`,
		`p.test.yaml:9:19: error: an MCP tool's mock gives output: or error:, one of them`,
	} {
		if !strings.Contains(ds, want) {
			t.Errorf("diagnostics lack %q:\n%s", want, ds)
		}
	}
}
