package nodes_test

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/flowrun/flowrun/dsl"
	"github.com/flowrun/flowrun/errclass"
	"github.com/flowrun/flowrun/nodes"
	"github.com/flowrun/flowrun/runtime"
)

// load compiles a pipeline written inline; extra files (prompts, called
// pipelines) are written beside it.
func load(t testing.TB, src string, extra map[string]string) *dsl.Pipeline {
	t.Helper()
	dir := t.TempDir()
	for name, body := range extra {
		if err := os.WriteFile(filepath.Join(dir, name), []byte(body), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	path := filepath.Join(dir, "p.yaml")
	if err := os.WriteFile(path, []byte(src), 0o644); err != nil {
		t.Fatal(err)
	}
	p, ds := dsl.Load(path)
	if p == nil {
		t.Fatalf("load:\n%s", ds)
	}
	return p
}

// recorder keeps every event of a run.
type recorder struct {
	mu     sync.Mutex
	events []runtime.Event
}

func (r *recorder) Event(e runtime.Event) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.events = append(r.events, e)
}

func (r *recorder) paths(typ string) []string {
	var out []string
	for _, e := range r.events {
		if e.Type == typ {
			out = append(out, e.Path)
		}
	}
	return out
}

func (r *recorder) count(typ string) int { return len(r.paths(typ)) }

// probe stands in for a kind with side effects (a model or tool call): it
// counts calls and concurrency, can sleep, and can fail. It is registered
// under the tool kind, so `tool: {name: read_file, args: {...}}` reaches it.
type probe struct {
	calls    atomic.Int64
	inFlight atomic.Int64
	maxSeen  atomic.Int64
	// behave returns what the call does given its args and call number.
	behave func(args map[string]any, call int64) (any, error)
}

func (p *probe) Execute(ctx context.Context, s *runtime.Scope, n *dsl.Node) (runtime.Outcome, error) {
	call := p.calls.Add(1)
	cur := p.inFlight.Add(1)
	defer p.inFlight.Add(-1)
	for {
		m := p.maxSeen.Load()
		if cur <= m || p.maxSeen.CompareAndSwap(m, cur) {
			break
		}
	}
	args, err := s.EvalValue(n.Tool().Args)
	if err != nil {
		return runtime.Outcome{}, err
	}
	a, _ := args.(map[string]any)
	if d, ok := a["sleep_ms"].(int); ok {
		select {
		case <-time.After(time.Duration(d) * time.Millisecond):
		case <-ctx.Done():
			return runtime.Outcome{}, ctx.Err()
		}
	}
	if p.behave != nil {
		out, err := p.behave(a, call)
		return runtime.Outcome{Output: out}, err
	}
	return runtime.Outcome{Output: a["value"]}, nil
}

// TestReadFromNodeNotRunYetNamesIt: reading a field from a node that was
// skipped fails with a message naming the node whose output is null and
// the field read, not expr-lang's bare "from <nil>". (A read from a later
// sibling in a loop body, null in the first iteration, is an error at
// load unless it uses ?.: dsl's testdata/invalid/loop_reads_later_sibling.)
func TestReadFromNodeNotRunYetNamesIt(t *testing.T) {
	p := load(t, `
version: 1
name: t
state: {x: ""}
nodes:
  - id: refine
    loop:
      max_iterations: 2
      body:
        - id: review
          when: state.x == "never"
          set: {x: '"ok"'}
        - id: draft
          set: {x: 'nodes.review.x + "!"'}
outputs: {x: state.x}
`, nil)
	res, _ := run(t, p, nodes.Kinds(nodes.Services{}), nil)
	if res.Status != runtime.StatusFailed {
		t.Fatalf("status %s", res.Status)
	}
	want := `nodes.review is null because node "review" has not run yet here (it runs later, or was skipped): cannot fetch x from <nil>`
	if !strings.Contains(res.Err.Error(), want) || !strings.Contains(res.Err.Error(), `node "refine[1]/draft"`) {
		t.Fatalf("err %v, want it to contain %q", res.Err, want)
	}
}

func kindsWith(tool runtime.Executor) runtime.Registry {
	k := nodes.Kinds(nodes.Services{})
	k[dsl.KindTool] = tool
	return k
}

func run(t testing.TB, p *dsl.Pipeline, kinds runtime.Registry, inputs map[string]any) (*runtime.Result, *recorder) {
	t.Helper()
	rec := &recorder{}
	res := runtime.Run(context.Background(), kinds, p, inputs, runtime.Options{Sink: rec})
	return res, rec
}

func mustComplete(t *testing.T, res *runtime.Result) {
	t.Helper()
	if res.Status != runtime.StatusCompleted {
		t.Fatalf("status %s, err %v, reason %q", res.Status, res.Err, res.Reason)
	}
}

func TestSetAndOutputs(t *testing.T) {
	p := load(t, `
version: 1
name: t
inputs:
  n: {type: integer, default: 2}
state: {x: 1, y: 0}
nodes:
  - id: a
    set: {x: state.x + inputs.n, y: state.x}
outputs:
  x: state.x
  y: state.y
  a: nodes.a
  text: "x is ${{ state.x }}"
`, nil)
	res, _ := run(t, p, nodes.Kinds(nodes.Services{}), nil)
	mustComplete(t, res)
	// set values all see the state from before the node: y gets the old x.
	want := map[string]any{"x": 3, "y": 1, "a": map[string]any{"x": 3, "y": 1}, "text": "x is 3"}
	if !reflect.DeepEqual(res.Outputs, want) {
		t.Fatalf("outputs = %#v, want %#v", res.Outputs, want)
	}
}

func TestWhenFalseSkips(t *testing.T) {
	p := load(t, `
version: 1
name: t
state: {hits: 0}
nodes:
  - id: skipped
    when: state.hits > 0
    set: {hits: 100}
  - id: ran
    when: state.hits == 0
    set: {hits: state.hits + 1}
outputs: {hits: state.hits, skipped: nodes.skipped}
`, nil)
	res, rec := run(t, p, nodes.Kinds(nodes.Services{}), nil)
	mustComplete(t, res)
	if res.Outputs["hits"] != 1 || res.Outputs["skipped"] != nil {
		t.Fatalf("outputs = %v", res.Outputs)
	}
	if got := rec.paths(runtime.EventNodeSkipped); !reflect.DeepEqual(got, []string{"skipped"}) {
		t.Fatalf("skipped events = %v", got)
	}
}

func TestWhenNonBooleanFails(t *testing.T) {
	p := load(t, `
version: 1
name: t
state: {s: null}
nodes:
  - id: a
    when: state.s ?? "yes"
    set: {s: '"no"'}
`, nil)
	res, _ := run(t, p, nodes.Kinds(nodes.Services{}), nil)
	if res.Status != runtime.StatusFailed || !strings.Contains(res.Err.Error(), `must be true or false, got the string "yes"`) {
		t.Fatalf("status %s err %v", res.Status, res.Err)
	}
	if !strings.Contains(res.Err.Error(), "p.yaml:7:11") {
		t.Fatalf("error should name the expression's position: %v", res.Err)
	}
}

func TestBranchCasesDefaultAndFallThrough(t *testing.T) {
	src := `
version: 1
name: t
inputs: {v: {type: integer}}
state: {path: []}
nodes:
  - id: route
    branch:
      - when: inputs.v == 1
        set: {path: 'concat(state.path, ["one"])'}
        next: one
      - when: inputs.v == 2
        next: two
    default: other
  - id: one
    set: {path: 'concat(state.path, ["one-node"])'}
    next: end
  - id: two
    set: {path: 'concat(state.path, ["two-node"])'}
    next: end
  - id: other
    set: {path: 'concat(state.path, ["other"])'}
outputs: {path: state.path, route: nodes.route}
`
	p := load(t, src, nil)
	cases := []struct {
		v    int
		path []any
		cs   int
	}{
		{1, []any{"one", "one-node"}, 0},
		{2, []any{"two-node"}, 1},
		{3, []any{"other"}, -1},
	}
	for _, c := range cases {
		res, _ := run(t, p, nodes.Kinds(nodes.Services{}), map[string]any{"v": c.v})
		mustComplete(t, res)
		if !reflect.DeepEqual(res.Outputs["path"], c.path) {
			t.Errorf("v=%d: path %v, want %v", c.v, res.Outputs["path"], c.path)
		}
		if got := res.Outputs["route"].(map[string]any)["case"]; got != c.cs {
			t.Errorf("v=%d: case %v, want %d", c.v, got, c.cs)
		}
	}
}

func TestLoopUntilAndPaths(t *testing.T) {
	p := load(t, `
version: 1
name: t
state: {n: 0, seen: []}
nodes:
  - id: refine
    loop:
      max_iterations: 5
      until: state.n >= 3
      body:
        - id: inc
          set: {n: state.n + 1, seen: 'concat(state.seen, [loop.iteration * 10 + loop.index])'}
        - id: route
          branch:
            - when: "false"
              next: break
outputs: {n: state.n, seen: state.seen}
`, nil)
	res, rec := run(t, p, nodes.Kinds(nodes.Services{}), nil)
	mustComplete(t, res)
	if res.Outputs["n"] != 3 || !reflect.DeepEqual(res.Outputs["seen"], []any{10, 21, 32}) {
		t.Fatalf("outputs %v", res.Outputs)
	}
	got := rec.paths(runtime.EventNodeFinished)
	want := []string{"refine[1]/inc", "refine[1]/route", "refine[2]/inc", "refine[2]/route", "refine[3]/inc", "refine[3]/route", "refine"}
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("paths %v\nwant %v", got, want)
	}
	if rec.count(runtime.EventLoopExhausted) != 0 {
		t.Fatal("a loop whose condition held is not exhausted")
	}
}

