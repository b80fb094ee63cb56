package dsl

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"regexp"
	"strconv"
	"strings"
	"unicode/utf8"

	"gopkg.in/yaml.v3"
)

// The syntax phase: one YAML document, no duplicate keys, and a YAML error
// reported at the line and column of the mistake rather than where yaml.v3
// noticed it.

var yamlLineRE = regexp.MustCompile(`(?s)^line (\d+): (.*)$`)

// lineBreakRE matches what yaml.v3 counts as a line break, so that its line
// numbers index the lines of splitLines.
var lineBreakRE = regexp.MustCompile("\r\n|[\r\n\u0085\u2028\u2029]")

func splitLines(s string) []string {
	return lineBreakRE.Split(s, -1)
}

// parseYAML parses the one YAML document of file name, reporting what is
// wrong with it.
func (l *loader) parseYAML(name string, src []byte) (root *yaml.Node, ok bool) {
	defer func() {
		// yaml.v3 has panicked on malformed input before; a broken file must
		// never take the process down.
		if r := recover(); r != nil {
			l.errorf(Pos{File: name, Line: 1, Col: 1}, "invalid YAML: %v", r)
			root, ok = nil, false
		}
	}()
	dec := yaml.NewDecoder(bytes.NewReader(src))
	var doc yaml.Node
	if err := dec.Decode(&doc); err != nil {
		if err == io.EOF {
			l.errorf(Pos{File: name, Line: 1, Col: 1}, "the file is empty: a pipeline needs at least version, name and nodes")
			return nil, false
		}
		l.yamlError(name, src, err)
		return nil, false
	}
	var extra yaml.Node
	if err := dec.Decode(&extra); err == nil {
		l.errorf(Pos{File: name, Line: extra.Line, Col: extra.Column}, "a pipeline file holds one YAML document; remove this second one (after ---)")
		return nil, false
	} else if err != io.EOF {
		l.yamlError(name, src, err)
		return nil, false
	}
	if len(doc.Content) == 0 || isEmptyNode(doc.Content[0]) {
		l.errorf(Pos{File: name, Line: 1, Col: 1}, "the file is empty: a pipeline needs at least version, name and nodes")
		return nil, false
	}
	if dup := findDuplicateKey(doc.Content[0], 0); dup != nil {
		l.errorf(Pos{File: name, Line: dup.Line, Col: dup.Column}, "key %q is already defined in this mapping", dup.Value)
		return nil, false
	}
	return doc.Content[0], true
}

// isEmptyNode reports whether n is the null a document holding nothing but
// "---" and comments parses to.
func isEmptyNode(n *yaml.Node) bool {
	return n.Kind == yaml.ScalarNode && n.ShortTag() == "!!null" && n.Value == "" && n.Style == 0
}

func (l *loader) yamlError(name string, src []byte, err error) {
	line, col, msg := YAMLError(src, err)
	l.errorf(Pos{File: name, Line: line, Col: col}, "invalid YAML: %s", msg)
}

// YAMLError places yaml.v3's err about src at the line and column of the
// mistake, with a hint where yaml.v3's message is obscure, as a pipeline
// file's YAML errors are reported; 1:1 when it cannot tell.
func YAMLError(src []byte, err error) (line, col int, msg string) {
	line, msg = yamlErrorLine(err)
	// yaml.v3 reports where some enclosing construct began, counting lines
	// from 0 or from 1 depending on the error, often far from the mistake.
	// The mistake is on the first line from which every longer prefix of the
	// file fails to parse (a prefix failing earlier only cut a multi-line
	// value short), and that prefix's error describes it.
	lines := splitLines(string(src))
	if k, kerr := firstBadLine(string(src)); k > 0 {
		line, msg = k, yamlErrorText(kerr)
	}
	if line < 1 || line > len(lines) {
		return 1, 1, msg
	}
	col, msg = explainYAMLError(lines[line-1], msg)
	return line, col, msg
}

func yamlErrorText(err error) string {
	_, msg := yamlErrorLine(err)
	return msg
}

// yamlErrorLine splits a yaml.v3 error into the line it names (0 if none)
// and its message.
func yamlErrorLine(err error) (int, string) {
	msg := err.Error()
	var te *yaml.TypeError
	if errors.As(err, &te) && len(te.Errors) > 0 {
		msg = te.Errors[0]
	}
	msg = strings.TrimPrefix(msg, "yaml: ")
	if m := yamlLineRE.FindStringSubmatch(msg); m != nil {
		line, _ := strconv.Atoi(m[1])
		return line, m[2]
	}
	return 0, msg
}

// maxReparse bounds the bytes firstBadLine parses: it parses a prefix per
// line, which is quadratic in the file's size.
const maxReparse = 4 << 20

// firstBadLine returns the first line such that the prefix of src ending
// with it and every longer prefix fail to parse, and that prefix's error;
// 0 when it gives up.
func firstBadLine(src string) (int, error) {
	bad, budget := 0, maxReparse
	var badErr error
	var ends []int
	for _, m := range lineBreakRE.FindAllStringIndex(src, -1) {
		ends = append(ends, m[1])
	}
	for i, end := range append(ends, len(src)) {
		if budget -= end; budget < 0 {
			return 0, nil
		}
		if err := parseDocuments(src[:end]); err == nil {
			bad = 0
		} else if bad == 0 {
			bad, badErr = i+1, err
		}
	}
	return bad, badErr
}

