package dsl

import "testing"

// BenchmarkEval evaluates the expressions of one step of a loop: a
// condition, a state update and a template, against a run's environment.
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
          set: {counter: state.counter + 1, out: 'nodes.steps == nil ? "" : "x"'}
        - id: say
          set: {out: "step ${{ state.counter }}"}
`))
	if p == nil {
		b.Fatal(ds)
	}
	loop := p.Nodes[0].Loop()
	inc, tmpl := loop.Body[0].Set[0].Value, loop.Body[1].Set[0].Value
	env := &Env{Inputs: map[string]any{"n": 1000}, State: map[string]any{"counter": 300, "out": ""}, Nodes: map[string]any{}}
	b.ReportAllocs()
	for b.Loop() {
		if ok, err := loop.Until.EvalBool(env); err != nil || ok {
			b.Fatal(ok, err)
		}
		if _, err := inc.Eval(env); err != nil {
			b.Fatal(err)
		}
		if _, err := tmpl.Eval(env); err != nil {
			b.Fatal(err)
		}
	}
}
