package engine

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"

	"github.com/flowrun/flowrun/runtime"
)

func TestInputText(t *testing.T) {
	cases := []struct {
		typ, text string
		want      any
	}{
		{"string", `42`, "42"},
		{"string", `{"a": 1}`, `{"a": 1}`},
		{"integer", `42`, 42},
		{"number", `1.5`, 1.5},
		{"boolean", `true`, true},
		{"array", `[1, "a"]`, []any{1, "a"}},
		{"object", `{"a": {"b": null}}`, map[string]any{"a": map[string]any{"b": nil}}},
		// Not JSON: left as text, for the input's schema check to refuse.
		{"integer", `many`, "many"},
		{"", `[1]`, []any{1}},
	}
	for _, c := range cases {
		if got := InputText(c.typ, c.text); !reflect.DeepEqual(norm(got), norm(c.want)) {
			t.Errorf("InputText(%q, %q) = %#v, want %#v", c.typ, c.text, got, c.want)
		}
	}
}

// norm makes JSON numbers comparable whatever their Go type.
func norm(v any) any {
	switch x := v.(type) {
	case int:
		return float64(x)
	case int64:
		return float64(x)
	case []any:
		out := make([]any, len(x))
		for i, e := range x {
			out[i] = norm(e)
		}
		return out
	case map[string]any:
		out := map[string]any{}
		for k, e := range x {
			out[k] = norm(e)
		}
		return out
	}
	return v
}

func TestInputFile(t *testing.T) {
	cases := []struct {
		typ, body string
		want      any
		err       string
	}{
		{"string", "line one\nline two\n", "line one\nline two\n", ""},
		{"object", `{"a": 1}`, map[string]any{"a": 1}, ""},
		{"array", "- 1\n- two\n", []any{1, "two"}, ""},
		{"object", "a: [1\n", nil, "not JSON or YAML"},
		{"object", "", nil, "the file is empty"},
	}
	for _, c := range cases {
		got, err := InputFile(c.typ, []byte(c.body))
		switch {
		case c.err != "" && (err == nil || !strings.Contains(err.Error(), c.err)):
			t.Errorf("InputFile(%q, %q): %v, want an error with %q", c.typ, c.body, err, c.err)
		case c.err == "" && (err != nil || !reflect.DeepEqual(norm(got), norm(c.want))):
			t.Errorf("InputFile(%q, %q) = %#v, %v", c.typ, c.body, got, err)
		}
	}
}

// ReadInputs: pairs win over the file; @FILE reads a file by the input's
// type; every problem is an *InputError naming the input.
func TestReadInputs(t *testing.T) {
	p := load(t, "typed.yaml", `
version: 1
name: typed
inputs:
  text: {type: string}
  n: {type: integer}
  grid: {type: array}
nodes:
  - id: a
    set: {}
outputs: {n: inputs.n}
`)
	dir := t.TempDir()
	write := func(name, body string) string {
		path := filepath.Join(dir, name)
		if err := os.WriteFile(path, []byte(body), 0o644); err != nil {
			t.Fatal(err)
		}
		return path
	}
	inputs := write("in.yaml", "n: 1\ntext: from file\n")
	grid := write("grid.json", "[[1, 2]]")
	note := write("note.txt", "[not json]")
	got, err := ReadInputs(p, inputs, []string{"n=7", "grid=@" + grid, "text=@" + note})
	want := map[string]any{"n": 7, "grid": []any{[]any{1, 2}}, "text": "[not json]"}
	if err != nil || !reflect.DeepEqual(norm(got), norm(want)) {
		t.Fatalf("got %#v, %v", got, err)
	}
	for _, c := range []struct {
		file  string
		pairs []string
		want  string
	}{
		{"", []string{"novalue"}, `input "novalue": write it as name=value`},
		{"", []string{"grid=@" + filepath.Join(dir, "missing.json")}, "input grid=@"},
		{write("list.yaml", "- 1\n"), nil, "expected a mapping of input names to values"},
	} {
		_, err := ReadInputs(p, c.file, c.pairs)
		var input *InputError
		if err == nil || !strings.Contains(err.Error(), c.want) || !errors.As(err, &input) {
			t.Errorf("%v %v: %v, want an input error with %q", c.file, c.pairs, err, c.want)
		}
	}
}

