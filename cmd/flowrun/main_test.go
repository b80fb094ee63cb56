package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"flag"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/flowrun/flowrun/internal/testneed"
	"github.com/flowrun/flowrun/internal/testwait"
	"github.com/flowrun/flowrun/sandbox"
)

var update = flag.Bool("update", false, "rewrite golden files")

func flowrun(t *testing.T, args ...string) (code int, stdout, stderr string) {
	t.Helper()
	var out, errb bytes.Buffer
	code = cli(context.Background(), args, strings.NewReader(""), &out, &errb)
	if code != exitOK && os.Getenv("XDG_CACHE_HOME") == machineCache && strings.Contains(errb.String(), installPython) {
		needPython(t)
	}
	return code, out.String(), errb.String()
}

// machineCache and pythonInstalled are the machine's cache directory and
// whether it holds the sandbox's Python, as the tests found them: a test
// that points XDG_CACHE_HOME elsewhere means to run without it.
var (
	machineCache    = os.Getenv("XDG_CACHE_HOME")
	pythonInstalled = sandbox.PythonStatus().Installed
)

// needPython skips a test that runs a pipeline with Python code where the
// machine has no Python for WASI, saying what to install; CI installs it,
// so there the test runs and fails.
func needPython(t *testing.T) {
	t.Helper()
	var problem error
	if !pythonInstalled {
		problem = errors.New("not installed")
	}
	testneed.Need(t, testneed.PythonForWASI, problem)
}

func writeFile(t *testing.T, dir, name, body string) string {
	t.Helper()
	path := filepath.Join(dir, name)
	if err := os.WriteFile(path, []byte(body), 0o644); err != nil {
		t.Fatal(err)
	}
	return path
}

func TestRunShippedExample(t *testing.T) {
	code, stdout, stderr := flowrun(t, "../../pipelines/counter.yaml")
	if code != exitOK {
		t.Fatalf("exit %d\n%s", code, stderr)
	}
	var out map[string]any
	if err := json.Unmarshal([]byte(stdout), &out); err != nil {
		t.Fatalf("stdout is not one JSON object: %v\n%s", err, stdout)
	}
	if out["count"] != 3.0 || out["longest"] != 5.0 {
		t.Fatalf("outputs %v", out)
	}
	for _, want := range []string{"count_up[3]/step", "measure[1]/shout", "both[long]/longest", "completed"} {
		if !strings.Contains(stderr, want) {
			t.Errorf("progress on stderr lacks %q:\n%s", want, stderr)
		}
	}
}

func TestRunFlagsAnywhereAndInputs(t *testing.T) {
	dir := t.TempDir()
	p := writeFile(t, dir, "p.yaml", `
version: 1
name: echo
inputs:
  word: {type: string}
  n: {type: integer}
  tags: {type: array, default: []}
nodes:
  - id: a
    set: {}
outputs: {word: inputs.word, n: inputs.n, tags: inputs.tags}
`)
	in := writeFile(t, dir, "in.yaml", "word: from-file\nn: 1\ntags: [x]\n")
	code, stdout, stderr := flowrun(t, "run", "--inputs", in, p, "--input", "word=42", "--input", `tags=["a","b"]`)
	if code != exitOK {
		t.Fatalf("exit %d: %s", code, stderr)
	}
	var out map[string]any
	_ = json.Unmarshal([]byte(stdout), &out)
	if out["word"] != "42" || out["n"] != 1.0 || len(out["tags"].([]any)) != 2 {
		t.Fatalf("outputs %v: a string input keeps its text, flags override the file", out)
	}
	code, _, stderr = flowrun(t, p, "--input", "word=x", "--input", "n=many")
	if code != exitInvalid || !strings.Contains(stderr, `input "n": expected integer, but got string`) {
		t.Fatalf("exit %d: %s", code, stderr)
	}
}