func TestLoopExhausted(t *testing.T) {
	const src = `
version: 1
name: t
state: {n: 0}
nodes:
  - id: spin
    loop:
      max_iterations: 3
      %s
      on_exhausted: %s
      body:
        - id: inc
          set: {n: state.n + 1}
  - id: after
    set: {n: state.n + 100}
outputs: {n: state.n}
`
	for _, cond := range []string{"until: state.n > 10", "while: state.n < 10"} {
		t.Run(cond+"/continue", func(t *testing.T) {
			p := load(t, strings.Replace(strings.Replace(src, "%s", cond, 1), "%s", "continue", 1), nil)
			res, rec := run(t, p, nodes.Kinds(nodes.Services{}), nil)
			mustComplete(t, res)
			if res.Outputs["n"] != 103 {
				t.Fatalf("n = %v, want 103 (3 iterations, then after)", res.Outputs["n"])
			}
			if got := rec.paths(runtime.EventLoopExhausted); !reflect.DeepEqual(got, []string{"spin"}) {
				t.Fatalf("loop_exhausted events %v", got)
			}
		})
		t.Run(cond+"/fail", func(t *testing.T) {
			p := load(t, strings.Replace(strings.Replace(src, "%s", cond, 1), "%s", "fail", 1), nil)
			res, _ := run(t, p, nodes.Kinds(nodes.Services{}), nil)
			if res.Status != runtime.StatusFailed || !strings.Contains(res.Err.Error(), "reached max_iterations (3)") {
				t.Fatalf("status %s err %v", res.Status, res.Err)
			}
			var ne *runtime.NodeError
			if !errors.As(res.Err, &ne) || ne.Class != errclass.LoopExhausted || ne.Path != "spin" {
				t.Fatalf("error %#v", res.Err)
			}
		})
	}
}

