package sandbox

import (
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"math"
	"math/big"
	"reflect"
	"slices"
	"strconv"
	"unicode/utf16"
	"unicode/utf8"
)

// A Python call's request reaches the harness in the format of Python's
// marshal module rather than as JSON: marshal.loads is written for
// exactly this (no text to scan, lengths up front) and decodes a scoring
// candidate's request, its 4 train pairs, about 9x faster than
// json.loads, which in the guest was about 0.3 ms of every call
// (docs/sandbox.md, "Requests in marshal's format"). The code sees
// exactly the values json.loads would have given it for the args'
// encoding/json text: an integral float64 below 1e21 is an int (Go
// writes it without a fraction), a map's keys come sorted, invalid UTF-8
// is U+FFFD byte by byte. The common Go types are written straight from
// the value; any other (a struct, json.Number, json.RawMessage, a typed
// slice) goes through encoding/json and is re-encoded from its text, in
// which an integer literal is an int of any size, one with a fraction or
// an exponent a float, objects keep their keys' order and the last of a
// repeated key wins.

// marshal's type codes (CPython's Python/marshal.c).
const (
	pmNone    = 'N'
	pmFalse   = 'F'
	pmTrue    = 'T'
	pmInt     = 'i' // int32, little-endian
	pmLong    = 'l' // int32 count of 15-bit digits, its sign the number's, then the digits, least significant first
	pmFloat   = 'g' // float64, little-endian
	pmUnicode = 'u' // int32 length, then UTF-8 (decoded with surrogatepass)
	pmList    = '[' // int32 count, then the items
	pmDict    = '{' // key, value pairs, then pmNull
	pmNull    = '0'
)

// marshalRequest is a Python call's request: {"source", "call", "args",
// "nonce"}, as the harness reads it.
func marshalRequest(source, call string, args any, nonce string) ([]byte, error) {
	t := &marshalWriter{out: make([]byte, 0, 2*len(source)+1024)}
	t.out = append(t.out, pmDict)
	for _, kv := range [][2]string{{"source", source}, {"call", call}, {"nonce", nonce}} {
		t.goString(kv[0])
		t.goString(kv[1])
	}
	t.goString("args")
	if err := t.goValue(args, 0); err != nil {
		return nil, err
	}
	t.out = append(t.out, pmNull)
	return t.out, nil
}

// marshalWriter writes marshal's format to out, from Go values or from
// JSON text (in, read from i).
type marshalWriter struct {
	in  []byte
	i   int
	out []byte
}

// maxMarshalDepth is below marshal.loads' own limit (2,000), so that a
// request too deep for it fails here, with a clear error.
const maxMarshalDepth = 1000

var errTooDeep = fmt.Errorf("args are nested more than %d deep", maxMarshalDepth)

// goValue writes v as encoding/json would have written it and json.loads
// read it back.
func (t *marshalWriter) goValue(v any, depth int) error {
	if depth > maxMarshalDepth {
		return errTooDeep
	}
	switch x := v.(type) {
	case nil:
		t.out = append(t.out, pmNone)
	case bool:
		if x {
			t.out = append(t.out, pmTrue)
		} else {
			t.out = append(t.out, pmFalse)
		}
	case string:
		t.goString(x)
	case float64:
		return t.goFloat(x)
	case int:
		t.goInt(int64(x))
	case int64:
		t.goInt(x)
	case int32:
		t.goInt(int64(x))
	case []any:
		if x == nil {
			t.out = append(t.out, pmNone)
			return nil
		}
		t.out = append(t.out, pmList)
		t.out = binary.LittleEndian.AppendUint32(t.out, uint32(len(x)))
		for _, e := range x {
			if err := t.goValue(e, depth+1); err != nil {
				return err
			}
		}
	case map[string]any:
		if x == nil {
			t.out = append(t.out, pmNone)
			return nil
		}
		t.out = append(t.out, pmDict)
		for _, k := range slices.Sorted(maps.Keys(x)) {
			t.goString(k)
			if err := t.goValue(x[k], depth+1); err != nil {
				return err
			}
		}
		t.out = append(t.out, pmNull)
	default:
		js, err := argsJSON(x)
		if err != nil {
			return err
		}
		return t.fromJSON(js, depth)
	}
	return nil
}

// goString writes s as unicode, each byte of invalid UTF-8 as U+FFFD.
func (t *marshalWriter) goString(s string) {
	t.out = append(t.out, pmUnicode, 0, 0, 0, 0)
	at := len(t.out)
	if utf8.ValidString(s) {
		t.out = append(t.out, s...)
	} else {
		for _, r := range s {
			t.out = utf8.AppendRune(t.out, r) // range gives RuneError for each invalid byte
		}
	}
	binary.LittleEndian.PutUint32(t.out[at-4:], uint32(len(t.out)-at))
}

