package nodes

import (
	"context"
	"errors"
	"regexp"

	"github.com/flowrun/flowrun/dsl"
	"github.com/flowrun/flowrun/errclass"
	"github.com/flowrun/flowrun/llm"
	"github.com/flowrun/flowrun/mcpclient"
	"github.com/flowrun/flowrun/runtime"
)

// mcpReply is an MCP tool's result with the images it returned, which an
// agent shows the model in a message of their own.
type mcpReply struct {
	value  any
	images []string
}

// mcpTools are the tools of server s an agent names: one, or all for "*".
// Replaying a cassette, the listing comes from it and no server starts.
func (svc *Services) mcpTools(ctx context.Context, s *dsl.MCPServer, name string) ([]*tool, error) {
	specs, err := svc.mcpListing(ctx, s)
	if err != nil {
		return nil, err
	}
	var out []*tool
	for _, spec := range specs {
		if name != "*" && spec.Name != name {
			continue
		}
		out = append(out, svc.mcpTool(s, spec))
	}
	if len(out) == 0 {
		names := make([]string, len(specs))
		for i, spec := range specs {
			names[i] = s.Name + "." + spec.Name
		}
		return nil, runtime.Errorf(errclass.Critical, "MCP server %s has no tool %q%s", s.Name, name, dsl.Suggest(s.Name+"."+name, names))
	}
	return out, nil
}

func (svc *Services) mcpListing(ctx context.Context, s *dsl.MCPServer) ([]llm.ToolSpec, error) {
	record, replay := svc.cassettes()
	if replay != nil {
		if specs, ok := replay.MCPTools(s.Name); ok {
			return specs, nil
		}
	}
	if svc.MCPMocks != nil {
		if specs, ok := svc.MCPMocks.Listing(s); ok {
			return specs, nil
		}
	}
	if replay != nil {
		return nil, runtime.Errorf(errclass.Critical, "replay: the cassette has no tool listing of MCP server %s; record the run again", s.Name)
	}
	if svc.MCP == nil {
		return nil, noServers(s)
	}
	tools, err := svc.MCP.Tools(ctx, s)
	if err != nil {
		return nil, runtime.Errorf(errclass.Server, "MCP server %s: %w", s.Name, err)
	}
	specs := make([]llm.ToolSpec, len(tools))
	for i, t := range tools {
		specs[i] = llm.ToolSpec{Name: t.Name, Description: t.Description, Parameters: t.InputSchema}
	}
	if record != nil {
		record.RecordMCPTools(s.Name, specs)
	}
	return specs, nil
}

// WireName is how the model sees an MCP tool: function names may hold
// only letters, digits, _ and -, so "fs.read_file" is "fs__read_file".
func WireName(server, tool string) string {
	n := unsafeNameChars.ReplaceAllString(server+"__"+tool, "_")
	if len(n) > 64 {
		n = n[:64]
	}
	return n
}

var unsafeNameChars = regexp.MustCompile(`[^A-Za-z0-9_-]`)

func (svc *Services) mcpTool(s *dsl.MCPServer, spec llm.ToolSpec) *tool {
	name := s.Name + "." + spec.Name
	wire := spec
	wire.Name = WireName(s.Name, spec.Name)
	if wire.Parameters == nil {
		wire.Parameters = noParameters
	}
	return &tool{spec: wire, name: name, run: func(ctx context.Context, sc *runtime.Scope, at callSite, args map[string]any) (any, error) {
		if err := sc.CountStep(ctx, "MCP tool call "+name); err != nil {
			return nil, err
		}
		res, err := svc.callMCP(ctx, sc, s, spec.Name, sc.Path(at.dir+at.name), args)
		if err != nil {
			return nil, err
		}
		if res.Error != "" {
			return nil, errors.New(res.Error)
		}
		if len(res.Images) > 0 {
			return mcpReply{value: res.Value, images: res.Images}, nil
		}
		return res.Value, nil
	}}
}

// callMCP makes one call: from a mock, else from the replayed cassette
// when there is one, else from the server, recording it when recording. A
// server that dies fails the node.
func (svc *Services) callMCP(ctx context.Context, sc *runtime.Scope, s *dsl.MCPServer, tool, at string, args map[string]any) (*mcpclient.Result, error) {
	record, replay := svc.cassettes()
	full := s.Name + "." + tool
	if svc.MCPMocks != nil {
		res, ok, err := svc.MCPMocks.Call(s, tool, at, args)
		if ok {
			return res, diedFails(err)
		}
	}
	if replay != nil {
		c, err := replay.ReplayMCP(at, full)
		if err != nil {
			return nil, runtime.Errorf(errclass.Critical, "%w", &replayMissError{err})
		}
		return &mcpclient.Result{Value: c.Value, Images: c.Images, Error: c.Error}, nil
	}
	if svc.MCP == nil {
		return nil, noServers(s)
	}
	res, err := svc.MCP.Call(ctx, s, tool, args, func(n mcpclient.Notice) {
		out := map[string]any{"level": n.Level}
		if n.Level == "" {
			out = map[string]any{"progress": n.Progress, "total": n.Total}
		}
		sc.Emit(runtime.Event{Type: runtime.EventToolProgress, Path: at, Attempt: sc.Attempt(),
			Message: n.Message, Output: out, Tool: &runtime.ToolCall{Name: full}})
	})
	if err != nil {
		return nil, diedFails(err)
	}
	if record != nil {
		record.RecordMCP(llm.MCPCall{Node: at, Tool: full, Args: args, Value: res.Value, Images: res.Images, Error: res.Error})
	}
	return res, nil
}

// diedFails gives a server's death the class that fails the node:
// server for a process that died, connection for an HTTP server that
// could not be reached. Both are retried by a node's retry:.
func diedFails(err error) error {
	var died *mcpclient.ServerDiedError
	switch {
	case !errors.As(err, &died):
		return err
	case died.Unreachable:
		return runtime.Errorf(errclass.Connection, "%w", err)
	}
	return runtime.Errorf(errclass.Server, "%w", err)
}

// noServers is the error where flowrun starts no MCP server (flowrun
// test): only a mock or a cassette can answer.
func noServers(s *dsl.MCPServer) error {
	return runtime.Errorf(errclass.Critical, "MCP server %s: no MCP server is started here; mock its tools in the test case (tools: {%s.TOOL: {output: ...}}) or answer them from a cassette that recorded them (cassette: FILE)", s.Name, s.Name)
}

// endsNode reports whether a tool's error ends the node instead of being
// told to the model: its MCP server died, or a replayed cassette has no
// answer for the call.
func endsNode(err error) bool {
	var died *mcpclient.ServerDiedError
	var miss *replayMissError
	return errors.As(err, &died) || errors.As(err, &miss)
}

// replayMissError is a replayed cassette with no answer for an MCP call:
// the run is not the one recorded, which the model must not be asked to
// work around.
type replayMissError struct{ error }

func (e *replayMissError) Unwrap() error { return e.error }