func TestLoopWithoutConditionRunsMaxIterations(t *testing.T) {
	p := load(t, `
version: 1
name: t
state: {n: 0}
nodes:
  - id: l
    loop:
      max_iterations: 4
      body:
        - id: inc
          set: {n: state.n + 1}
outputs: {n: state.n}
`, nil)
	res, rec := run(t, p, nodes.Kinds(nodes.Services{}), nil)
	mustComplete(t, res)
	if res.Outputs["n"] != 4 || rec.count(runtime.EventLoopExhausted) != 0 {
		t.Fatalf("n = %v, exhausted events %d", res.Outputs["n"], rec.count(runtime.EventLoopExhausted))
	}
}

func TestBreakAndContinueInNestedLoops(t *testing.T) {
	p := load(t, `
version: 1
name: t
state: {trace: []}
nodes:
  - id: outer
    loop:
      max_iterations: 3
      body:
        - id: inner
          loop:
            max_iterations: 5
            body:
              - id: mark
                set: {trace: 'concat(state.trace, [string(loop.iteration)])'}
              - id: stop_inner
                branch:
                  - when: loop.iteration == 2
                    next: break
              - id: unreached_on_break
                set: {trace: 'concat(state.trace, ["x"])'}
        - id: skip_rest
          branch:
            - when: loop.iteration == 2
              next: continue
        - id: outer_mark
          set: {trace: 'concat(state.trace, ["o" + string(loop.iteration)])'}
outputs: {trace: state.trace}
`, nil)
	res, _ := run(t, p, nodes.Kinds(nodes.Services{}), nil)
	mustComplete(t, res)
	// break leaves only the inner loop; continue skips outer_mark in outer iteration 2.
	want := []any{"1", "x", "2", "o1", "1", "x", "2", "1", "x", "2", "o3"}
	if !reflect.DeepEqual(res.Outputs["trace"], want) {
		t.Fatalf("trace %v\nwant  %v", res.Outputs["trace"], want)
	}
}

