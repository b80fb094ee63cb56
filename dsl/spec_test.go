package dsl

import (
	"encoding/json"
	"go/ast"
	"go/parser"
	"go/token"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"strconv"
	"strings"
	"testing"
)

// specHarness is a pipeline around a kind's example: the names examples
// use exist, and the example runs inside a loop so that break and
// loop.iteration are defined.
const specHarness = `version: 1
name: spec-example
models: {default: {model: m}}
inputs:
  draft: {type: string, default: ""}
  question: {type: string, default: ""}
  grid: {type: array, default: []}
  text: {type: string, default: ""}
state: {score: 0, task: {}, note: ""}
tools:
  answer:
    description: The answer.
    parameters: {type: object, properties: {answer: {type: string}}, required: [answer]}
nodes:
  - id: round
    loop:
      max_iterations: 2
      body:
%s
        - id: revise
          set: {}
`

// TestKindSpecsAgree checks each node kind against itself: its example
// loads cleanly, its decoder reads exactly the fields its schema fragment
// declares, every field is described, the fields of its output type are
// named by its reference text, and the reference has its entry.
func TestKindSpecsAgree(t *testing.T) {
	reference := Reference()
	if len(Kinds()) != 10 {
		t.Errorf("%d node kinds with a kind key, want 10", len(Kinds()))
	}
	for _, s := range Kinds() {
		t.Run(string(s.Kind), func(t *testing.T) {
			if s.Summary == "" || s.Doc == "" || s.Output == "" || s.Example == "" {
				t.Fatal("a kind needs a summary, doc, output and example")
			}
			dir := t.TempDir()
			os.WriteFile(filepath.Join(dir, "solve_task.yaml"), []byte("version: 1\nname: solve\ninputs: {task: {type: object}}\noutputs: {task: inputs.task}\n"), 0o644)
			os.WriteFile(filepath.Join(dir, "notes.txt"), []byte("notes"), 0o644)
			indented := "        " + strings.ReplaceAll(s.Example, "\n", "\n        ")
			src := strings.Replace(specHarness, "%s", indented, 1)
			p, ds := LoadSource(filepath.Join(dir, "p.yaml"), []byte(src))
			if ds.HasErrors() || p == nil {
				t.Fatalf("the example does not load:\n%s", ds)
			}
			n := p.Nodes[0].Loop().Body[0]
			if n.Kind != s.Kind || n.Config == nil {
				t.Fatalf("the example's node is %s with config %v", n.Kind, n.Config)
			}

			var fragment map[string]any
			if err := json.Unmarshal([]byte(s.Schema), &fragment); err != nil {
				t.Fatal(err)
			}
			if fragment["type"] == "array" {
				fragment = fragment["items"].(map[string]any)
			}
			props, _ := fragment["properties"].(map[string]any)
			var declared []string
			_, doc := pipelineSchema()
			defs := doc["$defs"].(map[string]any)
			for name, p := range props {
				declared = append(declared, name)
				field := p.(map[string]any)
				if ref, ok := field["$ref"].(string); ok && len(field) == 1 {
					// Described by what it references.
					field, _ = defs[strings.TrimPrefix(ref, "#/$defs/")].(map[string]any)
				}
				if d, _ := field["description"].(string); d == "" {
					t.Errorf("field %s has no description", name)
				}
			}
			sort.Strings(declared)
			if read := fieldsRead(t, s.Kind); !slices.Equal(read, declared) {
				t.Errorf("the decoder reads %v, the schema declares %v", read, declared)
			}

			r := &resolver{f: &file{p: p, pendingOf: map[*Expr]*pendingExpr{}, l: &loader{}}, outputs: map[*Node]*Type{}, busy: map[*Node]bool{}}
			if out := s.output(r, n); out.Kind == TypeObject {
				for _, name := range out.FieldNames() {
					// Fixed shapes are named in the output text; shapes that
					// follow the configuration, in the example.
					if !strings.Contains(s.Output, name) && !strings.Contains(s.Example, name) {
						t.Errorf("the output has field %s, which neither the reference's output text nor the example names", name)
					}
				}
			}
			if !strings.Contains(reference, "### `"+string(s.Kind)+"`") {
				t.Error("docs/reference.md has no entry")
			}
		})
	}
}

// fieldsRead lists the keys a kind's decoder reads from its kind key's
// value: the string literals passed to valueOf and get in its file (and,
// for the model-calling kinds, in the shared modelCall).
func fieldsRead(t *testing.T, k Kind) []string {
	files := []string{"kind_" + string(k) + ".go"}
	if k == KindAgent {
		files = append(files, "kind_llm.go")
	}
	seen := map[string]bool{}
	for _, name := range files {
		fs := token.NewFileSet()
		f, err := parser.ParseFile(fs, name, nil, 0)
		if err != nil {
			t.Fatal(err)
		}
		ast.Inspect(f, func(x ast.Node) bool {
			fn, ok := x.(*ast.FuncDecl)
			if ok && k == KindAgent && name == "kind_llm.go" && fn.Name.Name != "modelCall" {
				return false
			}
			call, ok := x.(*ast.CallExpr)
			if !ok || len(call.Args) != 2 {
				return true
			}
			id, ok := call.Fun.(*ast.Ident)
			if !ok || (id.Name != "valueOf" && id.Name != "get") {
				return true
			}
			// Reads from the node mapping (n) are common fields, not the kind's.
			if arg, ok := call.Args[0].(*ast.Ident); ok && arg.Name == "n" {
				return true
			}
			if lit, ok := call.Args[1].(*ast.BasicLit); ok && lit.Kind == token.STRING {
				key, _ := strconv.Unquote(lit.Value)
				seen[key] = true
			}
			return true
		})
	}
	out := make([]string, 0, len(seen))
	for k := range seen {
		out = append(out, k)
	}
	sort.Strings(out)
	return out
}
