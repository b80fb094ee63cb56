package dsl

import (
	"fmt"
	"reflect"
	"strings"
	"sync"
	"testing"
)

// TestEvalReusesMachines evaluates expressions with variables, predicates
// and failures from many goroutines at once: machines are shared through a
// pool, and none may carry a value, a variable or a failure into another
// evaluation.
func TestEvalReusesMachines(t *testing.T) {
	p, ds := LoadSource("pool.yaml", []byte(`
version: 1
name: pool
inputs: {n: {type: integer}}
state: {a: 0, list: [], out: null}
nodes:
  - id: step
    set:
      a: 'let x = state.a * 2; x + inputs.n'
      list: 'filter(state.list, # > inputs.n)'
      out: 'state.a > 3 ? "big" : "small"'
  - id: bad
    set: {out: 'state.list[10] + 1'}
`))
	if p == nil {
		t.Fatal(ds)
	}
	set := p.Nodes[0].Set
	bad := p.Nodes[1].Set[0].Value
	var wg sync.WaitGroup
	errs := make(chan error, 64)
	for g := range 16 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range 300 {
				a, n := g*1000+i, i%7
				env := &Env{Inputs: map[string]any{"n": n}, State: map[string]any{"a": a, "list": []any{1, 5, 9, n + 1}}}
				want := []any{2*a + n, filterAbove([]any{1, 5, 9, n + 1}, n), map[bool]string{true: "big", false: "small"}[a > 3]}
				for k, as := range set {
					got, err := as.Value.Eval(env)
					if err != nil || !reflect.DeepEqual(got, want[k]) {
						errs <- fmt.Errorf("goroutine %d, %d: %s = %v (%v), want %v", g, i, as.Key, got, err, want[k])
						return
					}
				}
				if _, err := bad.Eval(env); err == nil || !strings.Contains(err.Error(), "out of range") {
					errs <- fmt.Errorf("goroutine %d, %d: want an index error, got %v", g, i, err)
					return
				}
			}
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Error(err)
	}
}

func filterAbove(l []any, n int) []any {
	out := []any{}
	for _, v := range l {
		if v.(int) > n {
			out = append(out, v)
		}
	}
	return out
}
