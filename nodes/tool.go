package nodes

import (
	"context"
	"fmt"

	"github.com/flowrun/flowrun/dsl"
	"github.com/flowrun/flowrun/errclass"
	"github.com/flowrun/flowrun/jsonvalue"
	"github.com/flowrun/flowrun/runtime"
)

// toolNode calls one tool, declared in the pipeline or built in, with its
// args checked against the tool's parameters. Output: the tool's result.
type toolNode struct{ svc *Services }

func (k toolNode) CheckNode(_ *dsl.Pipeline, n *dsl.Node) error {
	return k.svc.checkTool(n.Tool().Name)
}

func (k toolNode) Execute(ctx context.Context, s *runtime.Scope, n *dsl.Node) (runtime.Outcome, error) {
	t, err := k.svc.lookupTool(ctx, s.Pipeline(), n.Tool().Name)
	if err != nil {
		return runtime.Outcome{}, err
	}
	if t.run == nil {
		return runtime.Outcome{}, runtime.Errorf(errclass.Critical, "tool %q has no implementation: it can only be an agent's finish tool", n.Tool().Name)
	}
	if t.needsModel && k.svc.LLM == nil {
		return runtime.Outcome{}, runtime.Errorf(errclass.Critical, "tool %q makes a model call, and there is no model client", n.Tool().Name)
	}
	v, err := s.EvalValue(n.Tool().Args)
	if err != nil {
		return runtime.Outcome{}, fmt.Errorf("args: %w", err)
	}
	args, _ := v.(map[string]any)
	if v != nil && args == nil {
		return runtime.Outcome{}, runtime.Errorf(errclass.Critical, "args must be a map of the tool's parameters, got %T", v)
	}
	if args == nil {
		args = map[string]any{}
	}
	if err := jsonvalue.Validate(t.spec.Parameters, args); err != nil {
		return runtime.Outcome{}, runtime.Errorf(errclass.Critical, "args do not match tool %q's parameters: %v", n.Tool().Name, err)
	}
	out, err := t.run(ctx, s, callSite{name: n.ID}, args)
	if r, ok := out.(mcpReply); ok {
		out = r.value
	}
	return runtime.Outcome{Output: out}, err
}
