package nodes

import (
	"context"

	"github.com/flowrun/flowrun/dsl"
	"github.com/flowrun/flowrun/runtime"
)

// parallelNode runs named branches concurrently, each in a scope of its
// own, and joins them. After the join, branch state writes apply in
// declaration order, so two branches writing one key end the same way on
// every run. Output: {branch name: result}.
type parallelNode struct{}

// Pure: the nodes the branches run have checkpoints of their own.
func (parallelNode) Pure(*dsl.Node) bool { return true }

func (parallelNode) Execute(ctx context.Context, s *runtime.Scope, n *dsl.Node) (runtime.Outcome, error) {
	p := n.Parallel()
	scopes := make([]*runtime.Scope, len(p.Branches))
	results := make([]any, len(p.Branches))
	limit := p.MaxConcurrency
	if limit == 0 {
		limit = len(p.Branches)
	}
	_, first := fanOut(ctx, len(p.Branches), limit, true, func(ctx context.Context, i int) error {
		br := p.Branches[i]
		c := s.Child(n.ID+"["+br.Name+"]/", true)
		scopes[i] = c
		if _, err := c.RunBlock(ctx, br.Body); err != nil {
			return err
		}
		results[i] = c.LastOutput()
		if p.Result != nil {
			r, err := c.Eval(p.Result)
			if err != nil {
				return err
			}
			results[i] = r
		}
		return nil
	})
	if first != nil {
		return runtime.Outcome{}, first
	}
	out := make(map[string]any, len(p.Branches))
	for i, br := range p.Branches {
		s.Join(scopes[i])
		out[br.Name] = results[i]
	}
	return runtime.Outcome{Output: out}, nil
}
