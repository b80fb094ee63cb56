// Package jsonvalue holds JSON values as flowrun's expressions see them.
// Decode turns integral numbers into int (an integer too large for an int
// stays a json.Number rather than lose digits as a float64), so that
// `index == 1` holds for a decoded 1. Validate checks a value against a JSON
// schema (draft 2020-12) and says in one line where and why it fails; each
// distinct schema is compiled once per process. Text writes a value as a
// template inserts it.
package jsonvalue

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"net/url"
	"regexp"
	"strconv"
	"strings"
	"sync"

	"github.com/santhosh-tekuri/jsonschema/v5"
)

// Decode decodes one JSON value, turning integral numbers into int.
func Decode(b []byte) (any, error) {
	d := json.NewDecoder(bytes.NewReader(b))
	d.UseNumber()
	var v any
	if err := d.Decode(&v); err != nil {
		return nil, err
	}
	if d.More() {
		return nil, errors.New("unexpected data after the JSON value")
	}
	return NormalizeNumbers(v), nil
}

// NormalizeNumbers turns json.Number values (from a decoder with
// UseNumber) into int where integral and float64 otherwise, in place. An
// integer too large for an int stays a json.Number: as a float64 it would
// lose its last digits (2**100 would come back as 1.2676506002282294e+30).
func NormalizeNumbers(v any) any {
	switch x := v.(type) {
	case json.Number:
		if i, err := x.Int64(); err == nil {
			return int(i)
		}
		if !strings.ContainsAny(string(x), ".eE") {
			return x
		}
		f, _ := x.Float64()
		return f
	case []any:
		for i := range x {
			x[i] = NormalizeNumbers(x[i])
		}
	case map[string]any:
		for k := range x {
			x[k] = NormalizeNumbers(x[k])
		}
	}
	return v
}

// Number reads a JSON number as expressions produce it (int, int64,
// float64, or a json.Number too large for int64) as a float64.
func Number(v any) (float64, bool) {
	switch x := v.(type) {
	case int:
		return float64(x), true
	case int64:
		return float64(x), true
	case float64:
		return x, true
	case json.Number:
		f, err := x.Float64()
		return f, err == nil
	}
	return 0, false
}

// Describe names a value's kind for an error message: "the string \"x\"",
// "the number 3", "a list", "a map", "null".
func Describe(v any) string {
	switch v.(type) {
	case nil:
		return "null"
	case string:
		return fmt.Sprintf("the string %q", v)
	case int, int64, float64:
		return fmt.Sprintf("the number %v", v)
	case []any:
		return "a list"
	case map[string]any:
		return "a map"
	}
	return fmt.Sprintf("%T", v)
}

// Text is a value as text: a string as it is, null as nothing, an
// integral number without a fraction or exponent, anything else as JSON.
func Text(v any) string {
	switch x := v.(type) {
	case nil:
		return ""
	case string:
		return x
	case float64:
		if x == math.Trunc(x) && math.Abs(x) < 1e15 {
			return strconv.FormatInt(int64(x), 10)
		}
		return strconv.FormatFloat(x, 'g', -1, 64)
	case int, int64, bool:
		return fmt.Sprint(x)
	default:
		// Text goes into prompts and pages that escape for themselves:
		// "<" stays "<", as a person or a model would write it.
		b, err := Marshal(x)
		if err != nil {
			return fmt.Sprint(x)
		}
		return string(b)
	}
}

// Schema is a compiled JSON schema.
type Schema struct{ s *jsonschema.Schema }

// compiled caches compiled schemas by their JSON text (json.Marshal sorts
// keys, so equal schemas share an entry): a tool's parameters or an answer
// schema is checked on every call, and compiling costs far more than
// validating. Schemas come from pipeline files, so the set is small.
var compiled sync.Map // string -> *Schema

// Compile compiles a JSON schema given as Go values, or returns the one
// compiled before for an equal schema. Its error says what is wrong in the
// schema, not which meta-schema rule failed.
func Compile(schema map[string]any) (*Schema, error) {
	b, err := json.Marshal(schema)
	if err != nil {
		return nil, err
	}
	if s, ok := compiled.Load(string(b)); ok {
		return s.(*Schema), nil
	}
	c := jsonschema.NewCompiler()
	c.Draft = jsonschema.Draft2020
	if err := c.AddResource("value.json", bytes.NewReader(b)); err != nil {
		return nil, err
	}
	js, err := c.Compile("value.json")
	var se *jsonschema.SchemaError
	if errors.As(err, &se) {
		return nil, simplify(se.Err)
	}
	if err != nil {
		return nil, err
	}
	s := &Schema{s: js}
	compiled.Store(string(b), s)
	return s, nil
}