// parseDocuments parses up to two YAML documents, as parseYAML does.
func parseDocuments(src string) (err error) {
	defer func() {
		if r := recover(); r != nil {
			err = fmt.Errorf("%v", r)
		}
	}()
	dec := yaml.NewDecoder(strings.NewReader(src))
	for range 2 {
		var n yaml.Node
		if err := dec.Decode(&n); err != nil {
			if err == io.EOF {
				return nil
			}
			return err
		}
	}
	return nil
}

// explainYAMLError points at the character on line that a YAML error is
// most likely about, and rewords or adds a hint to the obscure errors.
func explainYAMLError(line, msg string) (int, string) {
	at := -1
	switch {
	case strings.Contains(msg, "tab character"):
		at, msg = strings.IndexByte(line, '\t'), msg+": indent with spaces"
	case msg == "found unexpected end of stream":
		at, msg = strings.IndexAny(line, `"'`), "a quoted string starts here and is never closed"
	case strings.HasSuffix(msg, "or ']'") || strings.HasSuffix(msg, "or '}'"):
		if q, inner, ok := innerQuote(line); ok {
			at, msg = q, inner
		} else if strings.HasSuffix(msg, "or ']'") {
			at, msg = strings.IndexByte(line, '['), msg+": close this [ list, and quote items that contain ': ', '?' or ','"
		} else {
			at, msg = strings.IndexByte(line, '{'), msg+": close this { mapping, and quote values that contain ': ', '?' or ','"
		}
	case msg == "did not find expected alphabetic or numeric character":
		// What follows * (an alias) or & (an anchor) must be a name.
		if i := strings.IndexAny(line, "*&"); i >= 0 {
			at, msg = i, msg+": a value that starts with "+line[i:i+1]+" is an alias or anchor in YAML; put the value in quotes"
		}
	case strings.HasPrefix(msg, "unknown anchor '"):
		name := strings.TrimSuffix(strings.TrimPrefix(msg, "unknown anchor '"), "' referenced")
		at = strings.Index(line, "*"+name)
	case msg == "mapping values are not allowed in this context":
		if first := strings.Index(line, ": "); first >= 0 {
			if second := strings.Index(line[first+2:], ": "); second >= 0 {
				at, msg = first+2, msg+": this value contains ': '; put it in quotes"
			}
		}
	case msg == "did not find expected key" || msg == "did not find expected '-' indicator":
		if q, inner, ok := innerQuote(line); ok {
			at, msg = q, inner
		} else {
			msg += ": check this line's indentation"
		}
	}
	if at < 0 {
		at = len(line) - len(strings.TrimLeft(line, " \t"))
	}
	return utf8.RuneCountInString(line[:at]) + 1, msg
}

// innerQuote says, when line's double-quoted value ends early at an
// unescaped inner quote, where that quote is and how to fix it.
func innerQuote(line string) (at int, msg string, ok bool) {
	open, q, fixed, ok := earlyClosingQuote(line)
	if !ok {
		return 0, "", false
	}
	return q, fmt.Sprintf("this \" ends the string opened at column %d, but the value goes on: escape the inner quotes (%s), or quote the value with ' instead", utf8.RuneCountInString(line[:open])+1, fixed), true
}

// earlyClosingQuote finds, on a line whose value is a double-quoted
// string, the quote that ends it before the value does (an inner quote
// left unescaped, as in x: "say "hi" now"): the byte offsets of the
// string's opening quote and of that one, and the line written with the
// inner quotes escaped. What may follow a closing quote (a comment, a
// flow collection's , ] or }, a quoted key's :) is not such a quote.
func earlyClosingQuote(line string) (open, at int, fixed string, ok bool) {
	from := 0
	for {
		start := strings.IndexByte(line[from:], '"')
		if start < 0 {
			return 0, 0, "", false
		}
		start += from
		end := closingQuote(line, start)
		if end < 0 {
			return 0, 0, "", false
		}
		rest := strings.TrimLeft(line[end+1:], " \t")
		if strings.HasPrefix(rest, ":") {
			from = end + 1 // a quoted key: its value comes next
			continue
		}
		last := strings.LastIndexByte(line, '"')
		if rest == "" || strings.ContainsRune("#,]}", rune(rest[0])) || last <= end {
			return 0, 0, "", false
		}
		inner := strings.ReplaceAll(line[start+1:last], `\"`, `"`)
		return start, end, strings.TrimLeft(line[:start], " \t") + `"` + strings.ReplaceAll(inner, `"`, `\"`) + `"` + line[last+1:], true
	}
}

// closingQuote is the offset of the quote that closes the double-quoted
// string opening at line[start], -1 if the line has none.
func closingQuote(line string, start int) int {
	for i := start + 1; i < len(line); i++ {
		switch line[i] {
		case '\\':
			i++
		case '"':
			return i
		}
	}
	return -1
}

// findDuplicateKey returns the first key that repeats within a mapping.
// yaml.v3's Node API does not report these, and a silently dropped key is
// exactly the kind of mistake a pipeline author cannot see.
func findDuplicateKey(n *yaml.Node, depth int) *yaml.Node {
	if n == nil || depth > 200 {
		return nil
	}
	if n.Kind == yaml.MappingNode {
		seen := map[string]bool{}
		for i := 0; i+1 < len(n.Content); i += 2 {
			k := n.Content[i]
			if k.Kind == yaml.ScalarNode {
				if seen[k.Value] {
					return k
				}
				seen[k.Value] = true
			}
		}
	}
	for _, c := range n.Content {
		if d := findDuplicateKey(c, depth+1); d != nil {
			return d
		}
	}
	return nil
}
