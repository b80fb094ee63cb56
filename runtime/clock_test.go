package runtime_test

import (
	"context"
	"testing"
	"time"

	"github.com/flowrun/flowrun/clock"
	"github.com/flowrun/flowrun/dsl"
	"github.com/flowrun/flowrun/errclass"
	"github.com/flowrun/flowrun/nodes"
	"github.com/flowrun/flowrun/runtime"
)

// flaky fails with class server until its last attempt.
type flaky struct{ fails int }

func (f *flaky) Execute(context.Context, *runtime.Scope, *dsl.Node) (runtime.Outcome, error) {
	if f.fails > 0 {
		f.fails--
		return runtime.Outcome{}, runtime.Errorf(errclass.Server, "down")
	}
	return runtime.Outcome{Output: "up"}, nil
}

// A node retried with an hour's backoff waits on the run's clock: with a
// fake one the run ends at once, and the clock was asked for the two
// backoffs, each at least the hour (doubled for the second). Backoff on
// time.Sleep or time.After would hang until the deadline.
func TestRetryBackoffWaitsOnTheRunsClock(t *testing.T) {
	p, ds := dsl.LoadSource("p.yaml", []byte(`
version: 1
name: retries
nodes:
  - id: call
    tool: {name: read_file, args: {path: '"x"'}}
    retry: {max_attempts: 3, backoff: 1h}
outputs: {out: nodes.call}
`))
	if p == nil {
		t.Fatal(ds)
	}
	kinds := nodes.Kinds(nodes.Services{})
	kinds[dsl.KindTool] = &flaky{fails: 2}
	fake := clock.NewFake(time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC))
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	res := runtime.Run(ctx, kinds, p, nil, runtime.Options{Clock: fake})
	if res.Status != runtime.StatusCompleted || res.Outputs["out"] != "up" {
		t.Fatalf("status %s, err %v, outputs %v", res.Status, res.Err, res.Outputs)
	}
	slept := fake.Slept()
	if len(slept) != 2 || slept[0] < time.Hour || slept[1] < 2*time.Hour {
		t.Errorf("the clock was asked to wait %v, want the two backoffs (1h, then 2h, each with jitter above)", slept)
	}
}
