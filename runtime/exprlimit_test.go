package runtime_test

import (
	"context"
	"os"
	"path/filepath"
	"testing"

	"github.com/flowrun/flowrun/dsl"
	"github.com/flowrun/flowrun/errclass"
	"github.com/flowrun/flowrun/nodes"
	"github.com/flowrun/flowrun/runtime"
	"github.com/flowrun/flowrun/runtime/runtimetest"
)

// stopRun is the function stop_run() calls in the pipeline below: it
// stops the run from inside an expression, so that what the rest of the
// expression does after the stop is seen without a clock.
var stopRun func()

// withStopRun is the default expression functions and stop_run.
func withStopRun(t *testing.T) dsl.Options {
	fs, err := dsl.DefaultFunctions().With(dsl.Function{Name: "stop_run", Signature: "stop_run() bool", Doc: "Test only.",
		Types: []any{new(func() bool)},
		Bind: func(dsl.FunctionEnv) func(...any) (any, error) {
			return func(...any) (any, error) { stopRun(); return true, nil }
		}})
	if err != nil {
		t.Fatal(err)
	}
	return dsl.Options{Functions: &fs}
}

const spinning = `
version: 1
name: spin
inputs: {xs: {type: array, items: {type: integer}}}
state: {n: 0, after: 0}
nodes:
  - id: spin
    set: {n: 'stop_run() && count(inputs.xs, # >= 0) > 0 ? 1 : 0'}
    on_error: continue
  - id: huge
    set: {n: 'count(inputs.xs, count(inputs.xs, # > 0) == 7)'}
    on_error: continue
  - id: after
    set: {after: 1}
outputs: {after: state.after, class: nodes.huge.error.class}
`

// An expression that outgrows its budget fails its node with class
// expression_limit and the run goes on; one running when the run is
// stopped stops with it instead of running to its end.
func TestExpressionLimitFailsTheNode(t *testing.T) {
	path := filepath.Join(t.TempDir(), "p.yaml")
	if err := os.WriteFile(path, []byte(spinning), 0o644); err != nil {
		t.Fatal(err)
	}
	p, ds := dsl.LoadWith(path, withStopRun(t))
	if p == nil {
		t.Fatal(ds)
	}
	xs := make([]any, 100_000)
	for i := range xs {
		xs[i] = i
	}

	stopRun = func() {}
	res := runtime.Run(context.Background(), nodes.Kinds(nodes.Services{}), p, map[string]any{"xs": xs}, runtime.Options{})
	if res.Status != runtime.StatusCompleted || res.Outputs["after"] != 1 || res.Outputs["class"] != string(errclass.ExpressionLimit) {
		t.Fatalf("status %s, err %v, outputs %v", res.Status, res.Err, res.Outputs)
	}

	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	stopRun = cancel
	var rec runtimetest.Events
	res = runtime.Run(ctx, nodes.Kinds(nodes.Services{}), p, map[string]any{"xs": xs}, runtime.Options{Sink: &rec})
	if res.Status != runtime.StatusStopped {
		t.Fatalf("status %s, err %v", res.Status, res.Err)
	}
	for _, e := range rec.All() {
		if e.Node == "spin" && e.Type == runtime.EventNodeFinished {
			t.Fatal("the expression ran to its end after the run was stopped")
		}
	}
}
