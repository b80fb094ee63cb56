package redact

import (
	"encoding/json"
	"strings"
	"testing"
)

const key = "sk-proj-REDACTTEST-0123456789abcdef"

// pieces are the substrings of s of PartialLen or more bytes.
func pieces(s string) []string {
	var out []string
	for i := 0; i < len(s); i++ {
		for j := i + PartialLen; j <= len(s); j++ {
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
