package dsl

import (
	"encoding/json"
	"fmt"
	"strings"
	"unicode"
	"unicode/utf8"

	"github.com/flowrun/flowrun/jsonvalue"
)

// evalFunctions are the checks a score: metric commonly needs: text
// closeness, ROUGE-L, and JSON validity against a schema.
var evalFunctions = []Function{
	{Name: "similarity", Signature: "similarity(a, b) float",
		Doc:   "How alike two texts are: 1 - their edit distance (characters inserted, deleted, replaced or two swapped) over the longer one's length; 1 when equal, 0 when nothing is shared.",
		Types: []any{new(func(string, string) float64)}, Bind: textPair("similarity", similarity)},
	{Name: "rouge_l", Signature: "rouge_l(candidate, reference) float",
		Doc:   "ROUGE-L: the F-measure of the longest common subsequence of the two texts' words (lower-cased, split at anything not a letter or digit); 1 when they are equal.",
		Types: []any{new(func(string, string) float64)}, Bind: textPair("rouge_l", rougeL)},
	{Name: "json_valid", Signature: "json_valid(text) bool", Doc: "Whether text is one JSON value (surrounding spaces allowed).",
		Types: []any{new(func(string) bool)},
		Bind: func(FunctionEnv) func(...any) (any, error) {
			return func(args ...any) (any, error) {
				s, ok := args[0].(string)
				return ok && json.Valid([]byte(s)), nil
			}
		}},
	{Name: "matches_schema", Signature: "matches_schema(value, schema) bool",
		Doc:   "Whether value satisfies a JSON Schema (2020-12) given as an object; a schema that is not one is an error. Text is not parsed: use fromJSON first.",
		Types: []any{new(func(any, map[string]any) bool)},
		Bind: func(FunctionEnv) func(...any) (any, error) {
			return func(args ...any) (any, error) {
				schema, _ := args[1].(map[string]any)
				s, err := jsonvalue.Compile(schema)
				if err != nil {
					return nil, fmt.Errorf("matches_schema: the schema: %w", err)
				}
				return s.Validate(args[0]) == nil, nil
			}
		}},
}

// textPair binds a function of two texts, refusing anything else (a null
// field of an item) with a message naming what it got.
func textPair(name string, f func(a, b string) (float64, error)) func(FunctionEnv) func(...any) (any, error) {
	return func(FunctionEnv) func(...any) (any, error) {
		return func(args ...any) (any, error) {
			a, okA := args[0].(string)
			b, okB := args[1].(string)
			if !okA || !okB {
				return nil, fmt.Errorf("%s: wants two texts, got %s and %s", name, kindOf(args[0]), kindOf(args[1]))
			}
			return f(a, b)
		}
	}
}

func kindOf(v any) string {
	if v == nil {
		return "null"
	}
	return fmt.Sprintf("%T", v)
}

// maxCells bounds the table the edit distance and the longest common
// subsequence fill (length × length): about the work ExpressionBudget
// allows a whole evaluation.
const maxCells = ExpressionBudget * bytesPerUnit

// similarity is 1 - editDistance(a, b)/max(len(a), len(b)), over Unicode
// characters; two empty texts are equal.
func similarity(a, b string) (float64, error) {
	na, nb := utf8.RuneCountInString(a), utf8.RuneCountInString(b)
	if na == 0 && nb == 0 {
		return 1, nil
	}
	if err := checkCells("similarity", na, nb); err != nil {
		return 0, err
	}
	return 1 - float64(editDistance(a, b))/float64(max(na, nb)), nil
}

// rougeL is ROUGE-L's F1 (Lin 2004): with l the length of the longest
// common subsequence of the words, precision l/len(candidate), recall
// l/len(reference), and F = 2PR/(P+R). Two texts without words are equal;
// one without words shares nothing with the other.
func rougeL(candidate, reference string) (float64, error) {
	c, r := words(candidate), words(reference)
	if len(c) == 0 && len(r) == 0 {
		return 1, nil
	}
	if len(c) == 0 || len(r) == 0 {
		return 0, nil
	}
	if err := checkCells("rouge_l", len(c), len(r)); err != nil {
		return 0, err
	}
	prev := make([]int, len(r)+1)
	cur := make([]int, len(r)+1)
	for i := 1; i <= len(c); i++ {
		for j := 1; j <= len(r); j++ {
			if c[i-1] == r[j-1] {
				cur[j] = prev[j-1] + 1
			} else {
				cur[j] = max(prev[j], cur[j-1])
			}
		}
		prev, cur = cur, prev
	}
	l := float64(prev[len(r)])
	if l == 0 {
		return 0, nil
	}
	p, rec := l/float64(len(c)), l/float64(len(r))
	return 2 * p * rec / (p + rec), nil
}

func words(s string) []string {
	return strings.FieldsFunc(strings.ToLower(s), func(r rune) bool { return !unicode.IsLetter(r) && !unicode.IsDigit(r) })
}

func checkCells(fn string, n, m int) error {
	if n*m > maxCells {
		return &LimitError{Why: fmt.Sprintf("%s of texts of %d and %d units compares %d pairs, more than the %d one evaluation may", fn, n, m, n*m, maxCells)}
	}
	return nil
}
