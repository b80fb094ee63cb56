package dsl

import "testing"

// BenchmarkEval evaluates the expressions of one step of a loop, none of
// which loops itself: a condition, a number and a string update, and a
// template, against a run's environment.
func BenchmarkEval(b *testing.B) {
	p, ds := LoadSource("bench.yaml", []byte(`
version: 1
name: bench
inputs: {n: {type: integer}}
state: {counter: 0, out: ""}
nodes:
  - id: steps
    loop:
      max_iterations: 10
      until: state.counter >= inputs.n
      body:
        - id: step
          set: {counter: state.counter + 1, out: 'state.out + "x"'}
        - id: say
          set: {out: "step ${{ state.counter }} of ${{ inputs.n }}"}
`))
	if p == nil {
		b.Fatal(ds)
	}
	loop := p.Nodes[0].Loop()
	env := &Env{Inputs: map[string]any{"n": 1000}, State: map[string]any{"counter": 300, "out": ""}, Nodes: map[string]any{}}
	for _, bc := range []struct {
		name string
		eval func() (any, error)
	}{
		{"condition", func() (any, error) { return loop.Until.EvalBool(env) }},
		{"number", func() (any, error) { return loop.Body[0].Set[0].Value.Eval(env) }},
		{"string", func() (any, error) { return loop.Body[0].Set[1].Value.Eval(env) }},
		{"template", func() (any, error) { return loop.Body[1].Set[0].Value.Eval(env) }},
	} {
		b.Run(bc.name, func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				if _, err := bc.eval(); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}
