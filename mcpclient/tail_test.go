package mcpclient

import (
	"strings"
	"testing"

	"github.com/flowrun/flowrun/redact"
)

// A server's stderr is kept from its end: a key it prints, written in
// small pieces, with the cut falling at every offset of the key, leaves no
// piece of it (four characters or more) in what is kept.
func TestStderrTailCutLeavesNoPieceOfTheKey(t *testing.T) {
	const key = "sk-MCPTAIL-QZXJVKWQZPXJKVQWZXPJ"
	redact.Add(key)
	const max = 64
	for after := max - len(key) - 1; after <= max+1; after++ {
		text := strings.Repeat("a", 100) + key + strings.Repeat("z", after)
		tail := &tailBuffer{max: max}
		for i := 0; i < len(text); i += 7 {
			_, _ = tail.Write([]byte(text[i:min(i+7, len(text))]))
		}
		got := tail.String()
		for i := 0; i+4 <= len(key); i++ {
			if strings.Contains(got, key[i:i+4]) {
				t.Fatalf("%d bytes after the key: the tail holds %q of it: %q", after, key[i:i+4], got)
			}
		}
		if !strings.HasSuffix(got, strings.Repeat("z", min(after, max))) {
			t.Fatalf("%d bytes after the key: the tail lost its end: %q", after, got)
		}
	}
}