func TestEndInsideLoopEndsRun(t *testing.T) {
	p := load(t, `
version: 1
name: t
state: {n: 0}
nodes:
  - id: l
    loop:
      max_iterations: 10
      body:
        - id: inc
          set: {n: state.n + 1}
        - id: done
          branch:
            - when: state.n == 2
              next: end
  - id: after
    set: {n: 1000}
outputs: {n: state.n}
`, nil)
	res, _ := run(t, p, nodes.Kinds(nodes.Services{}), nil)
	mustComplete(t, res)
	if res.Outputs["n"] != 2 {
		t.Fatalf("n = %v, want 2", res.Outputs["n"])
	}
}

func TestMapKeepsOrderAndBoundsConcurrency(t *testing.T) {
	p := load(t, `
version: 1
name: t
inputs: {n: {type: integer}}
state: {total: 0}
nodes:
  - id: fan
    map:
      over: 0..(inputs.n - 1)
      max_concurrency: 8
      result: 'int(nodes.work) * 2'
      body:
        - id: mark
          set: {}
        - id: work
          tool: {name: read_file, args: {value: "${{ item }}", sleep_ms: "${{ item % 3 }}"}}
    set: {total: sum(nodes.fan)}
outputs: {fan: nodes.fan, total: state.total}
`, nil)
	pr := &probe{}
	res, _ := run(t, p, kindsWith(pr), map[string]any{"n": 1000})
	mustComplete(t, res)
	fan := res.Outputs["fan"].([]any)
	if len(fan) != 1000 {
		t.Fatalf("%d results", len(fan))
	}
	for i, v := range fan {
		if v != i*2 {
			t.Fatalf("result %d = %v: results must keep input order", i, v)
		}
	}
	if res.Outputs["total"] != 999*1000 {
		t.Fatalf("total %v", res.Outputs["total"])
	}
	if m := pr.maxSeen.Load(); m > 8 || m < 2 {
		t.Fatalf("max in flight %d, want 2..8", m)
	}
}

