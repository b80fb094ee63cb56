package dsl

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"time"

	"github.com/expr-lang/expr"
	"gopkg.in/yaml.v3"
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
	l := &loader{loaded: map[string]*Pipeline{}, sources: map[string][]string{}}
	p := l.load(path, src, nil)
	ds := l.diags.sorted()
	for i := range ds {
		ds[i].Line = l.sourceLine(ds[i].Pos)
	}
	if ds.HasErrors() {
		return nil, ds
	}
	return p, ds
}

func fileError(err error) string {
	var pe *os.PathError
	if errors.As(err, &pe) {
		if errors.Is(err, os.ErrNotExist) {
			return "no such file"
		}
		return pe.Err.Error()
	}
	return err.Error()
}

// loader holds what is shared by a pipeline and the pipelines it calls.
type loader struct {
	diags   Diagnostics
	sources map[string][]string  // display path -> lines, for carets
	loaded  map[string]*Pipeline // absolute path -> compiled pipeline
	stack   []string             // absolute paths being loaded, to catch call cycles
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
}

var yamlLineRE = regexp.MustCompile(`^yaml: line (\d+): (.*)$`)

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

	text := string(src)
	l.sources[name] = strings.Split(text, "\n")
	sum := sha256.Sum256(src)
	f := &file{l: l, name: name, dir: filepath.Dir(name), src: text,
		p: &Pipeline{Path: name, Dir: filepath.Dir(name), Hash: hex.EncodeToString(sum[:])}}
	f.opts = append([]expr.Option{expr.Env(Env{})}, helperFunctions(f.dir)...)

	root, ok := f.parseYAML(src)
	if !ok {
		return nil
	}
	f.root = root
	doc, ptrs := toDocument(root)
	if ptrs.tooBig {
		l.errorf(f.pos(root), "the document expands to too many values (YAML aliases?); flowrun reads at most %d", maxValues)
		return nil
	}
	f.checkSchema(doc, ptrs)
	before := len(l.diags)
	f.decode()
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
	if len(doc.Content) == 0 {
		f.l.errorf(Pos{File: f.name, Line: 1, Col: 1}, "the file is empty: a pipeline needs at least version, name and nodes")
		return nil, false
	}
	if dup := findDuplicateKey(doc.Content[0], 0); dup != nil {
		f.l.errorf(f.pos(dup), "key %q is already defined in this mapping", dup.Value)
		return nil, false
	}
	return doc.Content[0], true
}

func (f *file) yamlError(err error) {
	msg := err.Error()
	var te *yaml.TypeError
	if errors.As(err, &te) && len(te.Errors) > 0 {
		msg = te.Errors[0]
	}
	m := yamlLineRE.FindStringSubmatch(msg)
	if m == nil {
		f.l.errorf(Pos{File: f.name, Line: 1, Col: 1}, "invalid YAML: %s", strings.TrimPrefix(msg, "yaml: "))
		return
	}
	line, _ := strconv.Atoi(m[1])
	col := 1
	if lines := f.l.sources[f.name]; line >= 1 && line <= len(lines) {
		col = len(lines[line-1]) - len(strings.TrimLeft(lines[line-1], " \t")) + 1
	}
	f.l.errorf(Pos{File: f.name, Line: line, Col: col}, "invalid YAML: %s", m[2])
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
// nested YAML aliases ("billion laughs") cannot exhaust memory.
const maxValues = 1_000_000

// pointers maps JSON pointers into the document back to YAML nodes.
type pointers struct {
	value  map[string]*yaml.Node
	key    map[string]*yaml.Node
	count  int
	tooBig bool
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
		return ps.convert(n.Alias, ptr, depth+1)
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

func escapePointer(s string) string {
	return strings.ReplaceAll(strings.ReplaceAll(s, "~", "~0"), "/", "~1")
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

// duration parses a duration field; the schema has already checked its shape.
func (f *file) duration(n *yaml.Node) time.Duration {
	s, ok := str(n)
	if !ok {
		return 0
	}
	d, err := time.ParseDuration(s)
	if err != nil || d <= 0 {
		if err == nil {
			f.l.errorf(f.pos(n), "duration %q must be greater than zero", s)
		}
		return 0
	}
	return d
}
