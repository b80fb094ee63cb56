package engine

import (
	"fmt"
	"slices"
	"strings"

	"github.com/flowrun/flowrun/dsl"
	"github.com/flowrun/flowrun/engine/internal/durable"
	"github.com/flowrun/flowrun/runtime"
)

// ParseEdits reads edits written KEY=VALUE, KEY being state.NAME or
// inputs.NAME, each value read by InputText for the type NAME declares
// (as text for a string, else as JSON), and checks them against p's
// declarations (CheckEdits).
func ParseEdits(p *dsl.Pipeline, pairs []string) ([]runtime.Edit, error) {
	edits := make([]runtime.Edit, 0, len(pairs))
	for _, s := range pairs {
		key, raw, ok := strings.Cut(s, "=")
		if !ok || key == "" {
			return nil, &InputError{fmt.Errorf("edit %q: write it as state.NAME=VALUE or inputs.NAME=VALUE", s)}
		}
		edits = append(edits, runtime.Edit{Key: key, New: InputText(editType(p, key), raw)})
	}
	if err := durable.CheckEdits(p, edits); err != nil {
		return nil, &InputError{err}
	}
	return edits, nil
}

// editType is the JSON type key declares, "string" or another: what
// InputText needs to know.
func editType(p *dsl.Pipeline, key string) string {
	if name, ok := strings.CutPrefix(key, "inputs."); ok {
		if i := slices.IndexFunc(p.Inputs, func(in *dsl.Input) bool { return in.Name == name }); i >= 0 {
			return p.Inputs[i].Type
		}
	}
	if name, ok := strings.CutPrefix(key, "state."); ok {
		if i := slices.IndexFunc(p.State, func(v dsl.StateVar) bool { return v.Name == name }); i >= 0 && p.State[i].Type.Kind == dsl.TypeString {
			return "string"
		}
	}
	return ""
}