func TestMapItemErrors(t *testing.T) {
	const src = `
version: 1
name: t
state: {}
nodes:
  - id: fan
    map:
      over: '[1, 2, 3]'
      on_item_error: %s
      body:
        - id: work
          tool: {name: read_file, args: {value: "${{ item }}"}}
outputs: {fan: nodes.fan}
`
	failing := func() *probe {
		return &probe{behave: func(a map[string]any, _ int64) (any, error) {
			if a["value"] == 2 {
				return nil, errors.New("item two is broken")
			}
			return a["value"], nil
		}}
	}
	res, rec := run(t, load(t, strings.Replace(src, "%s", "skip", 1), nil), kindsWith(failing()), nil)
	mustComplete(t, res)
	if !reflect.DeepEqual(res.Outputs["fan"], []any{1, nil, 3}) {
		t.Fatalf("fan %v", res.Outputs["fan"])
	}
	if got := rec.paths(runtime.EventMapItemSkipped); !reflect.DeepEqual(got, []string{"fan[1]"}) {
		t.Fatalf("skipped %v", got)
	}
	res, _ = run(t, load(t, strings.Replace(src, "%s", "fail", 1), nil), kindsWith(failing()), nil)
	if res.Status != runtime.StatusFailed || !strings.Contains(res.Err.Error(), `node "fan[1]/work": item two is broken`) {
		t.Fatalf("status %s err %v", res.Status, res.Err)
	}
}

func TestParallelJoinIsDeterministic(t *testing.T) {
	p := load(t, `
version: 1
name: t
state: {winner: {default: "", merge: replace}, a_only: 0, b_only: 0}
nodes:
  - id: both
    parallel:
      branches:
        a:
          - id: slow_a
            tool: {name: read_file, args: {value: '"a"', sleep_ms: "${{ 2 }}"}}
            set: {winner: '"a"', a_only: 1}
        b:
          - id: fast_b
            tool: {name: read_file, args: {value: '"b"'}}
            set: {winner: '"b"', b_only: 2}
outputs: {winner: state.winner, a: state.a_only, b: state.b_only, both: nodes.both, fast_b: nodes.fast_b}
`, nil)
	for i := range 30 {
		res, _ := run(t, p, kindsWith(&probe{}), nil)
		mustComplete(t, res)
		want := map[string]any{"winner": "b", "a": 1, "b": 2,
			"both": map[string]any{"a": "a", "b": "b"}, "fast_b": "b"}
		if !reflect.DeepEqual(res.Outputs, want) {
			t.Fatalf("run %d: outputs %v, want %v (branch writes apply in declaration order)", i, res.Outputs, want)
		}
	}
}

func TestOnErrorRoutes(t *testing.T) {
	p := load(t, `
version: 1
name: t
state: {route: ""}
nodes:
  - id: boom
    set: {route: 'fromJSON("{not json")'}
    on_error: recover
  - id: skipped_by_route
    set: {route: '"wrong"'}
  - id: recover
    set: {route: '"recovered: " + nodes.boom.error.class'}
  - id: boom2
    set: {route: 'fromJSON("nope")'}
    on_error: continue
  - id: after
    set: {route: 'state.route + ", continued"'}
outputs: {route: state.route}
`, nil)
	res, rec := run(t, p, nodes.Kinds(nodes.Services{}), nil)
	mustComplete(t, res)
	if res.Outputs["route"] != "recovered: expression, continued" {
		t.Fatalf("route %q", res.Outputs["route"])
	}
	if got := rec.paths(runtime.EventNodeFailed); !reflect.DeepEqual(got, []string{"boom", "boom2"}) {
		t.Fatalf("failed events %v", got)
	}
}

func TestFailureNamesNodePath(t *testing.T) {
	p := load(t, `
version: 1
name: t
state: {x: 0}
nodes:
  - id: l
    loop:
      max_iterations: 3
      body:
        - id: bad
          when: loop.iteration == 2
          set: {x: 'fromJSON("{")'}
outputs: {x: state.x}
`, nil)
	res, _ := run(t, p, nodes.Kinds(nodes.Services{}), nil)
	if res.Status != runtime.StatusFailed {
		t.Fatalf("status %s", res.Status)
	}
	if !strings.HasPrefix(res.Err.Error(), `node "l[2]/bad": set x: `) || !strings.Contains(res.Err.Error(), "p.yaml:12:21") {
		t.Fatalf("err %v", res.Err)
	}
}