func TestRunJSONEvents(t *testing.T) {
	code, stdout, _ := flowrun(t, "../../pipelines/counter.yaml", "--json")
	if code != exitOK {
		t.Fatalf("exit %d", code)
	}
	lines := strings.Split(strings.TrimSpace(stdout), "\n")
	var first, last map[string]any
	_ = json.Unmarshal([]byte(lines[0]), &first)
	if err := json.Unmarshal([]byte(lines[len(lines)-1]), &last); err != nil {
		t.Fatal(err)
	}
	if first["type"] != "run_started" || last["type"] != "run_finished" || last["status"] != "completed" || last["outputs"] == nil {
		t.Fatalf("first %v\nlast %v", first, last)
	}
	for _, l := range lines {
		var e map[string]any
		if err := json.Unmarshal([]byte(l), &e); err != nil {
			t.Fatalf("not a JSON line: %q", l)
		}
	}
}

func TestExitCodes(t *testing.T) {
	dir := t.TempDir()
	stopped := writeFile(t, dir, "stopped.yaml", `
version: 1
name: s
limits: {max_steps: 2}
state: {n: 0}
nodes:
  - id: l
    loop:
      max_iterations: 10
      body:
        - id: inc
          set: {n: state.n + 1}
`)
	llm := writeFile(t, dir, "llm.yaml", `
version: 1
name: l
models: {default: {model: gpt-4.1-mini}}
nodes:
  - id: ask
    llm: {prompt: hello}
`)
	bad := writeFile(t, dir, "bad.yaml", "version: 1\nname: b\nnodes:\n  - id: a\n    nxt: b\n")
	cases := []struct {
		name   string
		args   []string
		code   int
		stderr string
	}{
		{"stopped", []string{stopped}, exitFailed, "stopped: limits.max_steps (2) reached"},
		{"stopped by a limit names the fix", []string{stopped}, exitFailed, "To continue: raise the limit in the pipeline, then flowrun resume "},
		{"no model endpoint", []string{llm}, exitInvalid, "no model endpoint: set OPENAI_API_KEY (or OPENAI_BASE_URL for a local OpenAI-compatible server), or replay a recorded run with --replay FILE"},
		{"invalid pipeline", []string{bad}, exitInvalid, `bad.yaml:5:5: error: node "a": unknown field "nxt" (did you mean "next"?)`},
		{"missing file", []string{filepath.Join(dir, "nope.yaml")}, exitInvalid, "nope.yaml: error: no such file"},
		{"unknown flag", []string{stopped, "--jsn"}, exitInvalid, "flowrun run: flag provided but not defined: -jsn"},
		{"unknown command", []string{"frobnicate"}, exitInvalid, `unknown command "frobnicate"`},
		{"no args", nil, exitInvalid, "Usage:"},
		{"validate nothing", []string{"validate"}, exitInvalid, "name at least one pipeline file"},
		{"graph bad format", []string{"graph", stopped, "--format", "png"}, exitInvalid, `unknown format "png"`},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			code, _, stderr := flowrun(t, c.args...)
			if code != c.code || !strings.Contains(stderr, c.stderr) {
				t.Fatalf("exit %d, want %d; stderr:\n%s\nwant it to contain %q", code, c.code, stderr, c.stderr)
			}
			if strings.Contains(stderr, "goroutine ") || strings.Contains(stderr, "panic") {
				t.Fatalf("stack trace on stderr:\n%s", stderr)
			}
		})
	}
}

func TestHelpForEveryCommand(t *testing.T) {
	for _, args := range [][]string{{"--help"}, {"run", "--help"}, {"validate", "-h"}, {"graph", "--help"}, {"schema", "--help"}} {
		code, stdout, _ := flowrun(t, args...)
		if code != exitOK || !strings.Contains(stdout, "Usage") {
			t.Errorf("%v: exit %d, stdout %q", args, code, stdout)
		}
	}
}

