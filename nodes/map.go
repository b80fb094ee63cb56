package nodes

import (
	"context"
	"fmt"
	"reflect"
	"strconv"

	"github.com/flowrun/flowrun/dsl"
	"github.com/flowrun/flowrun/errclass"
	"github.com/flowrun/flowrun/runtime"
)

// defaultMapConcurrency bounds a map without max_concurrency: model calls
// are the usual body, and an unbounded fan-out only meets rate limits.
const defaultMapConcurrency = 8

// mapNode runs its body once per element of over, each item in a scope of
// its own, at most max_concurrency at a time. Output: the items' results in
// input order. An item's state writes are discarded; fold the results with
// the node's own set:.
type mapNode struct{}

// Pure: the items' nodes have checkpoints of their own, except with
// on_item_error: skip, where an item's failed node (a model call, say) has
// none and only the map's checkpoint keeps it from being tried again.
func (mapNode) Pure(n *dsl.Node) bool { return n.Map().OnItemError != dsl.ItemErrorSkip }

func (mapNode) Execute(ctx context.Context, s *runtime.Scope, n *dsl.Node) (runtime.Outcome, error) {
	m := n.Map()
	over, err := s.Eval(m.Over)
	if err != nil {
		return runtime.Outcome{}, fmt.Errorf("over: %w", err)
	}
	list, err := asList(over)
	if err != nil {
		return runtime.Outcome{}, runtime.Errorf(errclass.Expression, "%s: over: %w", m.Over.Pos, err)
	}
	limit := m.MaxConcurrency
	if limit == 0 {
		limit = defaultMapConcurrency
	}
	skip := m.OnItemError == dsl.ItemErrorSkip
	results := make([]any, len(list))
	// Items' state writes reach the run only for variables that declare
	// a merge (the validator refuses others), joined in item order.
	merges := s.Pipeline().HasMerges()
	items := make([]*runtime.Scope, len(list))
	errs, first := fanOut(ctx, len(list), limit, !skip, func(ctx context.Context, i int) error {
		item := s.Child(n.ID+"["+strconv.Itoa(i)+"]/", merges)
		items[i] = item
		item.SetItem(list[i], i)
		if _, err := item.RunBlock(ctx, m.Body); err != nil {
			return err
		}
		if m.Result == nil {
			results[i] = item.LastOutput()
			return nil
		}
		r, err := item.Eval(m.Result)
		if err != nil {
			return fmt.Errorf("item %d: result: %w", i, err)
		}
		results[i] = r
		return nil
	})
	if merges && (skip || first == nil) {
		for i, item := range items {
			if item != nil && (errs == nil || errs[i] == nil) {
				s.JoinState(item)
			}
		}
	}
	if !skip {
		return runtime.Outcome{Output: results}, first
	}
	for i, err := range errs {
		if err == nil {
			continue
		}
		if runtime.EndsRun(err) {
			return runtime.Outcome{}, err
		}
		s.Emit(runtime.Event{Type: runtime.EventMapItemSkipped, Path: fmt.Sprintf("%s[%d]", s.Path(n.ID), i), Node: n.ID,
			Kind: string(n.Kind), Error: err.Error(), Class: runtime.ClassOf(err), Message: "on_item_error: skip"})
	}
	return runtime.Outcome{Output: results}, nil
}

// asList accepts any list an expression can produce ([]any, []int, ...).
func asList(v any) ([]any, error) {
	if l, ok := v.([]any); ok {
		return l, nil
	}
	rv := reflect.ValueOf(v)
	if !rv.IsValid() || (rv.Kind() != reflect.Slice && rv.Kind() != reflect.Array) {
		return nil, fmt.Errorf("expected a list, got %T", v)
	}
	out := make([]any, rv.Len())
	for i := range out {
		out[i] = rv.Index(i).Interface()
	}
	return out, nil
}