func TestRetryThenSucceed(t *testing.T) {
	p := load(t, `
version: 1
name: t
nodes:
  - id: flaky
    tool: {name: read_file, args: {value: '"ok"'}}
    retry: {max_attempts: 3, backoff: 1ms}
outputs: {v: nodes.flaky}
`, nil)
	pr := &probe{behave: func(a map[string]any, call int64) (any, error) {
		if call < 3 {
			return nil, runtime.Errorf(errclass.Server, "503 from upstream")
		}
		return a["value"], nil
	}}
	res, rec := run(t, p, kindsWith(pr), nil)
	mustComplete(t, res)
	if res.Outputs["v"] != "ok" || pr.calls.Load() != 3 || rec.count(runtime.EventNodeRetry) != 2 {
		t.Fatalf("v=%v calls=%d retries=%d", res.Outputs["v"], pr.calls.Load(), rec.count(runtime.EventNodeRetry))
	}
}

func TestRetryOnlyListedClasses(t *testing.T) {
	p := load(t, `
version: 1
name: t
nodes:
  - id: flaky
    tool: {name: read_file, args: {}}
    retry: {max_attempts: 5, backoff: 1ms, retry_on: [rate_limit]}
`, nil)
	pr := &probe{behave: func(map[string]any, int64) (any, error) {
		return nil, runtime.Errorf(errclass.Critical, "401 unauthorized")
	}}
	res, _ := run(t, p, kindsWith(pr), nil)
	if res.Status != runtime.StatusFailed || pr.calls.Load() != 1 {
		t.Fatalf("status %s calls %d: a critical error is not retried", res.Status, pr.calls.Load())
	}
}

func TestNodeTimeout(t *testing.T) {
	p := load(t, `
version: 1
name: t
nodes:
  - id: slow
    tool: {name: read_file, args: {sleep_ms: 5000}}
    timeout: 20ms
    on_error: continue
outputs: {err: nodes.slow.error.class}
`, nil)
	start := time.Now()
	res, _ := run(t, p, kindsWith(&probe{}), nil)
	mustComplete(t, res)
	if res.Outputs["err"] != string(errclass.Timeout) {
		t.Fatalf("class %v", res.Outputs["err"])
	}
	if time.Since(start) > 3*time.Second {
		t.Fatal("the node's timeout did not cancel it")
	}
}

func TestMaxStepsStopsRun(t *testing.T) {
	p := load(t, `
version: 1
name: t
state: {n: 0}
limits: {max_steps: 5}
nodes:
  - id: l
    loop:
      max_iterations: 100
      body:
        - id: inc
          set: {n: state.n + 1}
outputs: {n: state.n}
`, nil)
	res, _ := run(t, p, nodes.Kinds(nodes.Services{}), nil)
	if res.Status != runtime.StatusStopped || !strings.Contains(res.Reason, "limits.max_steps (5)") {
		t.Fatalf("status %s reason %q err %v", res.Status, res.Reason, res.Err)
	}
	// The loop node is step 1; four increments ran before the limit.
	if res.Outputs["n"] != 4 || res.Steps != 6 {
		t.Fatalf("n = %v steps = %d", res.Outputs["n"], res.Steps)
	}
}

func TestRunTimeoutStopsRun(t *testing.T) {
	p := load(t, `
version: 1
name: t
limits: {timeout: 50ms}
nodes:
  - id: slow
    tool: {name: read_file, args: {sleep_ms: 5000}}
    retry: {max_attempts: 3}
`, nil)
	res, _ := run(t, p, kindsWith(&probe{}), nil)
	if res.Status != runtime.StatusStopped || !strings.Contains(res.Reason, "limits.timeout (50ms)") {
		t.Fatalf("status %s reason %q err %v", res.Status, res.Reason, res.Err)
	}
}

