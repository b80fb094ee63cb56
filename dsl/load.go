package dsl

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"net/url"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"unicode/utf8"

	"github.com/expr-lang/expr"
	"gopkg.in/yaml.v3"

	"github.com/flowrun/flowrun/internal/confined"
)

// Load reads, checks and compiles the pipeline file at path, together with
// every file it references (prompts, schemas, called pipelines). It returns
// the compiled pipeline, or nil and every diagnostic found, sorted. Warnings
// may accompany a successful load.
func Load(path string) (*Pipeline, Diagnostics) {
	src, err := os.ReadFile(path)
	if err != nil {
		return nil, Diagnostics{{Pos: Pos{File: path}, Message: fileError(err)}}
	}
	return LoadSource(path, src)
}

// LoadSource is Load for a file whose bytes are already read. Relative
// references resolve against the directory of path.
func LoadSource(path string, src []byte) (*Pipeline, Diagnostics) {
	return load(path, src, Options{})
}

// LoadWith is Load with options: validate lists MCP servers' tools, and a
// program may give pipelines other expression functions than the default.
func LoadWith(path string, opts Options) (*Pipeline, Diagnostics) {
	src, err := os.ReadFile(path)
	if err != nil {
		return nil, Diagnostics{{Pos: Pos{File: path}, Message: fileError(err)}}
	}
	return load(path, src, opts)
}

func load(path string, src []byte, opts Options) (*Pipeline, Diagnostics) {
	root, _ := filepath.Abs(filepath.Dir(path))
	l := &loader{root: root, opts: opts, loaded: map[string]*Pipeline{}, sources: map[string][]string{}, read: map[string]string{}}
	p := l.load(path, src, nil)
	if p != nil {
		p.Sources, p.Hash = l.bundle()
	}
	ds := l.diags.sorted()
	for i := range ds {
		ds[i].Pos = l.clamp(ds[i].Pos)
		ds[i].Line = l.sourceLine(ds[i].Pos)
	}
	if ds.HasErrors() {
		return nil, ds
	}
	return p, ds
}

func fileError(err error) string {
	if errors.Is(err, os.ErrNotExist) {
		return "no such file"
	}
	var pe *os.PathError
	if errors.As(err, &pe) {
		return pe.Err.Error()
	}
	return err.Error()
}

// missingFile describes why the file rel, named relative to dir, could not
// be read, and suggests a similarly named file beside it.
func missingFile(dir, rel string, err error) string {
	path := filepath.Join(dir, rel)
	hint := ""
	if errors.Is(err, os.ErrNotExist) {
		var names []string
		entries, _ := os.ReadDir(filepath.Dir(path))
		for _, e := range entries {
			names = append(names, filepath.ToSlash(filepath.Join(filepath.Dir(rel), e.Name())))
		}
		if best := closest(filepath.ToSlash(rel), names); best != "" {
			hint = fmt.Sprintf("; did you mean %q?", best)
		}
	}
	return fmt.Sprintf("%s (looked for %s%s)", fileError(err), path, hint)
}

// loader holds what is shared by a pipeline and the pipelines it calls.
type loader struct {
	root    string // absolute directory of the pipeline loaded first, which no file may leave
	diags   Diagnostics
	sources map[string][]string  // display path -> lines, for carets
	loaded  map[string]*Pipeline // absolute path -> compiled pipeline
	stack   []string             // absolute paths being loaded, to catch call cycles
	read    map[string]string    // every file read, by Source.Path
	opts    Options
}

// clamp moves a position past the last line, where yaml.v3 puts the end of
// a file that does not end with a newline, to the end of the last line.
func (l *loader) clamp(p Pos) Pos {
	lines, ok := l.sources[p.File]
	if ok && p.Line > len(lines) {
		last := strings.TrimRight(lines[len(lines)-1], "\r")
		p.Line, p.Col = len(lines), utf8.RuneCountInString(last)+1
	}
	return p
}

func (l *loader) sourceLine(p Pos) string {
	lines := l.sources[p.File]
	if p.Line < 1 || p.Line > len(lines) {
		return ""
	}
	return strings.TrimRight(lines[p.Line-1], "\r")
}

func (l *loader) errorf(p Pos, format string, args ...any) {
	l.diags = append(l.diags, Diagnostic{Pos: p, Severity: Error, Message: fmt.Sprintf(format, args...)})
}

func (l *loader) warnf(p Pos, format string, args ...any) {
	l.diags = append(l.diags, Diagnostic{Pos: p, Severity: Warning, Message: fmt.Sprintf(format, args...)})
}

