package flowtest

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/flowrun/flowrun/runtime"
	"github.com/flowrun/flowrun/sandbox/sandboxtest"
)

// testRunner stops the sandbox its cases shared when the test ends.
func testRunner(t *testing.T) *Runner {
	r := &Runner{}
	t.Cleanup(func() { r.Close() })
	return r
}

// recordCase runs a case of testdata/fromrun/review.yaml, written to a
// temporary copy of the directory, and returns the copy and the result.
func recordCase(t *testing.T, body string) (string, *Result) {
	t.Helper()
	dir := t.TempDir()
	for _, name := range []string{"review.yaml", "notes.md"} {
		b, err := os.ReadFile(filepath.Join("testdata", "fromrun", name))
		if err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(dir, name), b, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	path := filepath.Join(dir, "source.test.yaml")
	if err := os.WriteFile(path, []byte("pipeline: review.yaml\n"+body), 0o644); err != nil {
		t.Fatal(err)
	}
	f, ds := Load(path)
	if len(ds) > 0 {
		t.Fatalf("load: %s", ds)
	}
	return dir, testRunner(t).Run(context.Background(), f, f.Cases[0])
}

// replay converts a recorded result into a test file beside the pipeline,
// loads it and runs its case.
func replay(t *testing.T, dir string, rec *Result) (string, *Result) {
	t.Helper()
	b, err := FromRun(RecordedRun{ID: "r1", Pipeline: rec.File.Pipeline, PipelinePath: "review.yaml", Inputs: rec.Case.Inputs, Events: rec.Events})
	if err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(dir, "replay.test.yaml")
	if err := os.WriteFile(path, b, 0o644); err != nil {
		t.Fatal(err)
	}
	f, ds := Load(path)
	if len(ds) > 0 {
		t.Fatalf("the written case does not load: %s\n%s", ds, b)
	}
	return string(b), testRunner(t).Run(context.Background(), f, f.Cases[0])
}

// A run with a loop (a model node and a code node per iteration), a
// retried rate limit, a question and an agent that calls a built-in tool
// before it finishes becomes a case that mocks each call by iteration, in
// order (the tool's result too), and passes; the same case fails once the pipeline computes
// another output.
func TestFromRunReplaysLoopsRetriesAndAnswers(t *testing.T) {
	sandboxtest.NeedPython(t)
	dir, rec := recordCase(t, `cases:
  - name: source
    inputs: {topic: owls}
    mocks:
      write:
        - {error: rate_limit}
        - {text: "Owls hunt at night.", usage: {prompt: 10, completion: 5}}
        - {text: "Owls are silent.", usage: {prompt: 12, completion: 4}}
      count:
        - {output: {ok: true, result: 19}}
        - {output: {ok: true, result: 16}}
      judge:
        - calls: [{name: read_file, args: {path: notes.md}}]
        - finish: {name: verdict, args: {ok: false}}
    answers: {approve: false}
    expect: {status: completed}
`)
	if !rec.Pass {
		t.Fatalf("source case: %s %s %s", rec.Status, rec.Missing, strings.Join(rec.Problems, "\n"))
	}
	// The file the agent read is gone: the replay reads the mock.
	if err := os.Remove(filepath.Join(dir, "notes.md")); err != nil {
		t.Fatal(err)
	}
	text, res := replay(t, dir, rec)
	if !res.Pass {
		t.Fatalf("replayed case failed:\n%s\n%s", strings.Join(res.Problems, "\n"), text)
	}
	read := 0
	for _, e := range res.Events {
		if e.Type == runtime.EventToolCall && e.Tool.Name == "read_file" {
			read++
			if e.Tool.Result != "hello notes\n" || e.Tool.Error != "" {
				t.Errorf("read_file gave %#v, %q; want the mocked text", e.Tool.Result, e.Tool.Error)
			}
		}
	}
	if read != 1 {
		t.Errorf("read_file called %d times, want once", read)
	}
	for _, want := range []string{
		"refine[1]/write:\n        - error: rate_limit\n        - text: Owls hunt at night.\n",
		"refine[2]/write:\n        - text: Owls are silent.\n",
		"refine[1]/count:\n        - output:\n            ok: true\n            result: 19\n",
		"- name: read_file\n", "path: notes.md", "- name: verdict\n", "ok: false",
		"answers:\n      approve: false\n",
		"route:\n        - refine\n        - refine[1]/write\n        - refine[1]/count\n        - refine[2]/write\n        - refine[2]/count\n        - approve\n        - judge\n",
		"chars: 16", "approved: false", "tools:\n      read_file:\n        - output: |\n            hello notes\n",
	} {
		if !strings.Contains(text, want) {
			t.Errorf("the case lacks %q:\n%s", want, text)
		}
	}
	// The case checks what the run gave: an edited output breaks it.
	p := filepath.Join(dir, "review.yaml")
	src, _ := os.ReadFile(p)
	if err := os.WriteFile(p, []byte(strings.Replace(string(src), "approved: nodes.approve", "approved: '!nodes.approve'", 1)), 0o644); err != nil {
		t.Fatal(err)
	}
	f, ds := Load(filepath.Join(dir, "replay.test.yaml"))
	if len(ds) > 0 {
		t.Fatal(ds)
	}
	if res := testRunner(t).Run(context.Background(), f, f.Cases[0]); res.Pass || !strings.Contains(strings.Join(res.Problems, "\n"), "outputs.approved") {
		t.Errorf("the edited pipeline passed the case, or failed elsewhere: %v", res.Problems)
	}
}

// A failed run's case expects the failure and its class.
func TestFromRunExpectsAFailure(t *testing.T) {
	sandboxtest.NeedPython(t)
	dir, rec := recordCase(t, `cases:
  - name: source
    inputs: {topic: owls}
    mocks:
      write: {error: critical, message: model not found}
    expect: {status: failed, class: critical}
`)
	if !rec.Pass {
		t.Fatalf("source case: %s %s %s", rec.Status, rec.Missing, strings.Join(rec.Problems, "\n"))
	}
	text, res := replay(t, dir, rec)
	if !res.Pass || !strings.Contains(text, "status: failed") || !strings.Contains(text, "class: critical") {
		t.Fatalf("replayed case: %v\n%s", res.Problems, text)
	}
}

// A run that has not finished has no outputs to expect.
func TestFromRunRefusesAnUnfinishedRun(t *testing.T) {
	sandboxtest.NeedPython(t) // its pipeline has a code node, mocked: the node kind must still be here
	_, rec := recordCase(t, `cases:
  - name: source
    inputs: {topic: owls}
    mocks:
      write: {text: "x"}
      count: {output: {ok: true, result: 1}}
    expect: {status: completed}
`)
	events := rec.Events[:len(rec.Events)-1]
	if _, err := FromRun(RecordedRun{ID: "r1", Pipeline: rec.File.Pipeline, Events: events}); err == nil || !strings.Contains(err.Error(), "has not finished") {
		t.Errorf("error %v", err)
	}
}

// A mock keyed by a run path answers that iteration alone, before the
// node's own mock; a run path that is not the node's whole path is an
// error at load.
func TestMockByRunPath(t *testing.T) {
	_, results := runFile(t, `
cases:
  - name: the second round has its own reply
    mocks:
      critique: {json: {verdict: REVISE}}
      refine[2]/critique: {json: {verdict: ACCEPT}}
    expect:
      outputs: {verdict: ACCEPT}
      route: [refine, critique, route, critique, route]
`)
	if !results[0].Pass {
		t.Fatalf("case failed: %s", strings.Join(results[0].Problems, "\n"))
	}
	_, ds := Load(writeTest(t, `
cases:
  - name: an id with an index
    mocks:
      critique[2]: {json: {verdict: ACCEPT}}
`))
	if !strings.Contains(ds.String(), `mocks: "critique[2]" names one iteration of "refine/critique" but not by its whole path; write it as refine/critique with the indices`) {
		t.Errorf("diagnostics: %s", ds)
	}
}

// tools: mocks a built-in tool an agent calls by its name; a name no
// agent calls is an error naming those it does.
func TestBuiltinToolMock(t *testing.T) {
	sandboxtest.NeedPython(t)
	dir, rec := recordCase(t, `cases:
  - name: read_file mocked
    inputs: {topic: owls}
    mocks:
      write: {text: "x"}
      count: {output: {ok: true, result: 1}}
      judge:
        - calls: [{name: read_file, args: {path: nowhere.md}}]
        - finish: {name: verdict, args: {ok: true}}
    tools:
      read_file: {output: "from the mock"}
    answers: {approve: true}
    expect: {outputs: {ok: true}}
`)
	if !rec.Pass {
		t.Fatalf("case: %s %s", rec.Missing, strings.Join(rec.Problems, "\n"))
	}
	for _, e := range rec.Events {
		if e.Type == runtime.EventToolCall && e.Tool.Name == "read_file" && e.Tool.Result != "from the mock" {
			t.Errorf("read_file gave %#v, %q", e.Tool.Result, e.Tool.Error)
		}
	}
	path := filepath.Join(dir, "bad.test.yaml")
	if err := os.WriteFile(path, []byte("pipeline: review.yaml\ncases:\n  - name: typo\n    tools:\n      read_fil: {output: x}\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if _, ds := Load(path); !strings.Contains(ds.String(), `tools: "read_fil" is not an MCP tool; write server.tool, as agents name it (such as fs.read_text_file), or name a built-in or pipeline tool an agent calls (agents call read_file) (did you mean "read_file"?)`) {
		t.Errorf("diagnostics: %s", ds)
	}
}