func TestCallSubPipeline(t *testing.T) {
	p := load(t, `
version: 1
name: t
state: {r: null}
nodes:
  - id: sub
    call:
      pipeline: double.yaml
      inputs: {x: "${{ 21 }}", label: "n=${{ 21 }}"}
    set: {r: nodes.sub}
outputs: {r: state.r}
`, map[string]string{"double.yaml": `
version: 1
name: double
inputs:
  x: {type: integer}
  label: {type: string}
  scale: {type: integer, default: 2}
state: {y: 0}
nodes:
  - id: mul
    set: {y: inputs.x * inputs.scale}
outputs: {y: state.y, label: inputs.label}
`})
	res, rec := run(t, p, nodes.Kinds(nodes.Services{}), nil)
	mustComplete(t, res)
	if !reflect.DeepEqual(res.Outputs["r"], map[string]any{"y": 42, "label": "n=21"}) {
		t.Fatalf("r = %v", res.Outputs["r"])
	}
	if got := rec.paths(runtime.EventNodeFinished); !reflect.DeepEqual(got, []string{"sub/mul", "sub"}) {
		t.Fatalf("paths %v", got)
	}
}

func TestInputsValidatedBeforeRun(t *testing.T) {
	p := load(t, `
version: 1
name: t
inputs:
  q: {type: string}
  k: {type: integer, minimum: 1, default: 3}
  img: {type: string, format: path, default: ""}
nodes:
  - id: a
    set: {}
`, nil)
	cases := []struct {
		in   map[string]any
		want string
	}{
		{map[string]any{}, `missing input "q"`},
		{map[string]any{"q": 5}, `input "q": expected string, but got number`},
		{map[string]any{"q": "x", "k": 0}, `input "k": must be >= 1`},
		{map[string]any{"q": "x", "kk": 1}, `unknown input "kk" (did you mean "k"?)`},
		{map[string]any{"q": "x", "img": "/no/such/file.png"}, `input "img": file "/no/such/file.png" does not exist`},
	}
	for _, c := range cases {
		res, rec := run(t, p, nodes.Kinds(nodes.Services{}), c.in)
		if res.Status != runtime.StatusFailed || !strings.Contains(res.Err.Error(), c.want) {
			t.Errorf("inputs %v: status %s err %v, want %q", c.in, res.Status, res.Err, c.want)
		}
		if rec.count(runtime.EventNodeStarted) != 0 {
			t.Errorf("inputs %v: a node ran before inputs were valid", c.in)
		}
	}
	in, err := runtime.PrepareInputs(p, map[string]any{"q": "x"})
	if err != nil || in["k"] != 3 {
		t.Fatalf("defaults not applied: %v %v", in, err)
	}
}

func TestUnavailableKindFailsBeforeRunning(t *testing.T) {
	p := load(t, `
version: 1
name: t
models: {default: {model: gpt-4.1-mini}}
state: {x: 0}
nodes:
  - id: first
    set: {x: 1}
  - id: ask_model
    llm: {prompt: hi}
`, nil)
	res, rec := run(t, p, nodes.Kinds(nodes.Services{}), nil)
	if res.Status != runtime.StatusFailed || !strings.Contains(res.Err.Error(), `node "ask_model": node kind llm is not available in this build yet`) {
		t.Fatalf("status %s err %v", res.Status, res.Err)
	}
	if rec.count(runtime.EventNodeStarted) != 0 {
		t.Fatal("no node may run when the pipeline cannot run to the end")
	}
}

func TestEnvNames(t *testing.T) {
	p := load(t, `
version: 1
name: t
env: [FLOWRUN_TEST_GREETING, FLOWRUN_TEST_UNSET]
nodes:
  - id: a
    set: {}
outputs: {g: env.FLOWRUN_TEST_GREETING, u: env.FLOWRUN_TEST_UNSET}
`, nil)
	rec := &recorder{}
	res := runtime.Run(context.Background(), nodes.Kinds(nodes.Services{}), p, nil, runtime.Options{Sink: rec, LookupEnv: func(k string) (string, bool) {
		if k == "FLOWRUN_TEST_GREETING" {
			return "hello", true
		}
		return "", false
	}})
	mustComplete(t, res)
	if res.Outputs["g"] != "hello" || res.Outputs["u"] != nil {
		t.Fatalf("outputs %v", res.Outputs)
	}
}

