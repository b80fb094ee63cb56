package dsl

import (
	"fmt"
	"path/filepath"
	"sort"
	"strings"
	"time"

	"gopkg.in/yaml.v3"
)

// MCPServer is a server under the top-level mcp: section: a command that
// speaks MCP on stdin/stdout, or a Streamable HTTP endpoint.
type MCPServer struct {
	Name    string
	Pos     Pos
	Command string
	Args    []string
	Env     []MCPValue // in file order
	Dir     string     // absolute working directory of the command
	URL     string
	Headers []MCPValue // each from flowrun's environment
	Timeout time.Duration
}

// MCPValue is an environment variable or header of a server: the literal
// Value, or, when FromEnv is set, flowrun's own variable of that name.
type MCPValue struct {
	Name    string
	Value   string
	FromEnv string
}

// DefaultMCPTimeout bounds one MCP tool call unless the server's timeout:
// says otherwise.
const DefaultMCPTimeout = 60 * time.Second

// MCPTool is one tool a server lists: what validate checks names and
// types against.
type MCPTool struct {
	Name         string
	Description  string
	InputSchema  map[string]any
	OutputSchema map[string]any
}

// MCPLister lists a server's tools for the checks a load makes. An error
// is reported at the server's position.
type MCPLister func(s *MCPServer) ([]MCPTool, error)

// Options change what a load checks beyond the file itself.
type Options struct {
	// ListMCP, when set, lists each MCP server's tools so that the tools
	// agents and tool nodes name are checked and typed. Without it MCP
	// tool names are checked when the run first calls the server.
	ListMCP MCPLister
	// Functions are the expression functions the pipeline may call;
	// DefaultFunctions() when nil.
	Functions *Functions
}

// MCPToolName splits "server.tool" when server is declared in p; tool is
// "*" for all of one server's tools.
func (p *Pipeline) MCPToolName(name string) (server *MCPServer, tool string, ok bool) {
	srv, tool, found := strings.Cut(name, ".")
	if !found || p.MCP[srv] == nil {
		return nil, "", false
	}
	if _, declared := p.Tools[name]; declared {
		return nil, "", false
	}
	return p.MCP[srv], tool, true
}

func (f *file) decodeMCP(n *yaml.Node) {
	f.p.MCP = map[string]*MCPServer{}
	f.p.MCPTools = map[string][]MCPTool{}
	for _, kv := range pairs(n) {
		dir, _ := filepath.Abs(f.dir)
		s := &MCPServer{Name: kv[0].Value, Pos: f.pos(kv[0]), Timeout: DefaultMCPTimeout, Dir: dir}
		v := kv[1]
		s.Command, _ = str(valueOf(v, "command"))
		s.URL, _ = str(valueOf(v, "url"))
		for _, a := range items(valueOf(v, "args")) {
			if x, ok := str(a); ok {
				s.Args = append(s.Args, x)
			}
		}
		if cwd, ok := str(valueOf(v, "cwd")); ok {
			s.Dir = cwd
			if !filepath.IsAbs(cwd) {
				s.Dir = filepath.Join(dir, cwd)
			}
		}
		s.Env = f.mcpValues(valueOf(v, "env"))
		s.Headers = f.mcpValues(valueOf(v, "headers"))
		if t := valueOf(v, "timeout"); t != nil {
			if d := f.duration(t); d > 0 {
				s.Timeout = d
			}
		}
		f.p.MCP[s.Name] = s
		switch {
		case s.Command != "" && s.URL != "":
			f.l.errorf(s.Pos, "mcp server %q: give command: (a program speaking MCP on stdin/stdout) or url: (a Streamable HTTP endpoint), not both", s.Name)
			continue
		case s.Command == "" && s.URL == "":
			f.l.errorf(s.Pos, "mcp server %q: give command: (a program speaking MCP on stdin/stdout) or url: (a Streamable HTTP endpoint)", s.Name)
			continue
		case f.l.opts.ListMCP == nil:
			continue
		}
		tools, err := f.l.opts.ListMCP(s)
		if err != nil {
			f.l.errorf(s.Pos, "mcp server %q: %v", s.Name, err)
			continue
		}
		f.p.MCPTools[s.Name] = tools
	}
}

func (f *file) mcpValues(n *yaml.Node) []MCPValue {
	var out []MCPValue
	for _, kv := range pairs(n) {
		raw, _ := str(kv[1])
		v := MCPValue{Name: kv[0].Value, Value: raw}
		if name, ok := strings.CutPrefix(raw, "env:"); ok {
			v = MCPValue{Name: kv[0].Value, FromEnv: name}
		}
		out = append(out, v)
	}
	return out
}

// checkMCPTool reports a tool name that names a declared server but a tool
// its listing lacks. glob allows "server.*".
func (f *file) checkMCPTool(at *yaml.Node, label, name string, glob bool) {
	s, tool, ok := f.p.MCPToolName(name)
	if !ok {
		return
	}
	if tool == "*" {
		if !glob {
			f.l.errorf(f.pos(at), "%s: %q names every tool of server %s; a tool node calls one tool: name it", label, name, s.Name)
		}
		return
	}
	tools, listed := f.p.MCPTools[s.Name]
	if !listed {
		return
	}
	if mcpTool(tools, tool) == nil {
		names := make([]string, len(tools))
		for i, t := range tools {
			names[i] = s.Name + "." + t.Name
		}
		sort.Strings(names)
		f.l.diags = append(f.l.diags, Diagnostic{Pos: f.pos(at), Severity: Error, MCPListing: s.Name,
			Message: fmt.Sprintf("%s: MCP server %s has no tool %q%s (its listing has %d tools)", label, s.Name, tool, Suggest(name, names), len(tools))})
	}
}

// MCPTool is the listing of "server.tool" when validate listed the server.
func (p *Pipeline) MCPTool(name string) *MCPTool {
	s, tool, ok := p.MCPToolName(name)
	if !ok {
		return nil
	}
	return mcpTool(p.MCPTools[s.Name], tool)
}

func mcpTool(tools []MCPTool, name string) *MCPTool {
	for i := range tools {
		if tools[i].Name == name {
			return &tools[i]
		}
	}
	return nil
}

// mcpToolResult types a call's result: its structured content when the
// tool declares an output schema, else anything.
func mcpToolResult(p *Pipeline, name string) (*Type, bool) {
	if _, _, ok := p.MCPToolName(name); !ok {
		return nil, false
	}
	if t := p.MCPTool(name); t != nil && t.OutputSchema != nil {
		return TypeFromSchema(t.OutputSchema), true
	}
	return AnyType, true
}
