package dsl

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

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

// A set of functions is a value: the pipeline loaded with a set that adds
// a function calls it (in its metrics too), while the default set, and a
// pipeline loaded with it, never see the addition.
func TestFunctionSetsAreValues(t *testing.T) {
	twice := Function{Name: "twice", Signature: "twice(n) int", Doc: "Test only.",
		Types: []any{new(func(int) int)},
		Bind: func(FunctionEnv) func(...any) (any, error) {
			return func(args ...any) (any, error) { return 2 * args[0].(int), nil }
		}}
	fs, err := DefaultFunctions().With(twice)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := fs.With(twice); err == nil || !strings.Contains(err.Error(), "twice is defined twice") {
		t.Errorf("adding twice again: %v", err)
	}
	path := filepath.Join(t.TempDir(), "p.yaml")
	src := "version: 1\nname: p\noutputs: {x: twice(2), text: 'grid_text([[1]])'}\n"
	if err := os.WriteFile(path, []byte(src), 0o644); err != nil {
		t.Fatal(err)
	}

	p, ds := LoadWith(path, Options{Functions: fs})
	if p == nil {
		t.Fatalf("with twice: %s", ds)
	}
	for _, o := range p.Outputs {
		if got, err := o.Value.Eval(&Env{}); err != nil || Stringify(got) != map[string]string{"x": "4", "text": "1"}[o.Name] {
			t.Errorf("output %s = %v, %v", o.Name, got, err)
		}
	}
	if _, ds := ParseMetric(p, "m", "twice(1) == 2"); len(ds) > 0 {
		t.Errorf("metric calling twice: %s", ds)
	}

	if _, ds := Load(path); !strings.Contains(ds.String(), "twice") || !ds.HasErrors() {
		t.Errorf("the default set calls twice: %s", ds)
	}
	for _, fn := range DefaultFunctions().List() {
		if fn.Name == "twice" {
			t.Error("the default set holds twice")
		}
	}
}
