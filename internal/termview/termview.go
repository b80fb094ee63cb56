// Package termview is terminal output that cannot be hijacked by the text
// it shows. Whatever a model, a tool, sandboxed code or a stored run wrote
// reaches a person's terminal through it, and it guarantees:
//
//   - secrets are redacted (package redact) in text and in JSON;
//   - text written through Text shows every control character but
//     newline and tab, every bidirectional override and every byte that
//     is not UTF-8 as an escape, so it cannot retitle the terminal, move
//     its cursor, clear it or hide text;
//   - JSON written through JSON, JSONLines, WriteJSON or JSONEvents
//     escapes the characters a terminal acts on that encoding/json leaves
//     raw, and decodes to the same values;
//   - the live Timeline words each event through eventview.Describe, the
//     one description every front end shares.
package termview

import (
	"bytes"
	"fmt"
	"io"
	"os"
	"strings"
	"unicode/utf8"

	"github.com/flowrun/flowrun/jsonvalue"
	"github.com/flowrun/flowrun/redact"
)

// Printable is text as flowrun shows it to a person: secrets redacted,
// then every control character but newline and tab shown as an escape
// (ESC as \x1b, a carriage return as \x0d), and so are bidirectional
// overrides and bytes that are not UTF-8. What a model or sandboxed code
// wrote cannot retitle the terminal, move its cursor, clear it or hide
// text. JSON output needs none of this: encoding/json escapes control
// characters itself.
func Printable(s string) string {
	s = redact.String(s)
	clean := utf8.ValidString(s)
	for _, r := range s {
		if unsafeRune(r) {
			clean = false
			break
		}
	}
	if clean {
		return s
	}
	var b strings.Builder
	for i := 0; i < len(s); {
		r, size := utf8.DecodeRuneInString(s[i:])
		switch {
		case r == utf8.RuneError && size == 1:
			fmt.Fprintf(&b, `\x%02x`, s[i])
		case r < utf8.RuneSelf && unsafeRune(r):
			fmt.Fprintf(&b, `\x%02x`, r)
		case unsafeRune(r):
			fmt.Fprintf(&b, `\u%04x`, r)
		default:
			b.WriteString(s[i : i+size])
		}
		i += size
	}
	return b.String()
}

// unsafeRune says whether r would act on a terminal instead of showing:
// C0 and C1 controls but newline and tab, DEL, and bidirectional
// embeddings, overrides and isolates.
func unsafeRune(r rune) bool {
	switch {
	case r == '\n' || r == '\t':
		return false
	case r < 0x20 || r == 0x7f || (r >= 0x80 && r <= 0x9f):
		return true
	}
	return r >= 0x202a && r <= 0x202e || r >= 0x2066 && r <= 0x2069
}

// Text is a writer for a person's eyes: everything written to it goes
// through Printable. Each write must hold whole lines or runes (fmt's
// calls do).
type Text struct{ W io.Writer }

// Write writes p through Printable. It reports len(p) written, as
// callers of an io.Writer expect, though the escaped text may be longer.
func (t Text) Write(p []byte) (int, error) {
	if _, err := io.WriteString(t.W, Printable(string(p))); err != nil {
		return 0, err
	}
	return len(p), nil
}

// Unwrap is the writer t writes to.
func (t Text) Unwrap() io.Writer { return t.W }

// FileOf is the file w writes to, looking through writers that wrap
// another (an Unwrap method, as Text has).
func FileOf(w io.Writer) (*os.File, bool) {
	for {
		u, ok := w.(interface{ Unwrap() io.Writer })
		if !ok {
			break
		}
		w = u.Unwrap()
	}
	f, ok := w.(*os.File)
	return f, ok
}

// JSON is JSON as flowrun prints it: secrets redacted, and the characters
// a terminal would act on that encoding/json leaves raw (DEL, C1 controls
// such as U+009B, bidirectional overrides such as U+202E) written as \u
// escapes. They can only occur inside strings, so the JSON decodes to the
// same values.
func JSON(b []byte) []byte {
	b = redact.JSON(b)
	if !bytes.ContainsFunc(b, unsafeRune) {
		return b
	}
	out := make([]byte, 0, len(b)+32)
	for i := 0; i < len(b); {
		r, size := utf8.DecodeRune(b[i:])
		if unsafeRune(r) {
			out = fmt.Appendf(out, `\u%04x`, r)
		} else {
			out = append(out, b[i:i+size]...)
		}
		i += size
	}
	return out
}

// JSONLines is a writer of JSON lines as flowrun prints them (JSON); each
// write must hold whole lines.
type JSONLines struct{ W io.Writer }

// Write writes p through JSON. It reports len(p) written, as callers of
// an io.Writer expect, though the escaped JSON may be longer.
func (j JSONLines) Write(p []byte) (int, error) {
	if _, err := j.W.Write(JSON(p)); err != nil {
		return 0, err
	}
	return len(p), nil
}

// WriteJSON prints v as indented JSON (see JSON).
func WriteJSON(w io.Writer, v any) error {
	b, err := jsonvalue.MarshalIndent(v, "  ")
	if err != nil {
		return fmt.Errorf("encode JSON: %w", err)
	}
	_, err = w.Write(JSON(append(b, '\n')))
	return err
}