func (t *marshalWriter) goInt(v int64) {
	if v >= math.MinInt32 && v <= math.MaxInt32 {
		t.out = append(t.out, pmInt)
		t.out = binary.LittleEndian.AppendUint32(t.out, uint32(int32(v)))
		return
	}
	t.long(new(big.Int).SetInt64(v))
}

// goFloat follows encoding/json: below 1e21 an integral value is written
// without a fraction, which json.loads reads as an int.
func (t *marshalWriter) goFloat(f float64) error {
	if math.IsInf(f, 0) || math.IsNaN(f) {
		return fmt.Errorf("args are not JSON: %w", &json.UnsupportedValueError{Value: reflect.ValueOf(f), Str: strconv.FormatFloat(f, 'g', -1, 64)})
	}
	if math.Abs(f) < 1e21 && f == math.Trunc(f) {
		if math.Abs(f) < 1<<62 {
			t.goInt(int64(f))
		} else {
			i, _ := big.NewFloat(f).Int(nil)
			t.long(i)
		}
		return nil
	}
	t.out = append(t.out, pmFloat)
	t.out = binary.LittleEndian.AppendUint64(t.out, math.Float64bits(f))
	return nil
}

// fromJSON writes the JSON text js.
func (t *marshalWriter) fromJSON(js []byte, depth int) error {
	in, i := t.in, t.i
	defer func() { t.in, t.i = in, i }()
	t.in, t.i = js, 0
	if err := t.value(depth); err != nil {
		return err
	}
	if t.space(); t.i != len(t.in) {
		return t.errorf("text after the value")
	}
	return nil
}

func (t *marshalWriter) errorf(format string, a ...any) error {
	return fmt.Errorf("args at byte %d: %s", t.i, fmt.Sprintf(format, a...))
}

func (t *marshalWriter) space() {
	for t.i < len(t.in) {
		switch t.in[t.i] {
		case ' ', '\t', '\n', '\r':
			t.i++
		default:
			return
		}
	}
}

func (t *marshalWriter) value(depth int) error {
	if depth > maxMarshalDepth {
		return errTooDeep
	}
	t.space()
	if t.i >= len(t.in) {
		return t.errorf("unexpected end")
	}
	switch c := t.in[t.i]; {
	case c == '{':
		return t.object(depth)
	case c == '[':
		return t.array(depth)
	case c == '"':
		return t.str()
	case c == 't':
		return t.literal("true", pmTrue)
	case c == 'f':
		return t.literal("false", pmFalse)
	case c == 'n':
		return t.literal("null", pmNone)
	case c == '-' || c >= '0' && c <= '9':
		return t.number()
	default:
		return t.errorf("unexpected %q", c)
	}
}

func (t *marshalWriter) literal(word string, code byte) error {
	if len(t.in)-t.i < len(word) || string(t.in[t.i:t.i+len(word)]) != word {
		return t.errorf("not %s", word)
	}
	t.i += len(word)
	t.out = append(t.out, code)
	return nil
}

func (t *marshalWriter) object(depth int) error {
	t.i++ // {
	t.out = append(t.out, pmDict)
	for first := true; ; first = false {
		t.space()
		if t.i < len(t.in) && t.in[t.i] == '}' && first {
			t.i++
			break
		}
		if t.space(); t.i >= len(t.in) || t.in[t.i] != '"' {
			return t.errorf("want a key")
		}
		if err := t.str(); err != nil {
			return err
		}
		if t.space(); t.i >= len(t.in) || t.in[t.i] != ':' {
			return t.errorf("want ':'")
		}
		t.i++
		if err := t.value(depth + 1); err != nil {
			return err
		}
		if t.space(); t.i < len(t.in) && t.in[t.i] == ',' {
			t.i++
			continue
		}
		if t.i < len(t.in) && t.in[t.i] == '}' {
			t.i++
			break
		}
		return t.errorf("want ',' or '}'")
	}
	t.out = append(t.out, pmNull)
	return nil
}

func (t *marshalWriter) array(depth int) error {
	t.i++ // [
	t.out = append(t.out, pmList, 0, 0, 0, 0)
	at, n := len(t.out)-4, 0
	for {
		t.space()
		if t.i < len(t.in) && t.in[t.i] == ']' && n == 0 {
			t.i++
			break
		}
		if err := t.value(depth + 1); err != nil {
			return err
		}
		n++
		if t.space(); t.i < len(t.in) && t.in[t.i] == ',' {
			t.i++
			continue
		}
		if t.i < len(t.in) && t.in[t.i] == ']' {
			t.i++
			break
		}
		return t.errorf("want ',' or ']'")
	}
	if n > math.MaxInt32 {
		return t.errorf("an array of %d items", n)
	}
	binary.LittleEndian.PutUint32(t.out[at:], uint32(n))
	return nil
}

