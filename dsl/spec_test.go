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

	"gopkg.in/yaml.v3"
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
			p, ds := loadExample(t, s.Example)
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

// loadExample loads one node's YAML inside specHarness, in a directory
// holding the files the examples name.
func loadExample(t *testing.T, example string) (*Pipeline, Diagnostics) {
	t.Helper()
	dir := t.TempDir()
	os.WriteFile(filepath.Join(dir, "solve_task.yaml"), []byte("version: 1\nname: solve\ninputs: {task: {type: object}}\noutputs: {task: inputs.task}\n"), 0o644)
	os.WriteFile(filepath.Join(dir, "notes.txt"), []byte("notes"), 0o644)
	indented := "        " + strings.ReplaceAll(strings.TrimRight(example, "\n"), "\n", "\n        ")
	src := strings.Replace(specHarness, "%s", indented, 1)
	return LoadSource(filepath.Join(dir, "p.yaml"), []byte(src))
}

// TestExpressionFieldsTakeLiterals holds the one rule for fields: every
// expression field the kind specs (and the node schema, for when:)
// declare accepts a YAML number, boolean or null as a literal. Each field
// is set to each literal in its kind's example; the schema must accept
// them all, and at least one must load cleanly (over: needs a list, so
// its literals must fail on type, naming the field, not on syntax).
func TestExpressionFieldsTakeLiterals(t *testing.T) {
	_, doc := pipelineSchema()
	nodeProps := doc["$defs"].(map[string]any)["node"].(map[string]any)["properties"].(map[string]any)
	literals := []string{"false", "true", "2", "0.5", "null"}
	// Fields that exclude another: setting one drops the other.
	excludes := map[string]string{"while": "until", "until": "while"}
	tried := 0
	for _, s := range Kinds() {
		var fragment map[string]any
		if err := json.Unmarshal([]byte(s.Schema), &fragment); err != nil {
			t.Fatal(err)
		}
		inCase := fragment["type"] == "array"
		if inCase {
			fragment = fragment["items"].(map[string]any)
		}
		props, _ := fragment["properties"].(map[string]any)
		type exprField struct {
			name   string
			onNode bool // on the node itself, not under its kind key
		}
		var fields []exprField
		for name, p := range props {
			if isExprField(p) {
				fields = append(fields, exprField{name, false})
			}
		}
		for name, p := range nodeProps {
			if isExprField(p) {
				fields = append(fields, exprField{name, true})
			}
		}
		for _, ef := range fields {
			field, onNode := ef.name, ef.onNode
			label := string(s.Kind) + "." + field
			if onNode {
				label = string(s.Kind) + " node." + field
			}
			t.Run(label, func(t *testing.T) {
				clean := 0
				var typeErrs []string
				for _, lit := range literals {
					example := withField(t, s.Example, s.Kind, inCase && !onNode, onNode, field, lit, excludes[field])
					_, ds := loadExample(t, example)
					msg := ds.String()
					if strings.Contains(msg, "expected string") || strings.Contains(msg, "not a number an expression") {
						t.Errorf("%s: %s is refused:\n%s", field, lit, msg)
					}
					if !ds.HasErrors() {
						clean++
					} else {
						typeErrs = append(typeErrs, msg)
					}
				}
				if clean == 0 && !(field == "over" && strings.Contains(strings.Join(typeErrs, ""), "over")) {
					t.Errorf("no literal loads in %s:\n%s", field, strings.Join(typeErrs, "\n"))
				}
			})
			tried++
		}
	}
	if tried < 10 {
		t.Errorf("only %d expression fields found in the specs", tried)
	}
}

// isExprField says whether a schema property is an expression field: a
// reference to the expression or value definitions, or a string that may
// also be a number (max_iterations).
func isExprField(p any) bool {
	prop := p.(map[string]any)
	ref, _ := prop["$ref"].(string)
	types, _ := prop["type"].([]any)
	return ref == "#/$defs/expr" || ref == "#/$defs/value" ||
		slices.Contains(types, any("string")) && (slices.Contains(types, any("integer")) || slices.Contains(types, any("number")))
}

// withField returns a kind's example with field set to the YAML scalar
// lit: on the node itself, under its kind key, or in its first case.
func withField(t *testing.T, example string, kind Kind, inCase, onNode bool, field, lit, drop string) string {
	t.Helper()
	var doc yaml.Node
	if err := yaml.Unmarshal([]byte(example), &doc); err != nil {
		t.Fatal(err)
	}
	target := doc.Content[0].Content[0]
	if !onNode {
		target = valueOf(target, string(kind))
		if inCase {
			target = target.Content[0]
		}
	}
	var value yaml.Node
	if err := yaml.Unmarshal([]byte(lit), &value); err != nil {
		t.Fatal(err)
	}
	var kept []*yaml.Node
	for i := 0; i+1 < len(target.Content); i += 2 {
		if k := target.Content[i].Value; k != field && k != drop {
			kept = append(kept, target.Content[i], target.Content[i+1])
		}
	}
	target.Content = append(kept, &yaml.Node{Kind: yaml.ScalarNode, Value: field}, value.Content[0])
	out, err := yaml.Marshal(&doc)
	if err != nil {
		t.Fatal(err)
	}
	return string(out)
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
