// Package redact keeps secrets out of what flowrun writes. Whoever reads a
// secret (the API key a model's requests carry, a password in a base URL,
// the value of a secret-named env: variable) registers it with Add, and
// every text that leaves the process (errors, events, cassettes, store
// rows, the terminal) goes through String, Line, JSON, Read or a Stream
// first.
//
// Guarantees:
//
//   - Any run of MinRun or more consecutive characters of a registered
//     secret is replaced by Placeholder: the secret itself, its start as a
//     reply repeats it, and the visible ends of a masked form such as
//     "sk-proj-****wxyz" (a run followed by asterisks takes the asterisks
//     and the secret's last four characters with it).
//   - Characters are compared as JSON decodes them: a \uXXXX escape (at
//     any depth of JSON inside JSON), \/ and \" match the character they
//     stand for, so an escaped secret is found in a document, in a string
//     holding a document, and in plain text alike.
//   - Redaction comes before any shortening (Line redacts, then cuts; Read
//     reads past its cap, redacts, then cuts), so a cut can only shorten
//     the placeholder and never leaves a piece of a secret behind.
//   - A Stream holds back the end of streamed text that could be part of a
//     secret until the next piece shows whether it is one.
//   - Values shorter than MinLen are not registered: they are no
//     credential, and redacting them would blank out ordinary words. For
//     the same reason runs shorter than MinRun are left alone: eight
//     characters of a random key are no accident, four may be a word.
//
// The set of secrets only grows, and is shared by the whole process.
package redact

import (
	"encoding/binary"
	"io"
	"math"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"unicode/utf8"
)

// Placeholder replaces every secret.
const Placeholder = "[redacted]"

// MinLen is the shortest value Add registers.
const MinLen = 8

// MinRun is the shortest run of a secret's characters that is redacted.
const MinRun = 8

type set struct {
	values []string
	grams  map[uint64]struct{} // every MinRun-byte substring of every value
	bytes  [256]bool           // the bytes values hold
	tails  map[string]struct{} // the last four bytes of every value
	maxLen int
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
	s := &set{values: all, grams: map[uint64]struct{}{}, tails: map[string]struct{}{}}
	for _, v := range all {
		for i := 0; i+MinRun <= len(v); i++ {
			s.grams[gram(v[i:])] = struct{}{}
		}
		for i := 0; i < len(v); i++ {
			s.bytes[v[i]] = true
		}
		s.tails[v[len(v)-4:]] = struct{}{}
		s.maxLen = max(s.maxLen, len(v))
	}
	current.Store(s)
}

// gram packs the first MinRun bytes of b.
func gram[T string | []byte](b T) uint64 {
	var a [MinRun]byte
	copy(a[:], b[:MinRun])
	return binary.LittleEndian.Uint64(a[:])
}

// Slack is how many bytes past a cut a reader must see so that a secret
// crossing the cut is found whole: the longest secret with every
// character escaped as \uXXXX.
func Slack() int {
	cur := current.Load()
	if cur == nil {
		return 0
	}
	return 6 * cur.maxLen
}

// String replaces every run of a registered secret in s.
func String(s string) string {
	cur := current.Load()
	if cur == nil || len(s) < MinRun {
		return s
	}
	out, _ := cur.replace(s)
	return out
}

