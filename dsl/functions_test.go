package dsl

import "testing"

// A program that loads pipelines calls arc's functions without
// registering anything first.
func TestPipelinesCallARCFunctions(t *testing.T) {
	p, ds := LoadSource("arc.yaml", []byte(`version: 1
name: arc
inputs:
  grid: {type: array}
outputs:
  text: grid_text(inputs.grid)
  solved: >-
    arc_report([{"output": inputs.grid}], {"train": [{"input": inputs.grid, "output": inputs.grid}]}).solved_train
`))
	if len(ds) > 0 {
		t.Fatalf("diagnostics:\n%s", ds)
	}
	env := &Env{Inputs: map[string]any{"grid": []any{[]any{1, 2}, []any{3, 4}}}}
	want := map[string]any{"text": "1 2\n3 4", "solved": true}
	for _, o := range p.Outputs {
		got, err := o.Value.Eval(env)
		if err != nil || got != want[o.Name] {
			t.Errorf("output %s = %#v, %v; want %#v", o.Name, got, err, want[o.Name])
		}
	}
}