// file is the state of loading one pipeline file.
type file struct {
	l     *loader
	name  string // display path
	dir   string
	src   string
	p     *Pipeline
	root  *yaml.Node
	ids   map[string]*yaml.Node // node id -> the id's value node
	idSet []string
	state map[string]bool
	opts  []expr.Option
	// schemaErrs are the instance locations the pipeline schema rejected.
	schemaErrs []string
	// pending are the expressions compiled so far, for the resolve phase.
	pending   []*pendingExpr
	pendingOf map[*Expr]*pendingExpr
}

var yamlLineRE = regexp.MustCompile(`(?s)^line (\d+): (.*)$`)

// lineBreakRE matches what yaml.v3 counts as a line break, so that its line
// numbers index the lines of splitLines.
var lineBreakRE = regexp.MustCompile("\r\n|[\r\n\u0085\u2028\u2029]")

func splitLines(s string) []string {
	return lineBreakRE.Split(s, -1)
}

func (l *loader) load(name string, src []byte, at *Pos) (p *Pipeline) {
	abs, _ := filepath.Abs(name)
	for _, s := range l.stack {
		if s == abs {
			chain := append(append([]string{}, l.stack...), abs)
			l.errorf(*at, "call cycle: %s", strings.Join(relAll(chain), " -> "))
			return nil
		}
	}
	if p, ok := l.loaded[abs]; ok {
		return p
	}
	l.stack = append(l.stack, abs)
	defer func() { l.stack = l.stack[:len(l.stack)-1] }()

	l.record(abs, src)
	text := string(src)
	l.sources[name] = splitLines(text)
	sum := sha256.Sum256(src)
	base, _ := filepath.Rel(l.root, filepath.Dir(abs))
	f := &file{l: l, name: name, dir: filepath.Dir(name), src: text,
		p: &Pipeline{Path: name, Dir: filepath.Dir(name), Hash: hex.EncodeToString(sum[:]),
			Files: confined.Dir{Root: l.root, Base: base, MaxBytes: DefaultMaxFileBytes, Limit: "limits.max_file_kb"}},
		pendingOf: map[*Expr]*pendingExpr{}}
	f.p.functions = l.opts.Functions
	f.opts = append([]expr.Option{expr.Env(Env{})}, l.opts.Functions.options(f.dir, &f.p.Files)...)

	root, ok := f.parseYAML(src)
	if !ok {
		return nil
	}
	f.root = root
	doc, ptrs := toDocument(root)
	if ptrs.tooBig {
		if ptrs.bigAlias != nil {
			l.errorf(f.pos(ptrs.bigAlias), "this YAML alias expands the document to too many values; flowrun reads at most %d", maxValues)
		} else {
			l.errorf(f.pos(root), "the document has too many values; flowrun reads at most %d", maxValues)
		}
		return nil
	}
	f.checkSchema(doc, ptrs)
	before := len(l.diags)
	f.decode()
	f.resolve()
	if hasErrorsSince(l.diags, before) {
		return nil
	}
	l.loaded[abs] = f.p
	return f.p
}

func hasErrorsSince(ds Diagnostics, i int) bool {
	return ds[i:].HasErrors()
}

func relAll(paths []string) []string {
	wd, _ := os.Getwd()
	out := make([]string, len(paths))
	for i, p := range paths {
		if r, err := filepath.Rel(wd, p); err == nil {
			p = r
		}
		out[i] = p
	}
	return out
}

func (f *file) parseYAML(src []byte) (root *yaml.Node, ok bool) {
	defer func() {
		// yaml.v3 has panicked on malformed input before; a broken file must
		// never take the process down.
		if r := recover(); r != nil {
			f.l.errorf(Pos{File: f.name, Line: 1, Col: 1}, "invalid YAML: %v", r)
			root, ok = nil, false
		}
	}()
	dec := yaml.NewDecoder(bytes.NewReader(src))
	var doc yaml.Node
	if err := dec.Decode(&doc); err != nil {
		if err == io.EOF {
			f.l.errorf(Pos{File: f.name, Line: 1, Col: 1}, "the file is empty: a pipeline needs at least version, name and nodes")
			return nil, false
		}
		f.yamlError(err)
		return nil, false
	}
	var extra yaml.Node
	if err := dec.Decode(&extra); err == nil {
		f.l.errorf(f.pos(&extra), "a pipeline file holds one YAML document; remove this second one (after ---)")
		return nil, false
	} else if err != io.EOF {
		f.yamlError(err)
		return nil, false
	}
	if len(doc.Content) == 0 || isEmptyNode(doc.Content[0]) {
		f.l.errorf(Pos{File: f.name, Line: 1, Col: 1}, "the file is empty: a pipeline needs at least version, name and nodes")
		return nil, false
	}
	if dup := findDuplicateKey(doc.Content[0], 0); dup != nil {
		f.l.errorf(f.pos(dup), "key %q is already defined in this mapping", dup.Value)
		return nil, false
	}
	return doc.Content[0], true
}

