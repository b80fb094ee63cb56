package sandbox

import (
	"strings"
	"testing"

	"github.com/flowrun/flowrun/redact"
)

// Output past the cap is cut after it is redacted: a key the code prints
// across the cut, at every offset, leaves no piece of it (four characters
// or more) in stdout or stderr.
func TestOutputCutLeavesNoPieceOfTheKey(t *testing.T) {
	const key = "sk-SANDBOXCUT-QZXJVKWQZPXJKVQWZXPJ"
	redact.Add(key)
	const max = 64
	for pad := max - len(key) - 1; pad <= max+1; pad++ {
		out := []byte(strings.Repeat(" ", pad) + key + " and more")
		res := finish(&report{Stdout: out, Stderr: out}, max)
		for _, got := range []string{res.Stdout, res.Stderr} {
			if len(got) > max {
				t.Fatalf("pad %d: %d bytes, more than %d", pad, len(got), max)
			}
			for i := 0; i+4 <= len(key); i++ {
				if strings.Contains(got, key[i:i+4]) {
					t.Fatalf("pad %d: the output holds %q of the key: %q", pad, key[i:i+4], got)
				}
			}
		}
	}
}
