package nodes_test

import (
	"fmt"
	"strconv"
	"strings"
	"testing"

	"github.com/flowrun/flowrun/internal/testneed"
	"github.com/flowrun/flowrun/llm"
	"github.com/flowrun/flowrun/llm/llmtest"
	"github.com/flowrun/flowrun/nodes"
	"github.com/flowrun/flowrun/runtime"
	"github.com/flowrun/flowrun/sandbox"
	"github.com/flowrun/flowrun/sandbox/sandboxtest"
)

// codeKinds is the registry with a sandbox; tests that need Python skip
// where it is not installed, except in CI, which must run them.
func codeKinds(t *testing.T, lang string) runtime.Registry {
	t.Helper()
	sb := sandbox.New(sandbox.Options{})
	t.Cleanup(sb.Close)
	if lang == sandbox.Python {
		testneed.Need(t, testneed.PythonForWASI, sb.Check(lang))
	} else if err := sb.Check(lang); err != nil {
		t.Fatal(err)
	}
	return nodes.Kinds(nodes.Services{Sandbox: sb})
}

func TestCodeNodeMapOfFifty(t *testing.T) {
	p := load(t, `
version: 1
name: t
nodes:
  - id: fan
    map:
      over: 0..49
      max_concurrency: 8
      result: nodes.square.result
      body:
        - id: square
          code:
            language: python
            source: |
              import random
              def f(n, tag):
                  # Global state must not leak between runs.
                  global seen
                  try:
                      seen.append(n)
                  except NameError:
                      seen = [n]
                  return {"n": n * n, "tag": tag, "seen": len(seen), "r": random.random()}
            call: f
            args: ["${{ item }}", "item-${{ item }}"]
outputs: {fan: nodes.fan}
`, nil)
	res, _ := run(t, p, codeKinds(t, sandbox.Python), nil)
	mustComplete(t, res)
	fan := res.Outputs["fan"].([]any)
	var r0 any
	for i, v := range fan {
		m := v.(map[string]any)
		if m["n"] != i*i || m["tag"] != "item-"+strconv.Itoa(i) || m["seen"] != 1 {
			t.Fatalf("item %d: %v (each run is a fresh instance: no cross-talk)", i, m)
		}
		if i == 0 {
			r0 = m["r"]
		} else if m["r"] != r0 {
			t.Fatalf("the random seed is fixed: item %d drew %v, item 0 drew %v", i, m["r"], r0)
		}
	}
}

func TestCodeNodeReportsErrorsAsData(t *testing.T) {
	p := load(t, `
version: 1
name: t
state: {fixed: false}
nodes:
  - id: attempt
    code:
      language: go
      source: |
        package main

        func f(x int) int {
        	var m map[string]int
        	m["boom"] = x
        	return x
        }
      call: f
      args: [3]
  - id: check
    set: {fixed: nodes.attempt.ok}
outputs: {ok: nodes.attempt.ok, class: nodes.attempt.error.class, line: nodes.attempt.error.line, fixed: state.fixed}
`, nil)
	res, rec := run(t, p, codeKinds(t, sandbox.Go), nil)
	mustComplete(t, res)
	if res.Outputs["ok"] != false || res.Outputs["class"] != "runtime_error" || res.Outputs["line"] != 5 {
		t.Fatalf("outputs %v", res.Outputs)
	}
	found := false
	for _, e := range rec.All() {
		if e.Type == runtime.EventSandboxRun && e.Path == "attempt" && strings.Contains(e.Error, "assignment to entry in nil map") {
			found = true
		}
	}
	if !found {
		t.Fatal("no sandbox_run event with the error")
	}
}

func TestAgentUsesPythonExecute(t *testing.T) {
	sb := sandbox.New(sandbox.Options{})
	t.Cleanup(sb.Close)
	testneed.Need(t, testneed.PythonForWASI, sb.Check(sandbox.Python))
	srv := llmtest.New(t)
	srv.Push(
		llmtest.Calls(llmtest.Call("python_execute", map[string]any{"code": "print('adding')\nsum(range(10))"})),
		llmtest.Calls(llmtest.Call("done", map[string]any{"answer": 45})),
	)
	p := load(t, `
version: 1
name: t
models: {default: {model: gpt-4.1-mini}}
tools:
  done:
    description: Give the answer.
    parameters: {type: object, properties: {answer: {type: integer}}, required: [answer]}
nodes:
  - id: solve
    agent: {prompt: "What is 0+1+...+9?", tools: [python_execute], finish: [done], max_steps: 3}
outputs: {answer: nodes.solve.finish.args.answer}
`, nil)
	kinds := nodes.Kinds(nodes.Services{LLM: llm.New(llm.Options{Env: srv.Env(fakeKey)}), Sandbox: sb})
	res, rec := run(t, p, kinds, nil)
	mustComplete(t, res)
	if res.Outputs["answer"] != 45 {
		t.Fatalf("outputs %v", res.Outputs)
	}
	// The tool's reply reached the model: stdout and the last expression's value.
	second := string(srv.Requests()[1].Raw)
	if !strings.Contains(second, `adding\\n`) || !strings.Contains(second, `\"result\":45`) {
		t.Fatalf("the tool reply is not in the next request:\n%s", second)
	}
	ran := false
	for _, e := range rec.All() {
		if e.Type == runtime.EventSandboxRun && e.Class == "" {
			ran = true
		}
	}
	if !ran {
		t.Fatal("no sandbox_run event")
	}
}

// TestCodeResultSchema checks that a result breaking result_schema is the
// code's bad_result, data for the pipeline, while a matching one passes.
func TestCodeResultSchema(t *testing.T) {
	p := load(t, `
version: 1
name: t
nodes:
  - id: good
    code:
      language: go
      source: |
        package main

        func f(x int) map[string]int { return map[string]int{"total": x} }
      call: f
      args: [3]
      result_schema: {type: object, properties: {total: {type: integer}}, required: [total]}
  - id: bad
    code:
      language: go
      source: |
        package main

        func f(x int) map[string]string { return map[string]string{"total": "three"} }
      call: f
      args: [3]
      result_schema: {type: object, properties: {total: {type: integer}}, required: [total]}
outputs: {total: nodes.good.result.total, ok: nodes.bad.ok, class: nodes.bad.error.class}
`, nil)
	res, _ := run(t, p, codeKinds(t, sandbox.Go), nil)
	mustComplete(t, res)
	if res.Outputs["total"] != 3 || res.Outputs["ok"] != false || res.Outputs["class"] != "bad_result" {
		t.Fatalf("outputs %v", res.Outputs)
	}
}

// A code node imports numpy with nothing declared in the pipeline.
func TestCodeNodeNumpy(t *testing.T) {
	kinds := codeKinds(t, sandbox.Python)
	sandboxtest.NeedNumpy(t)
	p := load(t, `
version: 1
name: t
inputs:
  grid: {type: array, items: {type: array, items: {type: integer}}}
nodes:
  - id: solve
    code:
      language: python
      source: |
        import numpy as np
        def transform(grid):
            g = np.array(grid)
            return np.rot90(np.where(g == 0, 5, g)).tolist()
      call: transform
      args: ["${{ inputs.grid }}"]
outputs: {grid: nodes.solve.result}
`, nil)
	res, _ := run(t, p, kinds, map[string]any{"grid": []any{[]any{1, 0}, []any{0, 2}}})
	mustComplete(t, res)
	want := "[[5 2] [1 5]]"
	if got := fmt.Sprint(res.Outputs["grid"]); got != want {
		t.Errorf("grid %s, want %s", got, want)
	}
}
