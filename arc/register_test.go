package arc

import (
	"testing"

	"github.com/flowrun/flowrun/dsl"
)

func TestRegisterTwiceThenPipelinesCallTheFunctions(t *testing.T) {
	Register()
	Register()
	p, ds := dsl.LoadSource("arc.yaml", []byte(`version: 1
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
	env := &dsl.Env{Inputs: map[string]any{"grid": []any{[]any{1, 2}, []any{3, 4}}}}
	want := map[string]any{"text": "1 2\n3 4", "solved": true}
	for _, o := range p.Outputs {
		got, err := o.Value.Eval(env)
		if err != nil || got != want[o.Name] {
			t.Errorf("output %s = %#v, %v; want %#v", o.Name, got, err, want[o.Name])
		}
	}
}

func TestGridText(t *testing.T) {
	got, err := GridText([]any{[]any{1, 2}, []any{3.0, 4}})
	if err != nil || got != "1 2\n3 4" {
		t.Errorf("GridText = %q, %v; want %q", got, err, "1 2\n3 4")
	}
	for _, bad := range []any{"1 2", []any{[]any{1}, 2}} {
		if _, err := GridText(bad); err == nil {
			t.Errorf("GridText(%#v): no error", bad)
		}
	}
}