// Validate checks v as its JSON encoding, so that Go values of any numeric
// or map type are judged as the JSON they stand for.
func (s *Schema) Validate(v any) error {
	b, err := json.Marshal(v)
	if err != nil {
		return err
	}
	norm, err := Decode(b)
	if err != nil {
		return err
	}
	if err := s.s.Validate(norm); err != nil {
		return simplify(err)
	}
	return nil
}

// Validate checks v against a JSON schema given as Go values.
func Validate(schema map[string]any, v any) error {
	s, err := Compile(schema)
	if err != nil {
		return err
	}
	return s.Validate(v)
}

// simplify turns a validation error tree into one line.
func simplify(err error) error {
	ve, ok := err.(*jsonschema.ValidationError)
	if !ok {
		return err
	}
	var msgs []string
	for _, l := range LeafErrors(ve) {
		where := FieldPath(SplitPointer(l.InstanceLocation))
		if where != "" {
			where += ": "
		}
		msgs = append(msgs, where+l.Message)
	}
	return fmt.Errorf("%s", strings.Join(msgs, "; "))
}

// LeafErrors flattens a validation error tree to the errors worth showing.
// Where oneOf/anyOf alternatives all fail on the value's type, it keeps the
// one merged error ("expected string or object"); otherwise it follows the
// alternative that got deepest into the value, which is the one the author
// most likely meant.
func LeafErrors(ve *jsonschema.ValidationError) []*jsonschema.ValidationError {
	if len(ve.Causes) == 0 {
		return []*jsonschema.ValidationError{ve}
	}
	kw := lastSegment(ve.KeywordLocation)
	if kw != "oneOf" && kw != "anyOf" {
		var out []*jsonschema.ValidationError
		for _, c := range ve.Causes {
			out = append(out, LeafErrors(c)...)
		}
		return out
	}
	var types []string
	allTypes := true
	for _, c := range ve.Causes {
		if len(c.Causes) == 0 && lastSegment(c.KeywordLocation) == "type" && c.InstanceLocation == ve.InstanceLocation {
			if m := typeMsgRE.FindStringSubmatch(c.Message); m != nil {
				types = append(types, m[1])
				continue
			}
		}
		allTypes = false
	}
	if allTypes {
		got := typeMsgRE.FindStringSubmatch(ve.Causes[0].Message)[2]
		return []*jsonschema.ValidationError{{
			KeywordLocation:  ve.KeywordLocation + "/type",
			InstanceLocation: ve.InstanceLocation,
			Message:          fmt.Sprintf("expected %s, but got %s", strings.Join(types, " or "), got),
		}}
	}
	var best []*jsonschema.ValidationError
	bestDepth := -1
	for _, c := range ve.Causes {
		leaves := LeafErrors(c)
		d := 0
		for _, l := range leaves {
			d = max(d, strings.Count(l.InstanceLocation, "/"))
		}
		// A type mismatch at the value itself means "not this alternative".
		if len(leaves) == 1 && lastSegment(leaves[0].KeywordLocation) == "type" && leaves[0].InstanceLocation == ve.InstanceLocation {
			d = -1
		}
		if d > bestDepth {
			best, bestDepth = leaves, d
		}
	}
	return best
}

var typeMsgRE = regexp.MustCompile(`^expected (.+), but got (\w+)$`)

func lastSegment(p string) string {
	return p[strings.LastIndex(p, "/")+1:]
}

// SplitPointer splits a JSON pointer ("/a/b~1c") into its unescaped
// segments (["a", "b/c"]).
func SplitPointer(p string) []string {
	if p == "" {
		return nil
	}
	parts := strings.Split(strings.TrimPrefix(p, "/"), "/")
	for i, s := range parts {
		if u, err := url.PathUnescape(s); err == nil {
			s = u
		}
		parts[i] = strings.ReplaceAll(strings.ReplaceAll(s, "~1", "/"), "~0", "~")
	}
	return parts
}

// FieldPath writes pointer segments the way an expression reads them:
// ["a", "0", "b"] is a[0].b.
func FieldPath(segs []string) string {
	var b strings.Builder
	for _, s := range segs {
		if _, err := strconv.Atoi(s); err == nil {
			fmt.Fprintf(&b, "[%s]", s)
			continue
		}
		if b.Len() > 0 {
			b.WriteByte('.')
		}
		b.WriteString(s)
	}
	return b.String()
}

// Marshal is json.Marshal without HTML escaping: flowrun's JSON is read
// by people and programs, never pasted into a page, so `a > b` stays
// `a > b` rather than `a \u003e b`.
func Marshal(v any) ([]byte, error) { return MarshalIndent(v, "") }

// MarshalIndent is Marshal with each level indented by indent.
func MarshalIndent(v any, indent string) ([]byte, error) {
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(false)
	enc.SetIndent("", indent)
	if err := enc.Encode(v); err != nil {
		return nil, err
	}
	return bytes.TrimSuffix(buf.Bytes(), []byte("\n")), nil
}
