package dsl

import (
	"slices"
	"sort"
	"strings"

	"gopkg.in/yaml.v3"
)

// KindAgent is the agent node kind.
const KindAgent Kind = "agent"

func init() {
	registerKind(&KindSpec{
		Kind:    KindAgent,
		Summary: "A tool-calling loop that ends when the model calls a finish tool.",
		Doc:     "A tool-calling loop: the model may call `tools` (built in: `python_execute`, `code_execute`, `read_file`, `http_get`; or declared under `tools:`) for up to `max_steps` turns, and ends by calling one of its `finish` tools, whose arguments are its answer. On the last step the model must call a finish tool. Truncated or invalid tool calls are retried (`tool_retries`, 2 by default) and removed from the memory. `finish.args` is typed by the finish tools' parameters.",
		Output:  "`{finish: {name, args}, steps, text, usage, cost_usd}`.",
		Example: `- id: solve
  agent:
    prompt: "Answer: ${{ inputs.question }}"
    tools: [python_execute]
    finish: [answer]
    max_steps: 4`,
		Schema: `{
  "description": "A tool-calling loop: the model may call \u0060tools\u0060 up to \u0060max_steps\u0060 times and stops when it calls a \u0060finish\u0060 tool.",
  "type": "object",
  "additionalProperties": false,
  "properties": {
    "model": {
      "description": "Name of a model under \u0060models:\u0060 (default \u0060default\u0060).",
      "type": "string"
    },
    "system": {
      "$ref": "#/$defs/prompt",
      "description": "System prompt for the agent."
    },
    "prompt": {
      "$ref": "#/$defs/prompt",
      "description": "User message that starts the agent's turn."
    },
    "images": {
      "$ref": "#/$defs/images"
    },
    "memory": {
      "description": "Name of a memory under \u0060memories:\u0060; the agent continues and extends that conversation.",
      "type": "string"
    },
    "temperature": {
      "description": "Sampling temperature for the agent, overriding the model's.",
      "type": "number"
    },
    "max_tokens": {
      "description": "Most tokens to generate per model call, overriding the model's.",
      "type": "integer",
      "minimum": 1
    },
    "cache": {
      "$ref": "#/$defs/node_cache"
    },
    "tools": {
      "description": "Names of the tools the agent may call: built-in, declared under \u0060tools:\u0060, or an MCP server's as \u0060server.tool\u0060 (\u0060server.*\u0060 for all of its tools).",
      "type": "array",
      "items": {
        "type": "string"
      }
    },
    "finish": {
      "description": "Names of tools under \u0060tools:\u0060 that end the agent when called; the call becomes \u0060finish\u0060.",
      "type": "array",
      "items": {
        "type": "string"
      }
    },
    "max_steps": {
      "description": "Most model turns the agent takes (default 10). On the last one the model must call a finish tool, or, with no finish tools, answer without tools.",
      "type": "integer",
      "minimum": 1
    },
    "tool_retries": {
      "description": "How many times a turn whose tool call is truncated or does not match the tool's parameters is asked again (default 2); then the node fails with invalid_output.",
      "type": "integer",
      "minimum": 0
    }
  }
}`,
		decode: func(d *nodeDecoder) any { return d.f.agent(d.label, d.v, d.sc) },
		output: func(r *resolver, n *Node) *Type { return agentOutput(r.f.p, n.Agent()) },
	})
}

// Agent is a tool-calling loop.
type Agent struct {
	LLM
	Tools       []string
	Finish      []string
	MaxSteps    int
	ToolRetries int
}

// Agent is the configuration of a agent node; nil for a node of another kind.
func (n *Node) Agent() *Agent { return Config[*Agent](n) }

func (f *file) agent(label string, v *yaml.Node, sc scope) *Agent {
	a := &Agent{ToolRetries: 2}
	f.modelCall(label, &a.LLM, v, sc)
	a.MaxSteps, _ = intValue(valueOf(v, "max_steps"))
	if r, ok := intValue(valueOf(v, "tool_retries")); ok {
		a.ToolRetries = r
	}
	for _, t := range items(valueOf(v, "tools")) {
		name, ok := str(t)
		if !ok {
			continue
		}
		a.Tools = append(a.Tools, name)
		decl, declared := f.p.Tools[name]
		_, _, isMCP := f.p.MCPToolName(name)
		switch {
		case isMCP:
			f.checkMCPTool(t, label, name, true)
		case !declared && !slices.Contains(builtinTools, name):
			f.l.errorf(f.pos(t), "%s: unknown tool %q%s; declare it under tools: (built in: %s)", label, name, Suggest(name, f.toolNames()), strings.Join(builtinTools, ", "))
		case declared && decl.Pipeline == nil && decl.LLM == nil && decl.HTTP == nil:
			f.l.errorf(f.pos(t), "%s: tool %q has no implementation (no pipeline:, llm: or http:), so it can only be listed under finish:", label, name)
		case name == "http_get" && !declared && f.p.HTTPGet == nil:
			f.l.errorf(f.pos(t), "%s: the built-in tool http_get is off in this pipeline: enable it with a top-level http_get: {allow_hosts: [example.com]} (an empty list allows any host)", label)
		}
	}
	for _, t := range items(valueOf(v, "finish")) {
		name, ok := str(t)
		if !ok {
			continue
		}
		a.Finish = append(a.Finish, name)
		_, declared := f.p.Tools[name]
		switch {
		case !declared && slices.Contains(builtinTools, name):
			f.l.errorf(f.pos(t), "%s: built-in tool %q cannot be a finish tool: move it to the agent's tools:, and finish with a tool declared under the pipeline's tools: with a description and parameters", label, name)
		case !declared:
			// Only declared tools can finish, so only they are suggested.
			f.l.errorf(f.pos(t), "%s: unknown finish tool %q%s; declare it under tools: with a description and parameters", label, name, Suggest(name, keysOf(f.p.Tools)))
		}
	}
	return a
}

func (f *file) toolNames() []string {
	names := slices.Clone(builtinTools)
	for n := range f.p.Tools {
		names = append(names, n)
	}
	for server, tools := range f.p.MCPTools {
		for _, t := range tools {
			names = append(names, server+"."+t.Name)
		}
	}
	sort.Strings(names)
	return names
}

// agentOutput types finish.args by the finish tools' parameters: a field
// any of them declares may be read; one none declares is a mistake.
func agentOutput(p *Pipeline, a *Agent) *Type {
	var args *Type
	for _, name := range a.Finish {
		if t := p.Tools[name]; t != nil {
			args = Join(args, TypeFromSchema(t.Parameters))
		}
	}
	if args == nil {
		args = AnyType
	}
	finish := Object(map[string]*Type{"name": StringType, "args": args})
	return Object(map[string]*Type{"finish": finish, "steps": IntType, "text": StringType,
		"usage": usageType, "cost_usd": FloatType})
}