func TestLoopVariablesInsideAMapInALoop(t *testing.T) {
	p := load(t, `
version: 1
name: t
state: {seen: []}
nodes:
  - id: rounds
    loop:
      max_iterations: 2
      body:
        - id: fan
          map:
            over: '[1, 2]'
            result: loop.iteration * 10 + item
            body:
              - id: noop
                set: {}
          set: {seen: 'concat(state.seen, nodes.fan)'}
outputs: {seen: state.seen}
`, nil)
	res, _ := run(t, p, nodes.Kinds(nodes.Services{}), nil)
	mustComplete(t, res)
	if !reflect.DeepEqual(res.Outputs["seen"], []any{11, 12, 21, 22}) {
		t.Fatalf("seen %v", res.Outputs["seen"])
	}
}

// TestStateMerges checks that writes to a variable with merge: reach the
// run from map items in item order and from parallel branches in
// declaration order, whichever finishes first, and that plain set:s of
// it combine too.
func TestStateMerges(t *testing.T) {
	p := load(t, `
version: 1
name: t
state:
  seen: {default: [], merge: append}
  total: {default: 0, merge: sum}
  best: {default: 0, merge: max}
  last: {default: "", merge: replace}
nodes:
  - id: fan
    map:
      over: '[3, 1, 2]'
      max_concurrency: 3
      body:
        - id: work
          tool: {name: read_file, args: {value: item, sleep_ms: "(4 - item) * 2"}}
          set: {seen: item, total: item, best: item}
  - id: both
    parallel:
      branches:
        a:
          - id: slow_a
            tool: {name: read_file, args: {value: '"a"', sleep_ms: 3}}
            set: {seen: '"a"', last: '"a"'}
        b:
          - id: fast_b
            set: {seen: '"b"', last: '"b"'}
  - id: more
    set: {seen: '"c"', total: 10}
outputs: {seen: state.seen, total: state.total, best: state.best, last: state.last}
`, nil)
	for i := range 20 {
		res, _ := run(t, p, kindsWith(&probe{}), nil)
		mustComplete(t, res)
		want := map[string]any{"seen": []any{3, 1, 2, "a", "b", "c"}, "total": 16, "best": 3, "last": "b"}
		if !reflect.DeepEqual(res.Outputs, want) {
			t.Fatalf("run %d: outputs %v, want %v", i, res.Outputs, want)
		}
	}
}

// TestLoopBoundFromExpression checks that max_iterations may be an
// expression, evaluated once when the loop starts.
func TestLoopBoundFromExpression(t *testing.T) {
	p := load(t, `
version: 1
name: t
inputs: {rounds: {type: integer}}
state: {n: 0}
nodes:
  - id: again
    loop:
      max_iterations: inputs.rounds * 2
      body:
        - id: inc
          set: {n: state.n + 1}
outputs: {n: state.n}
`, nil)
	res, _ := run(t, p, nodes.Kinds(nodes.Services{}), map[string]any{"rounds": 3})
	mustComplete(t, res)
	if res.Outputs["n"] != 6 {
		t.Fatalf("outputs %v, want n 6", res.Outputs)
	}
	for rounds, want := range map[int]string{0: "got 0", 500_001: "got 1000002"} {
		res, _ = run(t, p, nodes.Kinds(nodes.Services{}), map[string]any{"rounds": rounds})
		if res.Status != runtime.StatusFailed || !strings.Contains(res.Err.Error(), "max_iterations must be an integer from 1 to 1000000, "+want) {
			t.Fatalf("rounds %d: status %s err %v", rounds, res.Status, res.Err)
		}
	}
}
