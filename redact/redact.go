// Package redact keeps secrets out of what flowrun writes. Whoever reads a
// secret (the API key a model's requests carry, a password in a base URL,
// the value of a secret-named env: variable) registers it with Add, and
// every text that leaves the process (errors, events, cassettes, store
// rows, the terminal) goes through String, Line, JSON or a Stream first.
//
// Guarantees:
//
//   - A registered secret is replaced whole by Placeholder before any
//     shortening (Line redacts, then cuts), so a cut can only shorten the
//     placeholder and never leaves a piece of a secret behind.
//   - JSON redacts secrets as JSON encodes them, so a secret holding a
//     quote or a control character is found inside an encoded document.
//   - A Stream holds back the end of streamed text that could be the start
//     of a secret until the next piece shows whether it is one.
//   - Values shorter than MinLen are not registered: they are no
//     credential, and redacting them would blank out ordinary words.
//
// The set of secrets only grows, and is shared by the whole process.
package redact

import (
	"encoding/json"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
)

// Placeholder replaces every secret.
const Placeholder = "[redacted]"

// MinLen is the shortest value Add registers.
const MinLen = 8

// PartialLen is the shortest start of a secret a Stream treats as a
// leak when the stream ends on it.
const PartialLen = 4

type set struct {
	values []string // longest first
	raw    *strings.Replacer
	json   *strings.Replacer
}

var (
	mu      sync.Mutex // serialises Add
	current atomic.Pointer[set]
)

// Add registers secrets. Values shorter than MinLen, after trimming
// spaces, are ignored.
func Add(values ...string) {
	mu.Lock()
	defer mu.Unlock()
	old := current.Load()
	var all []string
	if old != nil {
		all = slices.Clone(old.values)
	}
	added := false
	for _, v := range values {
		v = strings.TrimSpace(v)
		if len(v) < MinLen || slices.Contains(all, v) {
			continue
		}
		all = append(all, v)
		added = true
	}
	if !added {
		return
	}
	// Longest first: a secret that contains another is replaced whole.
	slices.SortFunc(all, func(a, b string) int { return len(b) - len(a) })
	raw := make([]string, 0, 2*len(all))
	enc := make([]string, 0, 2*len(all))
	for _, v := range all {
		raw = append(raw, v, Placeholder)
		enc = append(enc, jsonForm(v), Placeholder)
	}
	current.Store(&set{values: all, raw: strings.NewReplacer(raw...), json: strings.NewReplacer(enc...)})
}

// jsonForm is v as it appears inside a JSON string that encoding/json wrote.
func jsonForm(v string) string {
	b, _ := json.Marshal(v) // a string always marshals
	return string(b[1 : len(b)-1])
}

// String replaces every registered secret in s.
func String(s string) string {
	cur := current.Load()
	if cur == nil || s == "" {
		return s
	}
	return cur.raw.Replace(s)
}

// Line is s redacted, then on one line (runs of white space become one
// space), then cut to at most max runes ending in "…" (max <= 0: not cut).
func Line(s string, max int) string {
	s = strings.Join(strings.Fields(String(s)), " ")
	if max > 0 {
		if r := []rune(s); len(r) > max {
			return string(r[:max]) + "…"
		}
	}
	return s
}

// JSON replaces every registered secret in a JSON document, as it is
// encoded there.
func JSON(b []byte) []byte {
	cur := current.Load()
	if cur == nil || len(b) == 0 {
		return b
	}
	return []byte(cur.json.Replace(string(b)))
}

// Stream redacts text that arrives in pieces, such as a model's streamed
// reply: a secret split across pieces is still replaced whole. The zero
// value is ready to use.
type Stream struct {
	held string
}

// Next takes the next piece and returns what can be shown now.
func (s *Stream) Next(piece string) string {
	text := String(s.held + piece)
	cut := len(text) - heldTail(text)
	s.held = text[cut:]
	return text[:cut]
}

// End returns what was held back. A held start of a secret PartialLen or
// more bytes long shows as the placeholder.
func (s *Stream) End() string {
	rest := s.held
	s.held = ""
	if len(rest) >= PartialLen {
		return Placeholder
	}
	return rest
}

// heldTail is the length of the longest end of text that is the start of
// a registered secret, and so may be one once more text arrives.
func heldTail(text string) int {
	cur := current.Load()
	if cur == nil {
		return 0
	}
	best := 0
	for _, v := range cur.values {
		for n := min(len(v)-1, len(text)); n > best; n-- {
			if strings.HasSuffix(text, v[:n]) {
				best = n
				break
			}
		}
	}
	return best
}
