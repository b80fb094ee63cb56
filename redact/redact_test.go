package redact

import (
	"encoding/json"
	"fmt"
	"strings"
	"testing"
)

const key = "sk-proj-REDACTTEST-0123456789abcdef"

// pieces are the substrings of s of MinRun or more bytes.
func pieces(s string) []string {
	var out []string
	for i := 0; i < len(s); i++ {
		for j := i + MinRun; j <= len(s); j++ {
			out = append(out, s[i:j])
		}
	}
	return out
}

func leaks(t *testing.T, what, text, secret string) {
	t.Helper()
	for _, p := range pieces(secret) {
		if strings.Contains(text, p) {
			t.Fatalf("%s holds %q, a piece of the secret:\n%s", what, p, text)
		}
	}
}

func TestLineRedactsBeforeCutting(t *testing.T) {
	Add(key)
	for pad := 0; pad < 80; pad++ {
		s := strings.Repeat("x", pad) + key + " and more text after it"
		got := Line(s, 60)
		leaks(t, "the cut line", got, key)
		if len([]rune(got)) > 61 {
			t.Fatalf("pad %d: %d runes, want at most 60 and the ellipsis: %q", pad, len([]rune(got)), got)
		}
		if pad < 60-len(Placeholder) && !strings.Contains(got, Placeholder) {
			t.Fatalf("pad %d: no placeholder in %q", pad, got)
		}
	}
}

func TestShortValuesAreNotSecrets(t *testing.T) {
	Add("true", "  short ")
	if got := String("it is true and short"); got != "it is true and short" {
		t.Fatalf("short values were redacted: %q", got)
	}
}

func TestJSONFindsTheEncodedForm(t *testing.T) {
	odd := "pa\"ss<wo\x1brd>&" + "9f8e7d"
	Add(odd)
	doc, _ := json.Marshal(map[string]any{"msg": "the password is " + odd, "key": key})
	got := string(JSON(doc))
	if strings.Contains(got, "9f8e7d") || strings.Contains(got, "REDACTTEST") {
		t.Fatalf("a secret survived in the JSON: %s", got)
	}
	var back map[string]string
	if err := json.Unmarshal([]byte(got), &back); err != nil {
		t.Fatalf("redacting broke the JSON: %v\n%s", err, got)
	}
	if back["msg"] != "the password is "+Placeholder || back["key"] != Placeholder {
		t.Fatalf("redacted JSON reads %v", back)
	}
}

// TestStreamSplitAnywhere sends text holding the key in two pieces cut at
// every offset, and text that ends on the start of the key.
func TestStreamSplitAnywhere(t *testing.T) {
	Add(key)
	text := "here it is: " + key + " done"
	for cut := 0; cut <= len(text); cut++ {
		var s Stream
		out := s.Next(text[:cut]) + s.Next(text[cut:]) + s.End()
		leaks(t, "the stream", out, key)
		if out != "here it is: "+Placeholder+" done" {
			t.Fatalf("cut %d: %q", cut, out)
		}
	}
	var s Stream
	out := s.Next("the key starts sk-proj-RED") + s.End()
	leaks(t, "a stream ending on the start of the key", out, key)
	if out != "the key starts "+Placeholder {
		t.Fatalf("got %q", out)
	}
	s = Stream{}
	if out := s.Next("ends in sk") + s.End(); out != "ends in sk" {
		t.Fatalf("a short common start was hidden: %q", out)
	}
}

// escapeAll is s with every character written as a JSON \uXXXX escape.
func escapeAll(s string) string {
	var b strings.Builder
	for _, r := range s {
		fmt.Fprintf(&b, `\u%04x`, r)
	}
	return b.String()
}

