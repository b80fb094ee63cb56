package llm

import (
	"cmp"
	"fmt"
	"slices"
)

// MCPCall is one recorded call to an MCP server's tool: the answer a
// replayed run gets instead of starting the server.
type MCPCall struct {
	Node   string         `yaml:"node"` // the call site: "solve[2]/fs.read_text_file"
	Tool   string         `yaml:"tool"` // "server.tool"
	Args   map[string]any `yaml:"args"`
	Repeat int            `yaml:"repeat,omitempty"`
	Value  any            `yaml:"value,omitempty"`
	Images []string       `yaml:"images,omitempty"`
	Error  string         `yaml:"error,omitempty"`
}

// MCPListing is the tools one server listed, as the model was offered them.
type MCPListing struct {
	Server string     `yaml:"server"`
	Tools  []ToolSpec `yaml:"tools"`
}

// RecordMCP adds a tool call to the cassette.
func (c *Cassette) RecordMCP(call MCPCall) {
	c.mu.Lock()
	defer c.mu.Unlock()
	k := mcpKey(call.Node, call.Tool)
	call.Repeat = c.served[k]
	c.served[k]++
	c.mcp = append(c.mcp, &call)
}

// ReplayMCP answers the next call of tool at node, in recording order.
func (c *Cassette) ReplayMCP(node, tool string) (*MCPCall, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	k := mcpKey(node, tool)
	n := c.served[k]
	for _, e := range c.mcp {
		if e.Node == node && e.Tool == tool && e.Repeat == n {
			c.served[k]++
			r := *e
			return &r, nil
		}
	}
	return nil, fmt.Errorf("replay: %s has no recorded call %d of MCP tool %s at %q; record the run again", c.name(), n+1, tool, node)
}

// RecordMCPTools keeps a server's listing, once.
func (c *Cassette) RecordMCPTools(server string, tools []ToolSpec) {
	c.mu.Lock()
	defer c.mu.Unlock()
	for _, l := range c.mcpTools {
		if l.Server == server {
			return
		}
	}
	c.mcpTools = append(c.mcpTools, &MCPListing{Server: server, Tools: tools})
}

// MCPTools is the recorded listing of server.
func (c *Cassette) MCPTools(server string) ([]ToolSpec, bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	for _, l := range c.mcpTools {
		if l.Server == server {
			return l.Tools, true
		}
	}
	return nil, false
}

func mcpKey(node, tool string) string { return "mcp\x00" + node + "\x00" + tool }

// sortedMCP is the recorded calls in node, tool and call order.
func (c *Cassette) sortedMCP() ([]*MCPCall, []*MCPListing) {
	c.mu.Lock()
	defer c.mu.Unlock()
	calls := append([]*MCPCall(nil), c.mcp...)
	slices.SortStableFunc(calls, func(a, b *MCPCall) int {
		return cmp.Or(cmp.Compare(a.Node, b.Node), cmp.Compare(a.Tool, b.Tool), cmp.Compare(a.Repeat, b.Repeat))
	})
	listings := append([]*MCPListing(nil), c.mcpTools...)
	slices.SortFunc(listings, func(a, b *MCPListing) int { return cmp.Compare(a.Server, b.Server) })
	return calls, listings
}