// isEmptyNode reports whether n is the null a document holding nothing but
// "---" and comments parses to.
func isEmptyNode(n *yaml.Node) bool {
	return n.Kind == yaml.ScalarNode && n.ShortTag() == "!!null" && n.Value == "" && n.Style == 0
}

func (f *file) yamlError(err error) {
	line, msg := yamlErrorLine(err)
	// yaml.v3 reports where some enclosing construct began, counting lines
	// from 0 or from 1 depending on the error, often far from the mistake.
	// The mistake is on the first line from which every longer prefix of the
	// file fails to parse (a prefix failing earlier only cut a multi-line
	// value short), and that prefix's error describes it.
	lines := f.l.sources[f.name]
	if k, kerr := firstBadLine(f.src); k > 0 {
		line, msg = k, yamlErrorText(kerr)
	}
	if line < 1 || line > len(lines) {
		f.l.errorf(Pos{File: f.name, Line: 1, Col: 1}, "invalid YAML: %s", msg)
		return
	}
	col, msg := explainYAMLError(lines[line-1], msg)
	f.l.errorf(Pos{File: f.name, Line: line, Col: col}, "invalid YAML: %s", msg)
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
	case strings.HasSuffix(msg, "or ']'"):
		at, msg = strings.IndexByte(line, '['), msg+": close this [ list, and quote items that contain ': ', '?' or ','"
	case strings.HasSuffix(msg, "or '}'"):
		at, msg = strings.IndexByte(line, '{'), msg+": close this { mapping, and quote values that contain ': ', '?' or ','"
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
		msg += ": check this line's indentation"
	}
	if at < 0 {
		at = len(line) - len(strings.TrimLeft(line, " \t"))
	}
	return utf8.RuneCountInString(line[:at]) + 1, msg
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

func (f *file) pos(n *yaml.Node) Pos {
	return Pos{File: f.name, Line: n.Line, Col: n.Column}
}

// maxValues bounds how many values a document may expand to, so that
// nested YAML aliases ("billion laughs") cannot exhaust memory. A pipeline
// is configuration, a few thousand values at most; at this bound a hostile
// file costs tens of milliseconds, not half a second.
const maxValues = 100_000

// pointers maps JSON pointers into the document back to YAML nodes.
type pointers struct {
	value  map[string]*yaml.Node
	key    map[string]*yaml.Node
	count  int
	tooBig bool
	// bigAlias is the outermost alias being expanded when tooBig was set:
	// the one to point at.
	bigAlias *yaml.Node
}

// toDocument converts YAML to plain Go values for the JSON-schema check,
// recording where each value came from.
func toDocument(root *yaml.Node) (any, *pointers) {
	ps := &pointers{value: map[string]*yaml.Node{}, key: map[string]*yaml.Node{}}
	v := ps.convert(root, "", 0)
	return v, ps
}

func (ps *pointers) convert(n *yaml.Node, ptr string, depth int) any {
	ps.count++
	if ps.count > maxValues || depth > 10_000 {
		ps.tooBig = true
		return nil
	}
	if _, ok := ps.value[ptr]; !ok {
		ps.value[ptr] = n
	}
	switch n.Kind {
	case yaml.AliasNode:
		if n.Alias == nil {
			return nil
		}
		v := ps.convert(n.Alias, ptr, depth+1)
		if ps.tooBig {
			ps.bigAlias = n
		}
		return v
	case yaml.DocumentNode:
		if len(n.Content) == 0 {
			return nil
		}
		return ps.convert(n.Content[0], ptr, depth+1)
	case yaml.SequenceNode:
		out := make([]any, 0, len(n.Content))
		for i, c := range n.Content {
			out = append(out, ps.convert(c, ptr+"/"+strconv.Itoa(i), depth+1))
			if ps.tooBig {
				return nil
			}
		}
		return out
	case yaml.MappingNode:
		out := make(map[string]any, len(n.Content)/2)
		for i := 0; i+1 < len(n.Content); i += 2 {
			k := n.Content[i]
			key := k.Value
			if k.Kind != yaml.ScalarNode {
				key = fmt.Sprintf("<%s key at line %d>", kindName(k), k.Line)
			}
			child := ptr + "/" + escapePointer(key)
			ps.key[child] = k
			out[key] = ps.convert(n.Content[i+1], child, depth+1)
			if ps.tooBig {
				return nil
			}
		}
		return out
	case yaml.ScalarNode:
		return scalarValue(n)
	}
	return nil
}