// A key written with JSON escapes, as a model may write it in structured
// output or tool-call arguments, is found: escaped whole, in part, with
// \/, and as JSON inside a JSON string. What is left decodes to no piece
// of it.
func TestEscapedKeyIsFound(t *testing.T) {
	const slashed = "abc/def/ghi/REDACTSLASH/jkl"
	Add(key, slashed)
	esc := escapeAll(key)
	cases := map[string]string{
		"all escaped":        `{"out": "` + esc + `"}`,
		"first escaped":      `{"out": "\u0073` + key[1:] + `"}`,
		"upper-case hex":     `{"out": "\u0053\u004B` + key[2:] + `"}`,
		"slash escaped":      `{"url": "` + strings.ReplaceAll(slashed, "/", `\/`) + `"}`,
		"quoted JSON inside": mustJSON(t, map[string]string{"arguments": `{"k": "\u0073` + key[1:] + `"}`}),
		"escaped twice":      mustJSON(t, map[string]string{"arguments": mustJSON(t, map[string]string{"k": key})}),
	}
	for name, doc := range cases {
		got := string(JSON([]byte(doc)))
		var back any
		if err := json.Unmarshal([]byte(got), &back); err != nil && json.Valid([]byte(doc)) {
			t.Fatalf("%s: redacting broke the JSON: %v\n%s", name, err, got)
		}
		for text := got; ; {
			leaks(t, name, text, key)
			leaks(t, name, text, slashed)
			var inner string
			if json.Unmarshal([]byte(`"`+strings.ReplaceAll(text, `"`, `\"`)+`"`), &inner) != nil || inner == text {
				break
			}
			text = inner
		}
		if !strings.Contains(got, Placeholder) {
			t.Fatalf("%s: nothing redacted: %s", name, got)
		}
	}
}

func mustJSON(t *testing.T, v any) string {
	t.Helper()
	b, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

// Any run of MinRun or more characters of a key is redacted: OpenAI's
// masked form, a reply repeating the key's start, a piece from its middle;
// a shorter run is an ordinary word and stays.
func TestRunsOfAKey(t *testing.T) {
	Add(key)
	for _, tc := range []struct{ text, want string }{
		{"your key " + key[:8] + "****" + key[len(key)-4:] + " was revoked", "your key " + Placeholder + " was revoked"},
		{"the key begins " + key[:20] + ", I think", "the key begins " + Placeholder + ", I think"},
		{"middle: " + key[9:19] + ".", "middle: " + Placeholder + "."},
		{"two " + key[:8] + " and " + key[20:] + " done", "two " + Placeholder + " and " + Placeholder + " done"},
		{"short " + key[:MinRun-1] + " stays", "short " + key[:MinRun-1] + " stays"},
		{"stars alone: " + key[:9] + "**** stay", "stars alone: " + Placeholder + "**** stay"},
	} {
		if got := String(tc.text); got != tc.want {
			t.Errorf("String(%q)\n = %q\nwant %q", tc.text, got, tc.want)
		}
	}
}

// Read cuts after redacting: the key swept across the cut, plain and
// escaped, leaves no piece behind on either side.
func TestReadRedactsBeforeCutting(t *testing.T) {
	Add(key)
	const max = 64
	for _, form := range []string{key, escapeAll(key)} {
		for pad := 0; pad <= max; pad++ {
			body := strings.Repeat(" ", pad) + form + " tail"
			got, cut, err := Read(strings.NewReader(body), max)
			if err != nil {
				t.Fatal(err)
			}
			leaks(t, fmt.Sprintf("pad %d", pad), got, key)
			if len(got) > max || cut != (len(body) > max) {
				t.Fatalf("pad %d: %d bytes, cut %v: %q", pad, len(got), cut, got)
			}
		}
	}
}

func BenchmarkString(b *testing.B) {
	Add(key)
	line := "The quick brown fox jumps over the lazy dog; " + `{"n": 12, "ok": true}` + "\n"
	for name, text := range map[string]string{
		"plain": strings.Repeat(line, 1000),
		"json":  mustJSON(&testing.T{}, strings.Repeat(line, 1000)), // its newlines and quotes escaped
	} {
		b.Run(name, func(b *testing.B) {
			b.SetBytes(int64(len(text)))
			for b.Loop() {
				String(text)
			}
		})
	}
}
