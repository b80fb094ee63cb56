package dsl

import (
	"flag"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

var update = flag.Bool("update", false, "rewrite the golden files in testdata/invalid")

// TestInvalid loads every testdata/invalid/*.yaml case and compares its
// diagnostics with NAME.golden. Files in subfolders are helpers the cases
// refer to (called pipelines, prompt files), not cases.
func TestInvalid(t *testing.T) {
	cases, err := filepath.Glob("testdata/invalid/*.yaml")
	if err != nil {
		t.Fatal(err)
	}
	if len(cases) < 35 {
		t.Fatalf("found %d invalid cases, want at least 35", len(cases))
	}
	for _, path := range cases {
		path = filepath.ToSlash(path)
		name := strings.TrimSuffix(filepath.Base(path), ".yaml")
		t.Run(name, func(t *testing.T) {
			p, ds := Load(path)
			if p != nil {
				t.Errorf("Load returned a pipeline; want nil")
			}
			if !ds.HasErrors() {
				t.Errorf("no error diagnostics")
			}
			got := ds.String() + "\n"
			golden := strings.TrimSuffix(path, ".yaml") + ".golden"
			if *update {
				if err := os.WriteFile(golden, []byte(got), 0o644); err != nil {
					t.Fatal(err)
				}
				return
			}
			want, err := os.ReadFile(golden)
			if err != nil {
				t.Fatalf("%v (run go test ./dsl -run TestInvalid -update to create it)", err)
			}
			if got != string(want) {
				t.Errorf("diagnostics differ from %s\ngot:\n%s\nwant:\n%s", golden, got, want)
			}
		})
	}
}

// TestValid loads every testdata/valid/*.yaml pipeline and expects no
// diagnostic at all, warnings included.
func TestValid(t *testing.T) {
	files, err := filepath.Glob("testdata/valid/*.yaml")
	if err != nil {
		t.Fatal(err)
	}
	if len(files) < 8 {
		t.Fatalf("found %d valid pipelines, want at least 8", len(files))
	}
	for _, path := range files {
		t.Run(strings.TrimSuffix(filepath.Base(path), ".yaml"), func(t *testing.T) {
			p, ds := Load(path)
			if len(ds) > 0 {
				t.Errorf("diagnostics:\n%s", ds)
			}
			if p == nil {
				t.Fatal("Load returned no pipeline")
			}
			if len(p.Nodes) == 0 && len(p.Outputs) == 0 {
				t.Error("the pipeline has neither nodes nor outputs")
			}
		})
	}
}

// loadString loads an inline pipeline that must be valid.
func loadString(t *testing.T, src string) *Pipeline {
	t.Helper()
	p, ds := LoadSource("testdata/inline.yaml", []byte(src))
	if p == nil || len(ds) > 0 {
		t.Fatalf("pipeline does not load cleanly:\n%s", ds)
	}
	return p
}

func TestTemplateRender(t *testing.T) {
	p := loadString(t, `
version: 1
name: render
inputs: {who: {type: string}}
state: {items: [], none: null, n: 0}
models: {default: {model: m}}
nodes:
  - id: greet
    llm:
      prompt: |
        Hi ${{ inputs.who }}: ${{ state.items }}${{ state.none }} n=${{ state.n + 0.5 }} ${{ "}}" }}
`)
	env := &Env{
		Inputs: map[string]any{"who": "Ada"},
		State:  map[string]any{"items": []any{1, "two"}, "none": nil, "n": 2},
	}
	got, err := p.Nodes[0].LLM().Prompt.Render(env)
	want := "Hi Ada: [1,\"two\"] n=2.5 }}\n"
	if err != nil || got != want {
		t.Errorf("Render = %q, %v; want %q", got, err, want)
	}
	env.State = map[string]any{"n": "x"}
	if _, err := p.Nodes[0].LLM().Prompt.Render(env); err == nil || !strings.Contains(err.Error(), "testdata/inline.yaml:") {
		t.Errorf("Render with a bad value: err = %v, want an error naming the file", err)
	}
}

func TestEvalBoolRejectsString(t *testing.T) {
	p := loadString(t, `
version: 1
name: cond
state: {x: 0, flag: null}
nodes:
  - id: a
    when: state.flag
    set: {x: "1"}
`)
	when := p.Nodes[0].When
	for _, flag := range []any{"true", "false", "", nil} {
		_, err := when.EvalBool(&Env{State: map[string]any{"flag": flag}})
		if err == nil || !strings.Contains(err.Error(), "must be true or false") {
			t.Errorf("EvalBool with flag %#v: err = %v; strings must never be coerced to booleans", flag, err)
		}
	}
	if ok, err := when.EvalBool(&Env{State: map[string]any{"flag": true}}); err != nil || !ok {
		t.Errorf("EvalBool with flag true = %v, %v", ok, err)
	}
}

func TestSuggest(t *testing.T) {
	fields := []string{"max_concurrency", "next", "nodes", "on_error", "outputs", "y"}
	tests := []struct{ name, want string }{
		{"nxt", ` (did you mean "next"?)`},
		{"ouputs", ` (did you mean "outputs"?)`},
		{"On_Eror", ` (did you mean "on_error"?)`},
		{"concurrency", ` (did you mean "max_concurrency"?)`},
		{"next", ""}, // the name itself is not a suggestion
		{"xyz", ""},
		{"x", ""}, // one letter off a one-letter name is not a near miss
		{"", ""},
	}
	for _, tt := range tests {
		if got := Suggest(tt.name, fields); got != tt.want {
			t.Errorf("Suggest(%q) = %q, want %q", tt.name, got, tt.want)
		}
	}
	types := []string{"string", "number", "integer", "boolean"}
	if got := Suggest("int", types); got != ` (did you mean "integer"?)` {
		t.Errorf("Suggest(int) = %q", got)
	}
	if got := Suggest("max", []string{"max_steps", "max_tokens"}); got != "" {
		t.Errorf("Suggest(max) = %q; two candidates complete it, so neither is suggested", got)
	}
	// Ties go to the alphabetically first candidate, whatever the order.
	if got := Suggest("cat", []string{"cut", "bat"}); got != ` (did you mean "bat"?)` {
		t.Errorf("Suggest tie = %q", got)
	}
}

// FuzzLoad feeds arbitrary bytes to the loader: it must never panic, a nil
// pipeline always comes with an error saying why, and every diagnostic
// points at a line of the file. The file is named as if it sat in
// testdata/valid, so that the references in the seeds resolve.
func FuzzLoad(f *testing.F) {
	// Seed with every testdata file; go test adds testdata/fuzz itself.
	err := filepath.WalkDir("testdata", func(path string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() || strings.HasSuffix(path, ".golden") || strings.HasPrefix(path, filepath.Join("testdata", "fuzz")) {
			return err
		}
		src, err := os.ReadFile(path)
		f.Add(src)
		return err
	})
	if err != nil {
		f.Fatal(err)
	}
	f.Fuzz(func(t *testing.T, src []byte) {
		const name = "testdata/valid/fuzz.yaml"
		p, ds := LoadSource(name, src)
		if p == nil && !ds.HasErrors() {
			t.Fatalf("nil pipeline without an error; diagnostics:\n%s", ds)
		}
		if p != nil && ds.HasErrors() {
			t.Fatalf("a pipeline with errors:\n%s", ds)
		}
		lines := len(splitLines(string(src)))
		for _, d := range ds {
			if d.Pos.File == name && (d.Pos.Line < 1 || d.Pos.Line > lines || d.Pos.Col < 1) {
				t.Errorf("diagnostic outside the file (%d lines): %s", lines, d)
			}
		}
		_ = ds.String()
	})
}
