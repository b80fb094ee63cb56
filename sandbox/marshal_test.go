package sandbox

import (
	"context"
	"encoding/json"
	"fmt"
	"math"
	"strings"
	"testing"
)

// TestArgsReachTheCodeAsJSONWouldGiveThem sends values whose JSON is easy
// to get subtly wrong through the marshal request and has the guest's
// own json.loads decode the same text: the two must be the same Python
// values, types and key order included (repr tells 1 from 1.0 and shows
// the order).
func TestArgsReachTheCodeAsJSONWouldGiveThem(t *testing.T) {
	s := New(Options{CacheDir: sharedCache(t), Workers: 1})
	defer s.Close()
	needPython(t, s)
	cases := []string{
		`null`, `true`, `false`, `0`, `-0`, `-0.0`, `1`, `1.0`, `1e3`, `1E-3`, `2.5e+300`, `1e400`, `-1e400`,
		`2147483647`, `2147483648`, `-2147483648`, `-2147483649`, `9223372036854775807`, `-9223372036854775808`,
		`18446744073709551616`, `-123456789012345678901234567890123456789`, `32768`, `32767`, `1073741824`,
		`""`, `"plain"`, `"é ü 日本 🙂"`, `"\u00e9\n\t\r\b\f\"\\\/"`, `"\ud83d\ude42"`, `"\ud800"`, `"a\udc00b"`, `"\ud800\ud800"`,
		`"\u0000"`, `"\u2028"`, `[]`, `{}`, `[[]]`, `{"b": 1, "a": 2}`, `{"k": 1, "k": 2}`, `{"": null}`,
		`[1, 1.5, "x", null, [true, {"z": [], "y": {}}]]`,
		` [ 1 , 2 ] `,
	}
	args := make([]any, len(cases))
	texts := make([]any, len(cases))
	for i, c := range cases {
		args[i] = json.RawMessage(c)
		texts[i] = c
	}
	sameAsJSONLoads(t, s, args, texts)
}

// sameAsJSONLoads has the guest compare each of values, as it reached the
// code, with json.loads of the matching text.
func sameAsJSONLoads(t *testing.T, s *Sandbox, values, texts []any) {
	t.Helper()
	const src = `
import json
def check(values, texts):
    return [[repr(v), repr(json.loads(t))] for v, t in zip(values, texts)]
`
	res, err := s.Run(context.Background(), Request{Language: Python, Source: src, Call: "check", Args: []any{values, texts}})
	if err != nil || !res.OK {
		t.Fatalf("%v %+v", err, res)
	}
	got, _ := res.Result.([]any)
	if len(got) != len(values) {
		t.Fatalf("%d results for %d values: %v", len(got), len(values), res.Result)
	}
	for i, g := range got {
		pair := g.([]any)
		if pair[0] != pair[1] {
			t.Errorf("value %d, encoding/json text %s, reached the code as %v; json.loads gives %v", i, texts[i], pair[0], pair[1])
		}
	}
}

// TestGoArgsReachTheCodeAsJSONWouldGiveThem: Go values, written straight
// or through encoding/json, are what json.loads makes of their
// encoding/json text.
func TestGoArgsReachTheCodeAsJSONWouldGiveThem(t *testing.T) {
	s := New(Options{CacheDir: sharedCache(t), Workers: 1})
	defer s.Close()
	needPython(t, s)
	values := []any{
		nil, true, false, float64(3), 3.5, math.Copysign(0, -1), 1e20, 1e21, 123456789012345678.0, 1 << 62, 1e-7, 0.1,
		-5, int64(math.MaxInt64), int64(math.MinInt64), uint64(math.MaxUint64), float32(0.1), int8(-3), int32(-7),
		"bad\xffutf8\xc3", "ok \u2028 <&>", "\xef\xbf\xbd", map[string]any{"b": 1, "a": []any{}}, []any(nil), map[string]any(nil), []string{"x"},
		struct {
			A int `json:"a"`
			B any `json:"b,omitempty"`
		}{A: 1}, json.Number("1e5"), json.Number("12345678901234567890"),
		[]any{map[string]any{"k": []any{1.0, "s", nil, true, map[string]any{}}}},
	}
	texts := make([]any, len(values))
	for i, v := range values {
		b, err := json.Marshal(v)
		if err != nil {
			t.Fatal(err)
		}
		texts[i] = string(b)
	}
	sameAsJSONLoads(t, s, values, texts)
	res, err := s.Run(context.Background(), Request{Language: Python, Source: "def f(x):\n    return x\n", Call: "f", Args: []any{[]any{math.NaN()}}})
	if err != nil || res.OK || res.Error == nil || res.Error.Message != "args are not JSON: json: unsupported value: NaN" {
		t.Fatalf("%v %+v", err, res)
	}
}

// TestArgsTooDeepAreAClearError: nesting marshal.loads would refuse is
// refused before the call, saying so, and the next call runs.
func TestArgsTooDeepAreAClearError(t *testing.T) {
	deep := json.RawMessage(strings.Repeat("[", maxMarshalDepth+5) + strings.Repeat("]", maxMarshalDepth+5))
	if _, err := marshalRequest("", "f", []any{deep}, ""); err == nil || !strings.Contains(err.Error(), "nested more than 1000 deep") {
		t.Fatalf("err %v", err)
	}
	s := New(Options{CacheDir: sharedCache(t), Workers: 1})
	defer s.Close()
	needPython(t, s)
	ctx := context.Background()
	res, err := s.Run(ctx, Request{Language: Python, Source: "def f(x):\n    return 1\n", Call: "f", Args: []any{deep}})
	if err != nil || res.OK || res.Error == nil || !strings.Contains(res.Error.Message, "nested more than 1000 deep") {
		t.Fatalf("%v %+v", err, res)
	}
	res, err = s.Run(ctx, Request{Language: Python, Source: "def f(x):\n    return len(x)\n", Call: "f", Args: []any{[]any{1, 2}}})
	if err != nil || !res.OK || fmt.Sprint(res.Result) != "2" {
		t.Fatalf("%v %+v", err, res)
	}
}

// FuzzMarshalFromJSON: no input panics the transcoder, and what
// encoding/json accepts, it accepts.
func FuzzMarshalFromJSON(f *testing.F) {
	for _, s := range []string{`[1,"a",{"b":null}]`, `"\ud800"`, `1e999`, `{"a":[1.5,-2,true]}`, `[`, `"\u12`, `123456789012345678901234567890`} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		err := (&marshalWriter{}).fromJSON(b, 0)
		if err != nil && json.Valid(b) && !strings.Contains(err.Error(), "deep") {
			t.Fatalf("%q is JSON, but: %v", b, err)
		}
	})
}
