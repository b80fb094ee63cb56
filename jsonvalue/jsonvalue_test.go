package jsonvalue

import (
	"encoding/json"
	"reflect"
	"strings"
	"testing"
)

func TestDecodeNormalisesNumbers(t *testing.T) {
	v, err := Decode([]byte(`{"i": 1, "f": 1.5, "e": 2e3, "list": [3, -4, 5.25], "big": 1267650600228229401496703205376}`))
	if err != nil {
		t.Fatal(err)
	}
	m := v.(map[string]any)
	want := map[string]any{"i": 1, "f": 1.5, "e": 2000.0, "list": []any{3, -4, 5.25}, "big": json.Number("1267650600228229401496703205376")}
	if !reflect.DeepEqual(m, want) {
		t.Errorf("Decode = %#v, want %#v", m, want)
	}
	if _, err := Decode([]byte(`{} {}`)); err == nil {
		t.Error("Decode accepted two values")
	}
}

func TestValidateSaysWhereAndWhy(t *testing.T) {
	schema := map[string]any{
		"type":     "object",
		"required": []any{"items"},
		"properties": map[string]any{
			"items": map[string]any{"type": "array", "items": map[string]any{
				"type": "object", "properties": map[string]any{"n": map[string]any{"type": "integer"}}}},
			"id": map[string]any{"oneOf": []any{map[string]any{"type": "string"}, map[string]any{"type": "integer"}}},
		},
	}
	if err := Validate(schema, map[string]any{"items": []map[string]int{{"n": 1}}, "id": 7}); err != nil {
		t.Errorf("a valid value of Go types: %v", err)
	}
	for _, tc := range []struct {
		v    any
		want string
	}{
		{map[string]any{"items": []any{map[string]any{"n": 1.5}}}, "items[0].n: expected integer, but got number"},
		{map[string]any{"items": []any{}, "id": true}, "id: expected string or integer, but got boolean"},
		{map[string]any{}, "missing properties: 'items'"},
	} {
		err := Validate(schema, tc.v)
		if err == nil || err.Error() != tc.want {
			t.Errorf("Validate(%v) = %v, want %q", tc.v, err, tc.want)
		}
	}
}

func TestCompileCachesAndExplainsBadSchemas(t *testing.T) {
	a, err := Compile(map[string]any{"type": "string", "minLength": 1})
	if err != nil {
		t.Fatal(err)
	}
	b, _ := Compile(map[string]any{"minLength": 1, "type": "string"})
	if a != b {
		t.Error("an equal schema was compiled again")
	}
	_, err = Compile(map[string]any{"type": "strin"})
	if err == nil || !strings.HasPrefix(err.Error(), "type: value must be one of") || strings.Contains(err.Error(), "json-schema.org") {
		t.Errorf("a bad schema: %v; want what is wrong, without the meta-schema URL", err)
	}
}

// Text writes integral floats without an exponent and containers as JSON,
// as templates insert them.
func TestText(t *testing.T) {
	for v, want := range map[any]string{nil: "", "a<b": "a<b", 3.0: "3", 2.5: "2.5", 1e20: "1e+20", 7: "7", true: "true"} {
		if got := Text(v); got != want {
			t.Errorf("Text(%#v) = %q, want %q", v, got, want)
		}
	}
	if got := Text([]any{1, "x", "a<b & c>d"}); got != `[1,"x","a<b & c>d"]` {
		t.Errorf("Text(list) = %q", got)
	}
}

func TestDescribe(t *testing.T) {
	for v, want := range map[any]string{nil: "null", "x": `the string "x"`, 3: "the number 3", 2.5: "the number 2.5", true: "bool"} {
		if got := Describe(v); got != want {
			t.Errorf("Describe(%v) = %q, want %q", v, got, want)
		}
	}
}

func TestNumber(t *testing.T) {
	for v, want := range map[any]float64{1: 1, int64(2): 2, 2.5: 2.5, json.Number("1e30"): 1e30} {
		if got, ok := Number(v); !ok || got != want {
			t.Errorf("Number(%#v) = %v, %v", v, got, ok)
		}
	}
	if _, ok := Number("3"); ok {
		t.Error("a string is not a number")
	}
}

func TestMarshalDoesNotEscapeHTML(t *testing.T) {
	b, err := Marshal(map[string]any{"rule": "a > b & c"})
	if err != nil || string(b) != `{"rule":"a > b & c"}` {
		t.Errorf("Marshal = %s, %v", b, err)
	}
	b, err = MarshalIndent([]any{1}, "  ")
	if err != nil || string(b) != "[\n  1\n]" {
		t.Errorf("MarshalIndent = %q, %v", b, err)
	}
}
