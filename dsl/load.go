package dsl

import (
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"os"
	"path/filepath"
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

// load runs the phases on one file, in order: syntax (yamlsyntax.go), the
// JSON schema (schema.go, on the plain values yamlnode.go makes), decode
// and resolve. It returns the file's pipeline, or nil when a phase found
// an error. at is where a calling pipeline names this one.
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
	f := &file{l: l, name: name, dir: filepath.Dir(name),
		p: &Pipeline{Path: name, Dir: filepath.Dir(name), Hash: hex.EncodeToString(sum[:]),
			Files: confined.Dir{Root: l.root, Base: base, MaxBytes: DefaultMaxFileBytes, Limit: "limits.max_file_kb"}},
		pendingOf: map[*Expr]*pendingExpr{}}
	f.p.functions = l.opts.Functions
	f.opts = append([]expr.Option{expr.Env(Env{})}, l.opts.Functions.options(f.dir, &f.p.Files)...)

	root, ok := l.parseYAML(name, src)
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

func (f *file) pos(n *yaml.Node) Pos {
	return Pos{File: f.name, Line: n.Line, Col: n.Column}
}
