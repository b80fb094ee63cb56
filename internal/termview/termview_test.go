package termview

import (
	"encoding/json"
	"os"
	"strings"
	"testing"

	"github.com/flowrun/flowrun/redact"
)

// TestPrintableEscapesWhatActsOnATerminal: every character a terminal
// acts on comes out as an escape, the rest unchanged.
func TestPrintableEscapesWhatActsOnATerminal(t *testing.T) {
	for _, c := range []struct{ in, want string }{
		{"plain\ttext\nline", "plain\ttext\nline"},
		{"\x1b]0;owned\x07", `\x1b]0;owned\x07`},
		{"cr\rover", `cr\x0dover`},
		{"del\x7f", `del\x7f`},
		{"csi \u009b31m", `csi \u009b31m`},
		{"rlo \u202eevil\u202c", `rlo \u202eevil\u202c`},
		{"isolate \u2066x\u2069", `isolate \u2066x\u2069`},
		{"bad \xff byte", `bad \xff byte`},
		{"é ü 字", "é ü 字"},
	} {
		if got := Printable(c.in); got != c.want {
			t.Errorf("Printable(%q) = %q, want %q", c.in, got, c.want)
		}
	}
}

// TestJSONEscapesAndDecodesTheSame: JSON escapes what encoding/json
// leaves raw and still decodes to the same string.
func TestJSONEscapesAndDecodesTheSame(t *testing.T) {
	const s = "csi \u009b31m, rlo \u202eevil\u202c, del \x7f"
	b, _ := json.Marshal(map[string]string{"text": s})
	out := JSON(b)
	for _, raw := range []string{"\u009b", "\u202e", "\u202c", "\x7f"} {
		if strings.Contains(string(out), raw) {
			t.Errorf("JSON leaves %U raw: %q", []rune(raw)[0], out)
		}
	}
	var got map[string]string
	if err := json.Unmarshal(out, &got); err != nil || got["text"] != s {
		t.Fatalf("JSON %q decodes to %q (%v), want %q", out, got["text"], err, s)
	}
}

// TestSecretsRedacted: a registered secret never reaches the terminal,
// as text or as JSON.
func TestSecretsRedacted(t *testing.T) {
	const key = "sk-termview-test-0123456789abcdef"
	redact.Add(key)
	var text, lines strings.Builder
	if _, err := (Text{W: &text}).Write([]byte("key " + key + "\n")); err != nil {
		t.Fatal(err)
	}
	if err := WriteJSON(&lines, map[string]string{"key": key}); err != nil {
		t.Fatal(err)
	}
	for _, out := range []string{text.String(), lines.String(), Printable(key)} {
		if strings.Contains(out, key) || strings.Contains(out, key[8:]) {
			t.Errorf("secret shown: %q", out)
		}
	}
}

// TestFileOfLooksThroughWrappers: a view wrapped in Text still knows the
// file beneath, so that it can ask whether it is a terminal.
func TestFileOfLooksThroughWrappers(t *testing.T) {
	f, err := os.CreateTemp(t.TempDir(), "out")
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	if got, ok := FileOf(Text{W: Text{W: f}}); !ok || got != f {
		t.Errorf("FileOf(Text{Text{f}}) = %v, %v; want the file", got, ok)
	}
	if _, ok := FileOf(&strings.Builder{}); ok {
		t.Error("FileOf a builder says it is a file")
	}
	if IsTerminal(f) {
		t.Error("a regular file is a terminal")
	}
	t.Setenv("COLUMNS", "123")
	if w := Width(Text{W: f}); w != 123 {
		t.Errorf("Width = %d, want $COLUMNS 123", w)
	}
}

// TestValues: values print in name order as JSON, a long one cut at 200
// characters with an ellipsis, and nothing at all when there are none.
func TestValues(t *testing.T) {
	var b strings.Builder
	Values(&b, "inputs", map[string]any{"b": []any{1, "two"}, "a": "x", "long": strings.Repeat("é", 300)})
	lines := strings.Split(strings.TrimSuffix(b.String(), "\n"), "\n")
	if len(lines) != 4 || lines[0] != "inputs:" || lines[1] != `  a: "x"` || lines[2] != `  b: [1,"two"]` {
		t.Fatalf("values:\n%s", b.String())
	}
	if long := strings.TrimPrefix(lines[3], "  long: "); len([]rune(long)) != 200 || !strings.HasSuffix(long, "…") {
		t.Errorf("a long value is %d characters: %q", len([]rune(long)), long)
	}
	b.Reset()
	Values(&b, "outputs", nil)
	if b.Len() != 0 {
		t.Errorf("no values print %q", b.String())
	}
}
