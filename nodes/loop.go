package nodes

import (
	"context"
	"fmt"

	"github.com/flowrun/flowrun/dsl"
	"github.com/flowrun/flowrun/errclass"
	"github.com/flowrun/flowrun/runtime"
)

// loopNode runs its body at most max_iterations times: while is checked
// before each iteration, until after it. A loop with neither runs
// max_iterations times. Its output is the last iteration's node outputs,
// by id.
type loopNode struct{}

// Pure: the nodes a loop runs have checkpoints of their own.
func (loopNode) Pure(*dsl.Node) bool { return true }

func (loopNode) Execute(ctx context.Context, s *runtime.Scope, n *dsl.Node) (runtime.Outcome, error) {
	l := n.Loop()
	bound := l.MaxIterations
	if l.MaxExpr != nil {
		v, err := s.Eval(l.MaxExpr)
		if err != nil {
			return runtime.Outcome{}, fmt.Errorf("max_iterations: %w", err)
		}
		most := int(dsl.Maxima["max_iterations"])
		if bound, _ = v.(int); bound < 1 || bound > most {
			return runtime.Outcome{}, runtime.Errorf(errclass.Expression, "%s: max_iterations must be an integer from 1 to %d, got %v", l.MaxExpr.Pos, most, v)
		}
	}
	declared := bound
	if m := s.MaxLoops(); m > 0 && m < bound {
		bound = m
	}
	saved := s.SetLoop(dsl.LoopInfo{})
	defer s.SetLoop(saved)
	done, ended := false, false
	for it := 1; it <= bound && !done; it++ {
		s.SetLoop(dsl.LoopInfo{Iteration: it, Index: it - 1, Max: bound})
		if l.While != nil {
			ok, err := s.EvalBool(l.While)
			if err != nil {
				return runtime.Outcome{}, fmt.Errorf("while: %w", err)
			}
			if !ok {
				done = true
				break
			}
		}
		flow, err := s.RunIteration(ctx, n.ID, it, l.Body)
		if err != nil {
			return runtime.Outcome{}, err
		}
		switch flow {
		case runtime.FlowBreak:
			done = true
			continue
		case runtime.FlowEnd:
			done, ended = true, true
			continue
		}
		if l.Until != nil {
			ok, err := s.EvalBool(l.Until)
			if err != nil {
				return runtime.Outcome{}, fmt.Errorf("until: %w", err)
			}
			done = ok
		}
	}
	if !done && l.While != nil {
		// The bound is reached; the loop is exhausted only if it wanted more.
		s.SetLoop(dsl.LoopInfo{Iteration: bound + 1, Index: bound, Max: bound})
		more, err := s.EvalBool(l.While)
		if err != nil {
			return runtime.Outcome{}, fmt.Errorf("while: %w", err)
		}
		done = !more
	}
	if !done && (l.Until != nil || l.While != nil) {
		msg := fmt.Sprintf("loop %q reached max_iterations (%d) before its condition held", n.ID, bound)
		if bound < declared {
			msg = fmt.Sprintf("loop %q reached the run's max loops (%d) before its condition held", n.ID, bound)
		}
		if l.OnExhausted == dsl.ExhaustedFail {
			return runtime.Outcome{}, runtime.Errorf(errclass.LoopExhausted, "%s (on_exhausted: fail)", msg)
		}
		s.Emit(runtime.Event{Type: runtime.EventLoopExhausted, Path: s.Path(n.ID), Node: n.ID, Kind: string(n.Kind), Message: msg})
	}
	out := make(map[string]any, len(l.Body))
	for _, b := range l.Body {
		out[b.ID] = s.Output(b.ID)
	}
	if ended {
		return runtime.Outcome{Output: out, Next: dsl.NextEnd}, nil
	}
	return runtime.Outcome{Output: out}, nil
}
