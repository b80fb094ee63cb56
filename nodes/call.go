package nodes

import (
	"context"

	"github.com/flowrun/flowrun/dsl"
	"github.com/flowrun/flowrun/runtime"
)

// callNode runs another pipeline file with inputs and outputs its outputs.
type callNode struct{}

// Pure: the called pipeline's nodes have checkpoints of their own.
func (callNode) Pure(*dsl.Node) bool { return true }

func (callNode) Execute(ctx context.Context, s *runtime.Scope, n *dsl.Node) (runtime.Outcome, error) {
	in := make(map[string]any, len(n.Call().Inputs))
	for _, f := range n.Call().Inputs {
		v, err := s.EvalValue(f.Value)
		if err != nil {
			return runtime.Outcome{}, err
		}
		in[f.Name] = v
	}
	out, err := s.RunPipeline(ctx, n.Call().Pipeline, in, n.ID+"/")
	return runtime.Outcome{Output: out}, err
}
