package batch

import (
	"fmt"
	"strings"
	"testing"
)

// TestDiffText checks word and line diffs, and that each side reads back
// from its pieces.
func TestDiffText(t *testing.T) {
	for _, c := range []struct{ a, b, want string }{
		{"the cat sat", "the dog sat", "[= the ][- cat ][+ dog ][= sat]"},
		{"same", "same", "[= same]"},
		{"", "new text", "[+ new text]"},
		{"one\ntwo\nthree\n", "one\n2\nthree\nfour\n", "[= one\n][- two\n][+ 2\n][= three\n][+ four\n]"},
	} {
		ops := DiffText(c.a, c.b)
		var got, left, right strings.Builder
		for _, op := range ops {
			fmt.Fprintf(&got, "[%c %s]", op.Kind, op.Text)
			if op.Kind != '+' {
				left.WriteString(op.Text)
			}
			if op.Kind != '-' {
				right.WriteString(op.Text)
			}
		}
		if got.String() != c.want || left.String() != c.a || right.String() != c.b {
			t.Errorf("DiffText(%q, %q) = %s; want %s", c.a, c.b, got.String(), c.want)
		}
	}
}