func TestParseAnswer(t *testing.T) {
	obj := map[string]any{"type": "object", "properties": map[string]any{"name": map[string]any{"type": "string"}, "age": map[string]any{"type": "integer"}}}
	cases := []struct {
		schema map[string]any
		text   string
		want   any
		err    string
	}{
		{map[string]any{"type": "string"}, "42", "42", ""},
		{map[string]any{"type": "boolean"}, "Yes", true, ""},
		{map[string]any{"type": "boolean"}, "n", false, ""},
		{map[string]any{"type": "boolean"}, "maybe", nil, "answer yes or no"},
		{map[string]any{"type": "integer"}, "7", 7, ""},
		{map[string]any{"type": "integer"}, "seven", nil, "not JSON"},
		{obj, "name=Ada age=36", map[string]any{"name": "Ada", "age": 36}, ""},
		{obj, `{"name": "Ada"}`, map[string]any{"name": "Ada"}, ""},
		{obj, "nme=Ada", nil, `no field "nme"`},
		{obj, "age=old", nil, "age: not JSON"},
	}
	for _, c := range cases {
		got, err := ParseAnswer(c.schema, c.text)
		switch {
		case c.err != "" && (err == nil || !strings.Contains(err.Error(), c.err)):
			t.Errorf("ParseAnswer(%v, %q): %v, want an error with %q", c.schema, c.text, err, c.err)
		case c.err == "" && (err != nil || !reflect.DeepEqual(norm(got), norm(c.want))):
			t.Errorf("ParseAnswer(%v, %q) = %#v, %v", c.schema, c.text, got, err)
		}
	}
}

// AnswerHint names the form an answer takes at a prompt, and its default.
func TestAnswerHint(t *testing.T) {
	for _, c := range []struct {
		q    runtime.Question
		want string
	}{
		{runtime.Question{}, "JSON"},
		{runtime.Question{Schema: map[string]any{"type": "integer"}}, "integer"},
		{runtime.Question{Schema: map[string]any{"type": "integer"}, HasDefault: true, Default: 3}, "integer, default 3"},
		{runtime.Question{Schema: map[string]any{"type": "object"}}, "JSON object, or field=value ..."},
		{runtime.Question{Kind: runtime.QuestionConfirm, Schema: map[string]any{"type": "boolean"}, HasDefault: true, Default: true}, "y/n, default true"},
	} {
		if got := AnswerHint(c.q); got != c.want {
			t.Errorf("AnswerHint(%+v) = %q, want %q", c.q, got, c.want)
		}
	}
}

// LaterAnswer answers the first question asked, by its schema, and hands
// every later one on; an answer that does not fit that question leaves it
// unanswered and says why.
func TestLaterAnswer(t *testing.T) {
	ctx := context.Background()
	number := runtime.Question{Path: "n", Text: "How many?", Schema: map[string]any{"type": "integer"}}
	then := (&Engine{}).Human(true)
	l := &LaterAnswer{Values: []string{"7"}, Then: then}
	if l.Used() {
		t.Fatal("used before any question")
	}
	if a, ok, err := l.Answer(ctx, number); !ok || err != nil || a != 7 || !l.Used() || l.Refused() != nil {
		t.Fatalf("first question: %v %v %v, refused %v", a, ok, err, l.Refused())
	}
	if a, ok, _ := l.Answer(ctx, runtime.Question{Path: "c", Kind: runtime.QuestionConfirm}); !ok || a != true {
		t.Errorf("a later confirmation goes to Then (auto): %v %v", a, ok)
	}
	l = &LaterAnswer{Values: []string{"seven"}}
	if _, ok, err := l.Answer(ctx, number); ok || err != nil || l.Refused() == nil || !strings.Contains(l.Refused().Error(), `question n asked ("How many?")`) {
		t.Errorf("an answer that does not fit: answered %v, %v, refused %v", ok, err, l.Refused())
	}
	if _, ok, _ := l.Answer(ctx, number); ok {
		t.Error("with no Then, a second question is answered")
	}
}

