package dsl

import (
	"slices"

	"gopkg.in/yaml.v3"
)

// KindTool is the tool node kind.
const KindTool Kind = "tool"

func init() {
	registerKind(&KindSpec{
		Kind:    KindTool,
		Summary: "Call one tool with arguments.",
		Doc:     "Calls one tool directly with `args` (checked against the tool's parameters): a built-in one, or a pipeline, llm or http tool declared under `tools:`.",
		Output:  "the tool's result: a pipeline tool's outputs, an llm tool's llm output, `read_file`'s text, `http_get`'s and an http tool's `{status, body, truncated}`.",
		Example: `- id: read_notes
  tool:
    name: read_file
    args: {path: '"notes.txt"'}`,
		Schema: `{
  "description": "Call one tool (built-in or declared under \u0060tools:\u0060) with arguments.",
  "type": "object",
  "additionalProperties": false,
  "required": [
    "name"
  ],
  "properties": {
    "name": {
      "description": "Name of the tool to call.",
      "type": "string"
    },
    "args": {
      "description": "Arguments passed to the tool: a mapping whose values are expressions (quote text: '\"x\"'); checked against the tool's parameters.",
      "type": "object"
    }
  }
}`,
		decode: func(d *nodeDecoder) any { return d.f.toolCall(d.label, d.v, d.sc) },
		output: func(r *resolver, n *Node) *Type { return toolResult(r.f.p, n.Tool().Name) },
	})
}

// ToolCall calls one registered tool.
type ToolCall struct {
	Name string
	Args *Value
}

// Tool is the configuration of a tool node; nil for a node of another kind.
func (n *Node) Tool() *ToolCall { return Config[*ToolCall](n) }

func (f *file) toolCall(label string, v *yaml.Node, sc scope) *ToolCall {
	t := &ToolCall{}
	nn := valueOf(v, "name")
	t.Name, _ = str(nn)
	if nn != nil && t.Name != "" {
		decl, declared := f.p.Tools[t.Name]
		_, _, isMCP := f.p.MCPToolName(t.Name)
		switch {
		case isMCP:
			f.checkMCPTool(nn, label, t.Name, false)
		case !declared && !slices.Contains(builtinTools, t.Name):
			f.l.errorf(f.pos(nn), "%s: unknown tool %q%s", label, t.Name, Suggest(t.Name, f.toolNames()))
		case declared && decl.Pipeline == nil && decl.LLM == nil && decl.HTTP == nil:
			f.l.errorf(f.pos(nn), "%s: tool %q has no implementation (no pipeline:, llm: or http:), so it cannot be called", label, t.Name)
		case t.Name == "http_get" && !declared && f.p.HTTPGet == nil:
			f.l.errorf(f.pos(nn), "%s: the built-in tool http_get is off in this pipeline: enable it with a top-level http_get: {allow_hosts: [example.com]}", label)
		}
	}
	if a := valueOf(v, "args"); a != nil {
		t.Args = f.value(a, sc)
	}
	return t
}
