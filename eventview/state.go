package eventview

import (
	"fmt"
	"maps"
	"slices"
	"strings"

	"github.com/flowrun/flowrun/dsl"
	"github.com/flowrun/flowrun/jsonvalue"
	"github.com/flowrun/flowrun/runtime"
)

// Step is a run's state after one of its checkpoints, and what the
// checkpoint changed: the state at any checkpoint is the pipeline's
// initial state with the writes of every checkpoint up to it replayed.
type Step struct {
	Seq     int64
	Path    string
	State   map[string]any
	Changes []Change
	// Scoped: the checkpoint is of a node inside a map item, a parallel
	// branch or a called pipeline. Such a node writes its own scope's
	// state; what reaches the run's state is in the checkpoint of the
	// map, parallel or call node around it.
	Scoped bool
}

// Change is one state key a checkpoint added, removed or changed.
type Change struct {
	Key      string
	Old, New any
	// Added: the key had no value before; Removed: it has none after.
	Added, Removed bool
}

// EditString is an edit in a few words: "state.x: old -> new", each
// value folded.
func EditString(e runtime.Edit) string {
	return fmt.Sprintf("%s: %s -> %s", e.Key, Fold(e.Old), Fold(e.New))
}

// foldAt is how many characters of a value a change's line shows.
const foldAt = 80

// String is the change in one line, each value as JSON folded to its
// first characters: "+ key: new", "- key: old" or "~ key: old -> new".
func (c Change) String() string {
	switch {
	case c.Added:
		return fmt.Sprintf("+ %s: %s", c.Key, Fold(c.New))
	case c.Removed:
		return fmt.Sprintf("- %s: %s", c.Key, Fold(c.Old))
	}
	return fmt.Sprintf("~ %s: %s -> %s", c.Key, Fold(c.Old), Fold(c.New))
}

// Fold is v as JSON, cut to its first characters when it is Long.
func Fold(v any) string {
	s := asJSON(v)
	if r := []rune(s); len(r) > foldAt {
		return string(r[:foldAt-1]) + "…"
	}
	return s
}

// Long says whether Fold cuts v.
func Long(v any) bool { return len([]rune(asJSON(v))) > foldAt }

func asJSON(v any) string {
	b, err := jsonvalue.Marshal(v)
	if err != nil {
		return fmt.Sprint(v)
	}
	return string(b)
}

// Steps is the run's state after each of points, checkpoints of a run of
// p in sequence order. p may be nil (a pipeline that no longer loads):
// the state then starts empty and every checkpoint counts.
func Steps(p *dsl.Pipeline, points []*runtime.Checkpoint) []Step {
	state := initialState(p)
	scoping := map[string]bool{}
	if p != nil {
		var walk func(dsl.Block)
		walk = func(b dsl.Block) {
			for _, n := range b {
				scoping[n.ID] = n.Kind == dsl.KindMap || n.Kind == dsl.KindParallel || n.Kind == dsl.KindCall
				for _, body := range dsl.Bodies(n) {
					walk(body.Body)
				}
			}
		}
		walk(p.Nodes)
	}
	out := make([]Step, 0, len(points))
	for _, cp := range points {
		st := Step{Seq: cp.Seq, Path: cp.Path, State: state, Scoped: scoped(cp.Path, scoping)}
		if !st.Scoped && len(cp.State) > 0 {
			next := maps.Clone(state)
			maps.Copy(next, cp.State)
			st.Changes, st.State, state = Diff(state, next), next, next
		}
		out = append(out, st)
	}
	return out
}

// StateAfter is the run's state after points (see Steps): the initial
// state when there are none.
func StateAfter(p *dsl.Pipeline, points []*runtime.Checkpoint) map[string]any {
	if steps := Steps(p, points); len(steps) > 0 {
		return steps[len(steps)-1].State
	}
	return initialState(p)
}

func initialState(p *dsl.Pipeline) map[string]any {
	state := map[string]any{}
	if p != nil {
		for _, v := range p.State {
			state[v.Name] = v.Initial
		}
	}
	return state
}

// SameValue says whether a and b are the same value written as JSON.
func SameValue(a, b any) bool { return sameJSON(a, b) }

// scoped says whether the node at path runs inside one whose nested
// nodes write a scope of their own: an enclosing segment (all but the
// last, each "id" or "id[i]") names a map, parallel or call node.
func scoped(path string, scoping map[string]bool) bool {
	segs := strings.Split(path, "/")
	for _, seg := range segs[:len(segs)-1] {
		id, _, _ := strings.Cut(seg, "[")
		if scoping[id] {
			return true
		}
	}
	return false
}

// StepAt is the step of checkpoint seq, false when there is none.
func StepAt(steps []Step, seq int64) (Step, bool) {
	i := slices.IndexFunc(steps, func(s Step) bool { return s.Seq == seq })
	if i < 0 {
		return Step{}, false
	}
	return steps[i], true
}

// Diff is what changed from old to cur, by key in order. Values are
// compared as JSON, so that a number read back from the store equals the
// one the run wrote.
func Diff(old, cur map[string]any) []Change {
	var out []Change
	keys := slices.Sorted(maps.Keys(cur))
	for k := range old {
		if _, ok := cur[k]; !ok {
			keys = append(keys, k)
		}
	}
	slices.Sort(keys)
	for _, k := range keys {
		o, had := old[k]
		n, has := cur[k]
		switch {
		case !had:
			out = append(out, Change{Key: k, New: n, Added: true})
		case !has:
			out = append(out, Change{Key: k, Old: o, Removed: true})
		case !sameJSON(o, n):
			out = append(out, Change{Key: k, Old: o, New: n})
		}
	}
	return out
}

func sameJSON(a, b any) bool {
	x, errA := jsonvalue.Marshal(a)
	y, errB := jsonvalue.Marshal(b)
	return errA == nil && errB == nil && string(x) == string(y)
}
