package nodes

import (
	"context"
	"fmt"

	"github.com/flowrun/flowrun/dsl"
	"github.com/flowrun/flowrun/runtime"
)

// branchNode picks the first case whose when holds, applies its set: and
// goes to its next:. With no case holding it goes to default:, or falls
// through. Output: {case: index or -1, next: where it went}.
type branchNode struct{}

// Pure: a branch evaluates conditions and writes the run's state only.
func (branchNode) Pure(*dsl.Node) bool { return true }

func (branchNode) Execute(_ context.Context, s *runtime.Scope, n *dsl.Node) (runtime.Outcome, error) {
	for i, c := range n.Branch().Cases {
		ok, err := s.EvalBool(c.When)
		if err != nil {
			return runtime.Outcome{}, fmt.Errorf("case %d: %w", i+1, err)
		}
		if !ok {
			continue
		}
		if _, err := s.Assign(c.Set); err != nil {
			return runtime.Outcome{}, fmt.Errorf("case %d: %w", i+1, err)
		}
		return runtime.Outcome{Output: map[string]any{"case": i, "next": c.Next}, Next: c.Next}, nil
	}
	return runtime.Outcome{Output: map[string]any{"case": -1, "next": n.Branch().Default}, Next: n.Branch().Default}, nil
}