// str writes a JSON string as marshal's unicode. A lone surrogate, which
// json.loads keeps, is written as its three bytes and read back by
// marshal's surrogatepass.
func (t *marshalWriter) str() error {
	t.i++ // "
	t.out = append(t.out, pmUnicode, 0, 0, 0, 0)
	at := len(t.out)
	for {
		start := t.i
		for t.i < len(t.in) && t.in[t.i] != '"' && t.in[t.i] != '\\' {
			t.i++
		}
		t.out = append(t.out, t.in[start:t.i]...)
		if t.i >= len(t.in) {
			return t.errorf("unterminated string")
		}
		if t.in[t.i] == '"' {
			t.i++
			break
		}
		if t.i+1 >= len(t.in) {
			return t.errorf("unterminated string")
		}
		esc := t.in[t.i+1]
		t.i += 2
		switch esc {
		case '"', '\\', '/':
			t.out = append(t.out, esc)
		case 'b':
			t.out = append(t.out, '\b')
		case 'f':
			t.out = append(t.out, '\f')
		case 'n':
			t.out = append(t.out, '\n')
		case 'r':
			t.out = append(t.out, '\r')
		case 't':
			t.out = append(t.out, '\t')
		case 'u':
			r, err := t.hex4()
			if err != nil {
				return err
			}
			if utf16.IsSurrogate(r) && r < 0xdc00 && t.i+1 < len(t.in) && t.in[t.i] == '\\' && t.in[t.i+1] == 'u' {
				save := t.i
				t.i += 2
				if lo, err := t.hex4(); err == nil && lo >= 0xdc00 && lo <= 0xdfff {
					t.out = utf8.AppendRune(t.out, utf16.DecodeRune(r, lo))
					continue
				}
				t.i = save
			}
			if utf16.IsSurrogate(r) {
				t.out = append(t.out, 0xe0|byte(r>>12), 0x80|byte(r>>6)&0x3f, 0x80|byte(r)&0x3f)
			} else {
				t.out = utf8.AppendRune(t.out, r)
			}
		default:
			return t.errorf("unknown escape \\%c", esc)
		}
	}
	n := len(t.out) - at
	if n > math.MaxInt32 {
		return t.errorf("a string of %d bytes", n)
	}
	binary.LittleEndian.PutUint32(t.out[at-4:], uint32(n))
	return nil
}

func (t *marshalWriter) hex4() (rune, error) {
	if len(t.in)-t.i < 4 {
		return 0, t.errorf("short \\u escape")
	}
	v, err := strconv.ParseUint(string(t.in[t.i:t.i+4]), 16, 16)
	if err != nil {
		return 0, t.errorf("bad \\u escape")
	}
	t.i += 4
	return rune(v), nil
}

func (t *marshalWriter) number() error {
	start, isFloat := t.i, false
	for ; t.i < len(t.in); t.i++ {
		c := t.in[t.i]
		if c == '.' || c == 'e' || c == 'E' {
			isFloat = true
		} else if !(c == '-' || c == '+' || c >= '0' && c <= '9') {
			break
		}
	}
	lit := string(t.in[start:t.i])
	if isFloat {
		// Out of range is ±inf, as Python's float() of the same literal.
		f, err := strconv.ParseFloat(lit, 64)
		if err != nil && !errors.Is(err, strconv.ErrRange) {
			return t.errorf("bad number %q", lit)
		}
		t.out = append(t.out, pmFloat)
		t.out = binary.LittleEndian.AppendUint64(t.out, math.Float64bits(f))
		return nil
	}
	if v, err := strconv.ParseInt(lit, 10, 64); err == nil {
		if v >= math.MinInt32 && v <= math.MaxInt32 {
			t.out = append(t.out, pmInt)
			t.out = binary.LittleEndian.AppendUint32(t.out, uint32(int32(v)))
			return nil
		}
		t.long(new(big.Int).SetInt64(v))
		return nil
	}
	v, ok := new(big.Int).SetString(lit, 10)
	if !ok {
		return t.errorf("bad number %q", lit)
	}
	t.long(v)
	return nil
}

// long writes v as marshal's arbitrary-size int: 15-bit digits.
func (t *marshalWriter) long(v *big.Int) {
	mag := new(big.Int).Abs(v)
	t.out = append(t.out, pmLong, 0, 0, 0, 0)
	at, n := len(t.out)-4, int32(0)
	mask := big.NewInt(0x7fff)
	d := new(big.Int)
	for mag.Sign() > 0 {
		t.out = binary.LittleEndian.AppendUint16(t.out, uint16(d.And(mag, mask).Uint64()))
		mag.Rsh(mag, 15)
		n++
	}
	if v.Sign() < 0 {
		n = -n
	}
	binary.LittleEndian.PutUint32(t.out[at:], uint32(n))
}
