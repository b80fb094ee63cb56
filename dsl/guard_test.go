package dsl

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/flowrun/flowrun/errclass"
)

// compileSet loads a pipeline whose one set node assigns src to x, and
// returns that expression.
func compileSet(t *testing.T, src string) *Value {
	t.Helper()
	p, ds := LoadSource("p.yaml", []byte("version: 1\nname: g\ninputs: {xs: {type: array, items: {type: integer}}}\nstate: {x: null}\nnodes:\n  - id: s\n    set: {x: '"+src+"'}\n"))
	if p == nil {
		t.Fatal(ds)
	}
	return p.Nodes[0].Set[0].Value
}

// Expressions that would take the process down, or hold a node for
// minutes, stop with class expression_limit within the budget; the same
// shapes at a sane size still work.
func TestExpressionsAreBounded(t *testing.T) {
	long := make([]any, 999_999)
	for i := range long {
		long[i] = i
	}
	env := &Env{Inputs: map[string]any{"xs": long}, State: map[string]any{}, Nodes: map[string]any{}}
	for _, src := range []string{
		`repeat(repeat("x", 999999), 999999)`,
		`reduce(1..64, #acc + #acc, "x")`,
		`reduce(1..64, #acc + #acc + "", "x")`,
		`count(inputs.xs, count(inputs.xs, # > 0) == 7)`,
		`replace(replace(repeat("x", 100000), "x", repeat("y", 1000)), "y", repeat("z", 1000))`,
		`join(map(1..100000, repeat("x", 1000)), "")`,
		`len(map(1..1000000, upper(repeat("ab", 64))))`,
		`sum(map(1..3000, sum(map(1..3000, #))))`,
		`1..3000000`,
	} {
		start := time.Now()
		_, err := compileSet(t, src).Eval(env)
		if errclass.Of(err) != errclass.ExpressionLimit {
			t.Errorf("%s: class %q, want expression_limit: %v", src, errclass.Of(err), err)
		}
		if err != nil && !strings.Contains(err.Error(), "p.yaml:7:") {
			t.Errorf("%s: the error does not say where: %v", src, err)
		}
		t.Logf("%s: %v in %s", src, err, time.Since(start))
	}
	for src, want := range map[string]any{
		`len(repeat("ab", 1000))`:                              2000,
		`reduce(1..10, #acc + #acc, "x") == repeat("x", 1024)`: true,
		`count(1..1000, # % 2 == 0)`:                           500,
		`replace("a-b-c", "-", "+")`:                           "a+b+c",
		`len(filter(inputs.xs, # < 10))`:                       10,
	} {
		got, err := compileSet(t, src).Eval(env)
		if err != nil || got != want {
			t.Errorf("%s = %v, %v; want %v", src, got, err, want)
		}
	}
}

// An evaluation that loops stops when its node's context is cancelled.
func TestExpressionStopsWhenCancelled(t *testing.T) {
	long := make([]any, 100_000)
	env := &Env{Inputs: map[string]any{"xs": long}, State: map[string]any{}, Nodes: map[string]any{}}
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	env.SetContext(ctx)
	_, err := compileSet(t, `count(inputs.xs, count(inputs.xs, true) > 0)`).Eval(env)
	var le *LimitError
	if !errors.As(err, &le) || !strings.Contains(err.Error(), "cancelled") {
		t.Fatalf("want a cancelled expression_limit error, got %v", err)
	}
}

// A template file rendered by render() is bounded too.
func TestRenderedTemplateIsBounded(t *testing.T) {
	dir := t.TempDir()
	for name, text := range map[string]string{
		"p.yaml": "version: 1\nname: r\nstate: {x: null}\nnodes:\n  - id: s\n    set: {x: 'render(\"t.md\", {})'}\n",
		"t.md":   `${{ repeat(repeat("x", 999999), 999999) }}`,
	} {
		if err := os.WriteFile(filepath.Join(dir, name), []byte(text), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	p, ds := Load(filepath.Join(dir, "p.yaml"))
	if p == nil {
		t.Fatal(ds)
	}
	_, err := p.Nodes[0].Set[0].Value.Eval(&Env{State: map[string]any{}, Nodes: map[string]any{}})
	if errclass.Of(err) != errclass.ExpressionLimit {
		t.Fatalf("class %q, want expression_limit: %v", errclass.Of(err), err)
	}
}
