package durable

import (
	"errors"
	"fmt"
	"maps"
	"slices"
	"strings"

	"github.com/flowrun/flowrun/dsl"
	"github.com/flowrun/flowrun/eventview"
	"github.com/flowrun/flowrun/jsonvalue"
	"github.com/flowrun/flowrun/runtime"
)

// EditError says why edits cannot be made: a value that does not fit
// its declaration, or a place they cannot go. Nothing ran.
type EditError struct{ Err error }

func (e *EditError) Error() string { return e.Err.Error() }
func (e *EditError) Unwrap() error { return e.Err }

// CheckEdits checks values a fork or a resume is to start from against
// what p declares: each key is "state.NAME" for a state variable (its
// schema, or the type of its initial value) or "inputs.NAME" for an
// input (its schema), and each value of that type. The first edit that
// does not fit is refused, naming the key and the type it wants.
func CheckEdits(p *dsl.Pipeline, edits []runtime.Edit) error {
	for _, e := range edits {
		if err := checkEdit(p, e); err != nil {
			return &EditError{err}
		}
	}
	return nil
}

func checkEdit(p *dsl.Pipeline, e runtime.Edit) error {
	if name, ok := strings.CutPrefix(e.Key, "state."); ok {
		i := slices.IndexFunc(p.State, func(v dsl.StateVar) bool { return v.Name == name })
		if i < 0 {
			names := make([]string, len(p.State))
			for i, v := range p.State {
				names[i] = v.Name
			}
			return fmt.Errorf("%s: %s declares no state variable %q%s", e.Key, p.Name, name, dsl.Suggest(name, names))
		}
		v := p.State[i]
		if v.Schema != nil {
			if err := jsonvalue.Validate(v.Schema, e.New); err != nil {
				return fmt.Errorf("%s: %s does not fit its declared schema: %w", e.Key, eventview.Fold(e.New), err)
			}
			return nil
		}
		if got := dsl.TypeOfValue(e.New); !v.Type.Accepts(got) {
			return fmt.Errorf("%s is of type %s (from its initial value); %s is of type %s", e.Key, v.Type, eventview.Fold(e.New), got)
		}
		return nil
	}
	if name, ok := strings.CutPrefix(e.Key, "inputs."); ok {
		i := slices.IndexFunc(p.Inputs, func(in *dsl.Input) bool { return in.Name == name })
		if i < 0 {
			names := make([]string, len(p.Inputs))
			for i, in := range p.Inputs {
				names[i] = in.Name
			}
			return fmt.Errorf("%s: %s declares no input %q%s", e.Key, p.Name, name, dsl.Suggest(name, names))
		}
		if s := p.Inputs[i].Schema; s != nil {
			if err := jsonvalue.Validate(s, e.New); err != nil {
				return fmt.Errorf("%s (of type %s): %s does not fit: %w", e.Key, p.Inputs[i].Type, eventview.Fold(e.New), err)
			}
		}
		return nil
	}
	return fmt.Errorf("%q: an edit names state.NAME or inputs.NAME", e.Key)
}

// splitEdits separates state edits (by variable name) from input edits
// (by input name).
func splitEdits(edits []runtime.Edit) (state, inputs map[string]any) {
	state, inputs = map[string]any{}, map[string]any{}
	for _, e := range edits {
		if name, ok := strings.CutPrefix(e.Key, "state."); ok {
			state[name] = e.New
		} else if name, ok := strings.CutPrefix(e.Key, "inputs."); ok {
			inputs[name] = e.New
		}
	}
	return state, inputs
}

// stateEditPoint is the checkpoint of points (a run's, up to where it
// goes on from) that state edits go into: the last one, which must be of
// a node that writes the run's own state. It fills in each state edit's
// old value.
func stateEditPoint(p *dsl.Pipeline, points []*runtime.Checkpoint, edits []runtime.Edit) (int64, error) {
	if len(points) == 0 {
		return 0, &EditError{errors.New("there is no checkpoint yet whose state could be edited: fork from a later checkpoint, or edit inputs only")}
	}
	steps := eventview.Steps(p, points)
	last := steps[len(steps)-1]
	if last.Scoped {
		return 0, &EditError{fmt.Errorf("checkpoint %d (%s) is of a node inside a map item, a parallel branch or a called pipeline, whose state is its own: edit the state at the checkpoint of the node around it", last.Seq, last.Path)}
	}
	for i, e := range edits {
		if name, ok := strings.CutPrefix(e.Key, "state."); ok {
			edits[i].Old = last.State[name]
		}
	}
	return last.Seq, nil
}

// applyEdits checks edits and fills in their old values for a run that
// goes on from points with inputs: the inputs it will run with, for the
// caller to prepare (runtime.PrepareInputsFrom), and the checkpoint state
// edits go into (0 for none).
func applyEdits(p *dsl.Pipeline, inputs map[string]any, points []*runtime.Checkpoint, edits []runtime.Edit) (map[string]any, int64, error) {
	if err := CheckEdits(p, edits); err != nil {
		return nil, 0, err
	}
	state, changed := splitEdits(edits)
	if len(changed) > 0 {
		for i, e := range edits {
			if name, ok := strings.CutPrefix(e.Key, "inputs."); ok {
				edits[i].Old = inputs[name]
			}
		}
		inputs = maps.Clone(inputs)
		maps.Copy(inputs, changed)
	}
	if len(state) == 0 {
		return inputs, 0, nil
	}
	seq, err := stateEditPoint(p, points, edits)
	return inputs, seq, err
}

// Edited is what a run that goes on from points with inputs starts from
// once edits are made: Continue's edits, made in memory instead of the
// store (flowrun test's cases). It returns the inputs and the points with
// the state edits in the checkpoint they go into, which is a copy:
// points itself is not changed. It fills in each edit's old value.
func Edited(p *dsl.Pipeline, inputs map[string]any, points []*runtime.Checkpoint, edits []runtime.Edit) (map[string]any, []*runtime.Checkpoint, error) {
	inputs, seq, err := applyEdits(p, inputs, points, edits)
	if err != nil {
		return nil, nil, err
	}
	if _, changed := splitEdits(edits); len(changed) > 0 {
		if _, err := runtime.PrepareInputs(p, inputs); err != nil {
			return nil, nil, &EditError{err}
		}
	}
	if seq == 0 {
		return inputs, points, nil
	}
	state, _ := splitEdits(edits)
	out := slices.Clone(points)
	for i, cp := range out {
		if cp.Seq == seq {
			edited := *cp
			edited.State = maps.Clone(cp.State)
			if edited.State == nil {
				edited.State = map[string]any{}
			}
			maps.Copy(edited.State, state)
			out[i] = &edited
		}
	}
	return inputs, out, nil
}