// ReadAnswer checks what it reads against the question's schema; a
// question with no schema takes text.
func TestReadAnswer(t *testing.T) {
	file := filepath.Join(t.TempDir(), "answer.txt")
	if err := os.WriteFile(file, []byte("free text\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	enum := &runtime.Question{Path: "pick", Schema: map[string]any{"type": "string", "enum": []any{"a", "b"}}}
	cases := []struct {
		q      *runtime.Question
		values []string
		file   string
		want   any
		err    string
	}{
		{&runtime.Question{Path: "q"}, nil, file, "free text", ""},
		{&runtime.Question{Path: "q"}, []string{"x", "y"}, "", nil, `give one answer for "q"`},
		{enum, []string{"a"}, "", "a", ""},
		{enum, []string{"c"}, "", nil, "does not match the question's schema"},
	}
	for _, c := range cases {
		got, err := ReadAnswer(c.q, c.values, c.file)
		switch {
		case c.err != "" && (err == nil || !strings.Contains(err.Error(), c.err)):
			t.Errorf("%s %v: %v, want an error with %q", c.q.Path, c.values, err, c.err)
		case c.err == "" && (err != nil || got != c.want):
			t.Errorf("%s %v = %#v, %v", c.q.Path, c.values, got, err)
		}
	}
}

// Discover lists the pipelines, and no test, cassette, dataset or file
// under a hidden, testdata or node_modules directory; a link leading
// outside is listed, for its caller's confined read to refuse, and a file
// that is not YAML, for its load to say why.
func TestDiscover(t *testing.T) {
	dir := t.TempDir()
	const pipeline = "version: 1\nnodes: []\n"
	for f, src := range map[string]string{"a.yaml": pipeline, "sub/b.yml": pipeline, "a.test.yaml": pipeline, "a.cassette.yaml": pipeline,
		".hidden/c.yaml": pipeline, "testdata/d.yaml": pipeline, "node_modules/e.yaml": pipeline, "notes.txt": pipeline,
		"sub/cassette.yaml": "version: 1\nentries: []\n", "data.yaml": "- {text: hi}\n", "broken.yaml": "version: 1\nnodes: [\n"} {
		path := filepath.Join(dir, filepath.FromSlash(f))
		if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(path, []byte(src), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	outside := filepath.Join(t.TempDir(), "outside.yaml")
	if err := os.WriteFile(outside, []byte(pipeline), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(outside, filepath.Join(dir, "link.yaml")); err != nil {
		t.Fatal(err)
	}
	got, err := Discover(dir)
	if err != nil || !reflect.DeepEqual(got, []string{"a.yaml", "broken.yaml", "link.yaml", "sub/b.yml"}) {
		t.Fatalf("Discover = %v, %v", got, err)
	}
	if _, err := Discover(filepath.Join(dir, "missing")); err == nil {
		t.Error("a missing directory is no error")
	}
}

func TestLooksLikePipeline(t *testing.T) {
	for src, want := range map[string]bool{"version: 1\nnodes: []\n": true, "version: 1\noutputs: {}\n": true,
		"version: 1\n": false, "nodes: []\n": false, "- a\n": false, "{": false} {
		if got := LooksLikePipeline([]byte(src)); got != want {
			t.Errorf("LooksLikePipeline(%q) = %v", src, got)
		}
	}
}
