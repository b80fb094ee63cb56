package dsl

import (
	"errors"
	"math"
	"strings"
	"testing"
)

// osaDistance is the textbook recursive definition of the optimal string
// alignment distance (Levenshtein plus adjacent transpositions), memoised:
// independent of the table editDistance fills.
func osaDistance(a, b []rune) int {
	memo := map[[2]int]int{}
	var d func(i, j int) int
	d = func(i, j int) int {
		if i == 0 {
			return j
		}
		if j == 0 {
			return i
		}
		if v, ok := memo[[2]int{i, j}]; ok {
			return v
		}
		cost := 1
		if a[i-1] == b[j-1] {
			cost = 0
		}
		v := min(d(i-1, j)+1, d(i, j-1)+1, d(i-1, j-1)+cost)
		if i > 1 && j > 1 && a[i-1] == b[j-2] && a[i-2] == b[j-1] {
			v = min(v, d(i-2, j-2)+1)
		}
		memo[[2]int{i, j}] = v
		return v
	}
	return d(len(a), len(b))
}

func TestSimilarity(t *testing.T) {
	for _, c := range []struct {
		a, b string
		want float64
	}{
		{"kitten", "sitting", 1 - 3.0/7}, // the textbook distance 3
		{"flaw", "lawn", 0.5},
		{"same", "same", 1},
		{"", "", 1},
		{"abc", "", 0},
		{"héllo", "hello", 0.8}, // characters, not bytes
		{"ab", "ba", 0.5},       // a swap is one edit
	} {
		if got, err := similarity(c.a, c.b); err != nil || math.Abs(got-c.want) > 1e-12 {
			t.Errorf("similarity(%q, %q) = %v, %v; want %v", c.a, c.b, got, err, c.want)
		}
	}
	for _, p := range [][2]string{{"intention", "execution"}, {"abcdef", "azced"}, {"sunday", "saturday"}, {"ab", "ba"}} {
		a, b := []rune(p[0]), []rune(p[1])
		want := 1 - float64(osaDistance(a, b))/float64(max(len(a), len(b)))
		if got, _ := similarity(p[0], p[1]); math.Abs(got-want) > 1e-12 {
			t.Errorf("similarity(%q, %q) = %v, by recursion %v", p[0], p[1], got, want)
		}
	}
	long := strings.Repeat("a", 20000)
	var le *LimitError
	if _, err := similarity(long, long); !errors.As(err, &le) {
		t.Errorf("two 20,000-character texts: %v, want a limit error", err)
	}
}

// TestRougeL checks Lin's (2004) worked example: against the reference
// "police killed the gunman", "police kill the gunman" shares 3 words in
// order (F 0.75) and "the gunman kill police" 2 (F 0.5).
func TestRougeL(t *testing.T) {
	for _, c := range []struct {
		cand, ref string
		want      float64
	}{
		{"police kill the gunman", "police killed the gunman", 0.75},
		{"the gunman kill police", "police killed the gunman", 0.5},
		{"The cat sat.", "the cat sat", 1},            // case and punctuation are not words
		{"a b c d", "a c", 2 * (0.5 * 1) / (0.5 + 1)}, // P 2/4, R 2/2
		{"x y", "a b", 0},
		{"", "", 1},
		{"words", "", 0},
	} {
		if got, err := rougeL(c.cand, c.ref); err != nil || math.Abs(got-c.want) > 1e-12 {
			t.Errorf("rouge_l(%q, %q) = %v, %v; want %v", c.cand, c.ref, got, err, c.want)
		}
	}
}

// TestEvalFunctionsInExpressions calls each function from a loaded
// pipeline and checks that a wrong argument type is an error at load,
// with its position.
func TestEvalFunctionsInExpressions(t *testing.T) {
	p := loadString(t, `
version: 1
name: checks
inputs:
  text: {type: string}
  n: {type: integer}
nodes:
  - id: a
    set: {}
outputs:
  sim: similarity(inputs.text, "kitten")
  rouge: rouge_l(inputs.text, "kitten sat")
  valid: json_valid(inputs.text)
  parsed_ok: 'json_valid("{\"a\": [1, 2]}")'
  fits: 'matches_schema(fromJSON("{\"a\": [1, 2]}"), {"type": "object", "required": ["a"]})'
  misfit: 'matches_schema({"a": inputs.n}, {"type": "object", "properties": {"a": {"type": "string"}}})'
  bad_schema: 'matches_schema(1, {"type": 5})'
`)
	env := &Env{Inputs: map[string]any{"text": "sitting", "n": 3}}
	want := map[string]any{"sim": 1 - 3.0/7, "rouge": 0.0, "valid": false, "parsed_ok": true, "fits": true, "misfit": false}
	for _, o := range p.Outputs {
		got, err := o.Value.Eval(env)
		if o.Name == "bad_schema" {
			if err == nil || !strings.Contains(err.Error(), "matches_schema: the schema") {
				t.Errorf("bad schema: %v, %v", got, err)
			}
			continue
		}
		if err != nil || got != want[o.Name] {
			t.Errorf("%s = %#v, %v; want %#v", o.Name, got, err, want[o.Name])
		}
	}
	if p.Outputs[0].Type.Kind != TypeFloat || p.Outputs[2].Type.Kind != TypeBool {
		t.Errorf("types %s %s, want float and bool", p.Outputs[0].Type, p.Outputs[2].Type)
	}

	for src, want := range map[string]string{
		"similarity(inputs.n, \"a\")": "inline.yaml:8:33: error: in `similarity(inputs.n, \"a\")`: cannot use int as argument (type string) to call similarity",
		"rouge_l(\"a\")":              "inline.yaml:8:15: error: in `rouge_l(\"a\")`: not enough arguments to call rouge_l",
		"json_valid(inputs.n)":        "cannot use int as argument (type string) to call json_valid",
		"matches_schema(1, \"s\")":    "cannot use string as argument",
	} {
		_, ds := LoadSource("testdata/inline.yaml", []byte(`version: 1
name: bad
inputs:
  n: {type: integer}
nodes:
  - id: a
    set: {}
outputs: {x: '`+src+`'}
`))
		if len(ds) == 0 || !strings.Contains(ds.String(), want) {
			t.Errorf("%s: diagnostics %q, want one at %s", src, ds, want)
		}
	}
}
