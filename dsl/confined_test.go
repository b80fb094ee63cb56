package dsl

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestHardening06PathsConfined: every path a pipeline names stays inside
// the directory of the pipeline that was run. A literal one that leaves it
// (prompt, system, image, wasm module, render, read_file, a called
// pipeline, directly or through a symbolic link) is an error at its
// file:line:col when the pipeline loads; a computed one fails when it is
// read, at the expression's position.
func TestHardening06PathsConfined(t *testing.T) {
	_, ds := Load("testdata/invalid/paths_outside.yaml")
	got := ds.String()
	for _, at := range []string{"9:22", "10:22", "11:16", "11:36", "13:36", "16:21", "17:23", "17:50"} {
		if !strings.Contains(got, "testdata/invalid/paths_outside.yaml:"+at+": error: ") {
			t.Errorf("no error at %s:\n%s", at, got)
		}
	}
	if n := strings.Count(got, "path escapes the pipeline directory (testdata/invalid): name a file inside it"); n != 8 {
		t.Errorf("%d errors say the path escapes, want 8:\n%s", n, got)
	}

	top := t.TempDir()
	dir := filepath.Join(top, "p")
	for name, body := range map[string]string{
		"outside.md":        "SECRET",
		"lib.yaml":          "version: 1\nname: lib\nnodes:\n  - id: a\n    set: {}\n",
		"p/prompts/hi.md":   "Hello.",
		"p/tools/tool.yaml": "version: 1\nname: tool\nmodels: {default: {model: m}}\nnodes:\n  - id: a\n    llm: {prompt: {file: ../prompts/hi.md}}\n",
	} {
		if err := os.MkdirAll(filepath.Dir(filepath.Join(top, name)), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(top, name), []byte(body), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.Symlink("../../outside.md", filepath.Join(dir, "prompts", "link.md")); err != nil {
		t.Skipf("symbolic links: %v", err)
	}
	_, ds = LoadSource(filepath.Join(dir, "p.yaml"), []byte(`version: 1
name: p
models: {default: {model: m}}
nodes:
  - id: linked
    llm: {prompt: {file: prompts/link.md}}
  - id: lib
    call: {pipeline: ../lib.yaml}
  - id: inside
    call: {pipeline: tools/tool.yaml}
`))
	got = ds.String()
	for _, want := range []string{
		`p.yaml:6:26: error: prompt file "prompts/link.md": path escapes the pipeline directory`,
		`p.yaml:8:22: error: pipeline file "../lib.yaml": path escapes the pipeline directory`,
	} {
		if !strings.Contains(got, want) {
			t.Errorf("diagnostics lack %q:\n%s", want, got)
		}
	}
	if strings.Contains(got, "tool.yaml") || len(ds) != 2 {
		t.Errorf("a called pipeline in a subfolder may name files anywhere inside the directory:\n%s", got)
	}

	p, ds := LoadSource(filepath.Join(dir, "q.yaml"), []byte(`version: 1
name: q
state: {name: "../outside.md", text: ""}
nodes:
  - id: show
    set: {text: 'render(state.name, {}) + read_file(state.name)'}
`))
	if p == nil {
		t.Fatalf("load: %s", ds)
	}
	_, err := p.Nodes[0].Set[0].Value.Eval(&Env{State: map[string]any{"name": "../outside.md"}})
	want := `q.yaml:6:18: evaluating ` + "`render(state.name, {}) + read_file(state.name)`" + `: render: read_file "../outside.md": path escapes the pipeline directory`
	if err == nil || !strings.HasSuffix(err.Error(), want) {
		t.Errorf("a computed path outside: %v\nwant it to end with %s", err, want)
	}
}
