package nodes

import (
	"context"
	"fmt"
	"os"
	"path/filepath"

	"github.com/flowrun/flowrun/dsl"
	"github.com/flowrun/flowrun/errclass"
	"github.com/flowrun/flowrun/jsonvalue"
	"github.com/flowrun/flowrun/runtime"
	"github.com/flowrun/flowrun/sandbox"
)

// codeNode runs code in the sandbox. What the code does (a compile error,
// an exception, a timeout, a limit) is its output, not a node failure, so a
// refine loop can feed it back to a model; only an unusable sandbox fails
// the node. Output: {ok, result, stdout, stderr, error, duration_ms}.
type codeNode struct{ svc *Services }

func (k codeNode) CheckNode(_ *dsl.Pipeline, n *dsl.Node) error {
	if k.svc.Sandbox == nil {
		return fmt.Errorf("the sandbox is not available in this build")
	}
	return k.svc.Sandbox.Check(n.Code().Language)
}

func (k codeNode) Execute(ctx context.Context, s *runtime.Scope, n *dsl.Node) (runtime.Outcome, error) {
	c := n.Code()
	req := sandbox.Request{Language: c.Language, Call: c.Call, Limits: limitsFor(s.Pipeline(), c.Limits)}
	if c.Source != nil {
		src, err := s.Render(c.Source)
		if err != nil {
			return runtime.Outcome{}, fmt.Errorf("source: %w", err)
		}
		req.Source = src
	}
	if c.Module != "" {
		path, err := copyModule(ctx, s.Pipeline(), c.Module)
		if err != nil {
			return runtime.Outcome{}, runtime.Errorf(errclass.Critical, "module %q: %w", c.Module, err)
		}
		defer os.Remove(path)
		req.Module = path
	}
	if c.Args != nil {
		args, err := s.EvalValue(c.Args)
		if err != nil {
			return runtime.Outcome{}, fmt.Errorf("args: %w", err)
		}
		req.Args = args
	}
	res, err := k.svc.runCode(ctx, s, n, req)
	if err != nil {
		return runtime.Outcome{}, err
	}
	if c.ResultSchema != nil && res.OK {
		// The validator typed nodes.<id>.result by the schema; a result
		// that breaks it is the code's mistake, fed back like any other.
		if err := jsonvalue.Validate(c.ResultSchema, res.Result); err != nil {
			res.OK, res.Error = false, &sandbox.Error{Class: errclass.BadResult, Message: "the result does not match result_schema: " + err.Error()}
		}
	}
	return runtime.Outcome{Output: resultMap(res)}, nil
}

// copyModule reads a wasm module from the pipeline directory into a
// private temporary file for the sandbox to load: the sandbox opens a
// path, and this one cannot be swapped for a link to a file outside.
func copyModule(ctx context.Context, p *dsl.Pipeline, name string) (string, error) {
	b, err := p.Modules().ReadFile(ctx, name)
	if err != nil {
		return "", err
	}
	f, err := os.CreateTemp("", "flowrun-*-"+filepath.Base(name))
	if err != nil {
		return "", fmt.Errorf("copying the module for the sandbox: %w", err)
	}
	_, err = f.Write(b)
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		os.Remove(f.Name())
		return "", fmt.Errorf("copying the module for the sandbox: %w", err)
	}
	return f.Name(), nil
}

// limitsFor merges a node's limits over the pipeline's sandbox: defaults.
func limitsFor(p *dsl.Pipeline, l dsl.SandboxDefaults) sandbox.Limits {
	out := sandbox.Limits{Timeout: p.Sandbox.Timeout, MemoryMB: p.Sandbox.MemoryMB, MaxOutputBytes: p.Sandbox.MaxOutputBytes}
	if l.Timeout > 0 {
		out.Timeout = l.Timeout
	}
	if l.MemoryMB > 0 {
		out.MemoryMB = l.MemoryMB
	}
	if l.MaxOutputBytes > 0 {
		out.MaxOutputBytes = l.MaxOutputBytes
	}
	return out
}

// runCode runs a request and records it as an event.
func (svc *Services) runCode(ctx context.Context, s *runtime.Scope, n *dsl.Node, req sandbox.Request) (*sandbox.Result, error) {
	if svc.Sandbox == nil {
		return nil, runtime.Errorf(errclass.SandboxUnavailable, "the sandbox is not available in this build")
	}
	res, err := svc.Sandbox.Run(ctx, req)
	if err != nil {
		return nil, err
	}
	out := resultMap(res)
	// The event also says what ran, for flowrun show and the web inspector.
	out["code"] = req.Source
	if req.Call != "" {
		out["call"] = req.Call
	}
	e := runtime.Event{Type: runtime.EventSandboxRun, Path: s.Path(n.ID), Node: n.ID, Kind: req.Language,
		DurationMS: res.DurationMS, Output: out}
	if res.Error != nil {
		e.Class, e.Error = res.Error.Class, res.Error.Message
	}
	s.Emit(e)
	return res, nil
}

func resultMap(r *sandbox.Result) map[string]any {
	m := map[string]any{"ok": r.OK, "result": r.Result, "stdout": r.Stdout, "stderr": r.Stderr, "error": nil, "duration_ms": r.DurationMS}
	if r.Error != nil {
		e := map[string]any{"class": string(r.Error.Class), "message": r.Error.Message}
		if r.Error.Line > 0 {
			e["line"] = r.Error.Line
		}
		m["error"] = e
	}
	return m
}