func kindName(n *yaml.Node) string {
	switch n.Kind {
	case yaml.MappingNode:
		return "mapping"
	case yaml.SequenceNode:
		return "list"
	}
	return "scalar"
}

// scalarValue resolves a scalar the way YAML 1.2's core schema does.
func scalarValue(n *yaml.Node) any {
	switch n.ShortTag() {
	case "!!null":
		return nil
	case "!!bool":
		var b bool
		if n.Decode(&b) == nil {
			return b
		}
	case "!!int":
		var i int
		if n.Decode(&i) == nil {
			return i
		}
		var fl float64
		if n.Decode(&fl) == nil {
			return fl
		}
	case "!!float":
		var fl float64
		if n.Decode(&fl) == nil {
			return fl
		}
	}
	return n.Value
}

// escapePointer escapes a JSON-pointer segment the way the schema
// validator writes instance locations, percent-encoding included, so that
// its locations can be looked up in pointers.
func escapePointer(s string) string {
	return url.PathEscape(strings.ReplaceAll(strings.ReplaceAll(s, "~", "~0"), "/", "~1"))
}

// get returns the key and value nodes for key in a mapping node, following
// aliases; nil when absent or when n is not a mapping.
func get(n *yaml.Node, key string) (k, v *yaml.Node) {
	n = deref(n)
	if n == nil || n.Kind != yaml.MappingNode {
		return nil, nil
	}
	for i := 0; i+1 < len(n.Content); i += 2 {
		if n.Content[i].Value == key {
			return n.Content[i], deref(n.Content[i+1])
		}
	}
	return nil, nil
}

func deref(n *yaml.Node) *yaml.Node {
	for i := 0; n != nil && n.Kind == yaml.AliasNode && i < 100; i++ {
		n = n.Alias
	}
	if n != nil && n.Kind == yaml.AliasNode {
		return nil
	}
	return n
}

// pairs returns a mapping's key/value node pairs in file order.
func pairs(n *yaml.Node) [][2]*yaml.Node {
	n = deref(n)
	if n == nil || n.Kind != yaml.MappingNode {
		return nil
	}
	out := make([][2]*yaml.Node, 0, len(n.Content)/2)
	for i := 0; i+1 < len(n.Content); i += 2 {
		out = append(out, [2]*yaml.Node{n.Content[i], deref(n.Content[i+1])})
	}
	return out
}

func items(n *yaml.Node) []*yaml.Node {
	n = deref(n)
	if n == nil || n.Kind != yaml.SequenceNode {
		return nil
	}
	out := make([]*yaml.Node, 0, len(n.Content))
	for _, c := range n.Content {
		out = append(out, deref(c))
	}
	return out
}

func str(n *yaml.Node) (string, bool) {
	if n == nil || n.Kind != yaml.ScalarNode || n.ShortTag() != "!!str" {
		return "", false
	}
	return n.Value, true
}

func intValue(n *yaml.Node) (int, bool) {
	if n == nil || n.Kind != yaml.ScalarNode || n.ShortTag() != "!!int" {
		return 0, false
	}
	var i int
	return i, n.Decode(&i) == nil
}

func floatValue(n *yaml.Node) (float64, bool) {
	if n == nil || n.Kind != yaml.ScalarNode || (n.ShortTag() != "!!int" && n.ShortTag() != "!!float") {
		return 0, false
	}
	var x float64
	return x, n.Decode(&x) == nil
}

func boolValue(n *yaml.Node) bool {
	var b bool
	if n == nil || n.Kind != yaml.ScalarNode || n.ShortTag() != "!!bool" {
		return false
	}
	return n.Decode(&b) == nil && b
}

// Plain converts a YAML subtree to plain Go values (maps, lists, strings,
// int, float64, bool, nil).
func Plain(n *yaml.Node) any {
	if n == nil {
		return nil
	}
	v, ps := toDocument(n)
	if ps.tooBig {
		return nil
	}
	return v
}