// TestResumeHelpNamesAnswer: a newcomer whose run waits on a question
// finds --answer in the resume synopsis and in the command list.
func TestResumeHelpNamesAnswer(t *testing.T) {
	code, stdout, _ := flowrun(t, "resume", "--help")
	synopsis, _, _ := strings.Cut(stdout, "\n")
	if code != exitOK || !strings.Contains(synopsis, "--answer field=value") {
		t.Errorf("resume --help: exit %d, synopsis %q", code, synopsis)
	}
	_, stdout, _ = flowrun(t, "--help")
	if !strings.Contains(stdout, "flowrun resume RUN [--answer field=value]") {
		t.Errorf("flowrun --help does not show resume --answer:\n%s", stdout)
	}
}

func TestValidateEveryShippedPipeline(t *testing.T) {
	files, _ := filepath.Glob("../../pipelines/*.yaml")
	code, stdout, stderr := flowrun(t, append([]string{"validate"}, files...)...)
	if code != exitOK || stderr != "" {
		t.Fatalf("exit %d:\n%s%s", code, stdout, stderr)
	}
	if !strings.Contains(stdout, "triage.cassette.yaml: a cassette, skipped") {
		t.Fatalf("cassettes are not skipped:\n%s", stdout)
	}
}

func TestValidate(t *testing.T) {
	code, stdout, stderr := flowrun(t, "validate", "../../pipelines/counter.yaml")
	if code != exitOK || !strings.Contains(stdout, "counter.yaml: ok") || stderr != "" {
		t.Fatalf("exit %d stdout %q stderr %q", code, stdout, stderr)
	}
	dir := t.TempDir()
	bad := writeFile(t, dir, "bad.yaml", "version: 1\nname: b\nnodes:\n  - id: a\n    next: zz\n")
	code, _, stderr = flowrun(t, "validate", "../../pipelines/counter.yaml", bad)
	if code != exitInvalid || !strings.Contains(stderr, "bad.yaml:4:5: error: node \"a\" has no kind") {
		t.Fatalf("exit %d stderr %s", code, stderr)
	}
}

func TestSchemaCommand(t *testing.T) {
	code, stdout, _ := flowrun(t, "schema")
	var s map[string]any
	if code != exitOK || json.Unmarshal([]byte(stdout), &s) != nil || s["$schema"] == nil {
		t.Fatalf("exit %d, not the schema: %.200s", code, stdout)
	}
}

func TestGraphGolden(t *testing.T) {
	for _, format := range []string{"mermaid", "dot"} {
		code, stdout, stderr := flowrun(t, "graph", "../../pipelines/counter.yaml", "--format", format)
		if code != exitOK {
			t.Fatalf("exit %d: %s", code, stderr)
		}
		golden := filepath.Join("testdata", "counter."+format)
		if *update {
			_ = os.MkdirAll("testdata", 0o755)
			_ = os.WriteFile(golden, []byte(stdout), 0o644)
		}
		want, err := os.ReadFile(golden)
		if err != nil {
			t.Fatal(err)
		}
		if stdout != string(want) {
			t.Errorf("%s differs from %s (run go test -update to accept):\n%s", format, golden, stdout)
		}
	}
}

// TestReadmeExampleValidates keeps the README's DSL example true.
func TestReadmeExampleValidates(t *testing.T) {
	readme, err := os.ReadFile("../../README.md")
	if err != nil {
		t.Fatal(err)
	}
	_, rest, ok := strings.Cut(string(readme), "## The DSL by example\n\n```yaml\n")
	example, _, ok2 := strings.Cut(rest, "```")
	if !ok || !ok2 {
		t.Fatal("README has no DSL example")
	}
	dir := t.TempDir()
	p := writeFile(t, dir, "refine.yaml", example)
	writeFile(t, dir, "other.yaml", "version: 1\nname: other\ninputs: {text: {type: string}}\nnodes:\n  - id: a\n    set: {}\n")
	code, _, stderr := flowrun(t, "validate", p)
	if code != exitOK || stderr != "" {
		t.Fatalf("the README example does not validate cleanly:\n%s", stderr)
	}
}