// JSON replaces every run of a registered secret in a JSON document, as
// it is encoded there; the document stays valid JSON.
func JSON(b []byte) []byte {
	cur := current.Load()
	if cur == nil || len(b) < MinRun {
		return b
	}
	if out, changed := cur.replace(string(b)); changed {
		return []byte(out)
	}
	return b
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

// Read reads at most max bytes of text from r, redacted: it reads Slack
// bytes further, redacts, and only then cuts, on a character boundary.
// cut says whether r held more than max bytes.
func Read(r io.Reader, max int) (text string, cut bool, err error) {
	b, err := io.ReadAll(io.LimitReader(r, int64(max+Slack())+1))
	text = String(string(b))
	if len(b) > max {
		text, cut = Cut(text, max), true
	}
	return text, cut, err
}

// Cut is s cut to at most max bytes on a character boundary.
func Cut(s string, max int) string {
	if len(s) <= max {
		return s
	}
	for max > 0 && !utf8.RuneStart(s[max]) {
		max--
	}
	return s[:max]
}

// decode reads text as JSON decodes it, at any depth of escaping: data
// is the decoded bytes and spans[i] the end in text of the bytes data[i]
// stands for (it starts where data[i-1]'s ends). A character escaped as
// \uXXXX outside ASCII decodes to the bytes of its UTF-8 form, each
// spanning the whole escape.
func decode(text string) (data []byte, spans []int32) {
	data = make([]byte, 0, len(text))
	spans = make([]int32, 0, len(text))
	for i := 0; i < len(text); {
		c, end := text[i], i+1
		if c == '\\' {
			k := i
			for k < len(text) && text[k] == '\\' {
				k++
			}
			switch {
			case k+5 <= len(text) && text[k] == 'u' && isHex(text[k+1:k+5]):
				r := rune(0)
				for _, h := range []byte(text[k+1 : k+5]) {
					r = r<<4 | rune(hexVal(h))
				}
				if r >= utf8.RuneSelf {
					var enc [utf8.UTFMax]byte
					for _, b := range enc[:utf8.EncodeRune(enc[:], r)] {
						data, spans = append(data, b), append(spans, int32(k+5))
					}
					i = k + 5
					continue
				}
				c, end = byte(r), k+5
			case k < len(text) && (text[k] == '/' || text[k] == '"'):
				c, end = text[k], k+1
			case k-i >= 2:
				end = i + 2
			}
		}
		data, spans = append(data, c), append(spans, int32(end))
		i = end
	}
	return data, spans
}

// escapes reports whether text holds an escape that decode reads as
// another character; \n and the like stand for no character of a secret.
func escapes(text string) bool {
	for i := strings.IndexByte(text, '\\'); i >= 0 && i+1 < len(text); {
		switch text[i+1] {
		case 'u', '/', '"', '\\':
			return true
		}
		next := strings.IndexByte(text[i+2:], '\\')
		if next < 0 {
			return false
		}
		i += 2 + next
	}
	return false
}

func isHex(s string) bool {
	for _, c := range []byte(s) {
		if hexVal(c) < 0 {
			return false
		}
	}
	return true
}

func hexVal(c byte) int {
	switch {
	case '0' <= c && c <= '9':
		return int(c - '0')
	case 'a' <= c && c <= 'f':
		return int(c-'a') + 10
	case 'A' <= c && c <= 'F':
		return int(c-'A') + 10
	}
	return -1
}

// replace finds the runs of secrets in text and replaces each with the
// placeholder. It looks up each MinRun-byte window of the decoded text in
// the set of the secrets' windows; a window holding a byte no secret
// holds is skipped whole.
func (s *set) replace(text string) (string, bool) {
	data := []byte(text)
	var spans []int32
	if escapes(text) && len(text) <= math.MaxInt32 {
		data, spans = decode(text)
	}
	// textAt is where in text the byte of data at i starts.
	textAt := func(i int) int {
		switch {
		case spans == nil:
			return i
		case i == 0:
			return 0
		}
		return int(spans[i-1])
	}
	var b strings.Builder
	done := 0 // text[:done] is written to b
	for i := 0; i+MinRun <= len(data); {
		if !s.bytes[data[i+MinRun-1]] {
			i += MinRun
			continue
		}
		if _, ok := s.grams[gram(data[i:])]; !ok {
			i++
			continue
		}
		end := i + MinRun // the run is data[i:end]
		for end < len(data) {
			if _, ok := s.grams[gram(data[end-MinRun+1:])]; !ok {
				break
			}
			end++
		}
		end = s.maskedEnd(data, end)
		b.Grow(len(text))
		b.WriteString(text[done:textAt(i)])
		b.WriteString(Placeholder)
		done = textAt(end)
		i = end
	}
	if done == 0 {
		return text, false
	}
	b.WriteString(text[done:])
	return b.String(), true
}

// maskedEnd extends a run that ends at end over a masked middle: asterisks
// followed by the last four bytes of a secret.
func (s *set) maskedEnd(data []byte, end int) int {
	k := end
	for k < len(data) && data[k] == '*' {
		k++
	}
	if k == end || k+4 > len(data) {
		return end
	}
	if _, ok := s.tails[string(data[k:k+4])]; ok {
		return k + 4
	}
	return end
}

// Stream redacts text that arrives in pieces, such as a model's streamed
// reply: a secret split across pieces is still replaced whole. The zero
// value is ready to use.
type Stream struct {
	held string
}

// Next takes the next piece and returns what can be shown now.
func (s *Stream) Next(piece string) string {
	text := s.held + piece
	cut := len(text) - heldTail(text)
	s.held = text[cut:]
	return String(text[:cut])
}

// End returns what was held back, redacted.
func (s *Stream) End() string {
	rest := s.held
	s.held = ""
	return String(rest)
}

// heldTail is the length of the longest end of text that is part of a
// registered secret, and so may grow into a run once more text arrives.
func heldTail(text string) int {
	cur := current.Load()
	if cur == nil {
		return 0
	}
	longest := 0 // no byte before text's last longest bytes is in a secret
	for longest < len(text) && longest < cur.maxLen && cur.bytes[text[len(text)-1-longest]] {
		longest++
	}
	for n := longest; n > 0; n-- {
		tail := text[len(text)-n:]
		for _, v := range cur.values {
			if strings.Contains(v, tail) {
				return n
			}
		}
	}
	return 0
}