// TestReadmeDiagnosticIsReal checks the diagnostic the README shows.
func TestReadmeDiagnosticIsReal(t *testing.T) {
	readme, _ := os.ReadFile("../../README.md")
	src, err := os.ReadFile("../../pipelines/counter.yaml")
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	bad := strings.Replace(string(src), "default: summary", "default: sumary", 1)
	p := writeFile(t, dir, "counter.yaml", bad)
	_, _, stderr := flowrun(t, "validate", p)
	got := strings.Replace(strings.TrimSpace(stderr), p, "pipelines/counter.yaml", 1)
	if !strings.Contains(string(readme), got) {
		t.Fatalf("README shows a diagnostic flowrun does not print; it prints:\n%s", got)
	}
}

// TestMain keeps the tests' runs out of the working tree. Started with
// FLOWRUN_TEST_AS_CLI=1, the test binary is the flowrun command itself, so
// that tests can run it as a real subprocess (and kill it).
func TestMain(m *testing.M) {
	sandbox.WorkerMain()
	if os.Getenv(testMCPServerEnv) != "" {
		testMCPServerMain()
	}
	if os.Getenv("FLOWRUN_TEST_AS_CLI") == "1" {
		os.Exit(command(os.Args[1:]))
	}
	flag.Parse()
	durDeadline = testwait.Budget()
	dir, err := os.MkdirTemp("", "flowrun-cli-test")
	if err != nil {
		panic(err)
	}
	os.Setenv("FLOWRUN_STORE", filepath.Join(dir, "runs.db"))
	// The tests choose their model endpoint themselves.
	os.Unsetenv("OPENAI_API_KEY")
	os.Unsetenv("OPENAI_BASE_URL")
	code := m.Run()
	os.RemoveAll(dir)
	os.Exit(code)
}

// TestPythonMissingFailsBeforeRunning: a pipeline that needs Python fails
// before its first node, naming the install command.
func TestPythonMissingFailsBeforeRunning(t *testing.T) {
	t.Setenv("XDG_CACHE_HOME", t.TempDir())
	p := writeFile(t, t.TempDir(), "code.yaml", `
version: 1
name: c
state: {x: 0}
nodes:
  - id: first
    set: {x: 1}
  - id: run_it
    code: {source: "def f(): return 1", call: f}
`)
	code, _, stderr := flowrun(t, p)
	if code != exitFailed || !strings.Contains(stderr, `node "run_it": sandbox unavailable: Python for WASI is not installed`) ||
		!strings.Contains(stderr, "run flowrun sandbox install python") || strings.Contains(stderr, "ok    first") {
		t.Fatalf("exit %d:\n%s", code, stderr)
	}
}

// TestHardening13InputsFileCap: an inputs file over the cap is refused by
// name and cap, from its size, before it is read.
func TestHardening13InputsFileCap(t *testing.T) {
	dir := t.TempDir()
	p := writeFile(t, dir, "p.yaml", `
version: 1
name: echo
inputs:
  task: {type: object, default: {}}
nodes:
  - id: a
    set: {}
outputs: {task: inputs.task}
`)
	big := filepath.Join(dir, "big.json")
	f, err := os.Create(big)
	if err != nil {
		t.Fatal(err)
	}
	if err := f.Truncate(200 << 20); err != nil { // sparse: nothing to read
		t.Fatal(err)
	}
	f.Close()
	for _, args := range [][]string{{"--inputs", big}, {"--input", "task=@" + big}} {
		code, _, stderr := flowrun(t, append([]string{p}, args...)...)
		want := big + " is over the 64 MiB limit for input files"
		if code != exitInvalid || !strings.Contains(stderr, want) {
			t.Errorf("%v: exit %d, stderr:\n%s\nwant %q", args, code, stderr, want)
		}
	}
	small := writeFile(t, dir, "small.json", `{"task": {"k": 1}}`)
	if code, stdout, stderr := flowrun(t, p, "--inputs", small); code != exitOK || !strings.Contains(stdout, `"k": 1`) {
		t.Errorf("a small inputs file: exit %d\n%s%s", code, stdout, stderr)
	}
}
