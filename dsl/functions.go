package dsl

import (
	"context"
	"encoding/json"
	"fmt"
	"path/filepath"
	"slices"
	"sort"
	"strings"
	"sync"

	"github.com/expr-lang/expr"

	"github.com/flowrun/flowrun/arc"
	"github.com/flowrun/flowrun/codefence"
	"github.com/flowrun/flowrun/internal/confined"
	"github.com/flowrun/flowrun/jsonvalue"
)

// Function is an expression function: its name, the signature and text
// the reference shows, the signatures expr-lang checks calls against, and
// its implementation for one pipeline.
type Function struct {
	Name      string
	Signature string // as the reference shows it: "extract_code(text, lang?) string"
	Doc       string
	// Types are expr-lang signatures, one per accepted form:
	// new(func(string) string), ...
	Types []any
	// Bind makes the implementation for one pipeline file.
	Bind func(env FunctionEnv) func(args ...any) (any, error)
}

// FunctionEnv is what a function may know of the pipeline that calls it.
type FunctionEnv struct {
	Dir   string        // the pipeline file's directory, for positions
	Files *confined.Dir // the pipeline's files (read_file, render)
}

// Functions is a set of expression functions; the zero Functions is the
// empty set. It is a value: With makes a new set and leaves the old one as
// it was, and a pipeline keeps the set it was loaded with, so that no load
// sees another's functions.
type Functions struct {
	list []Function // sorted by name
}

// defaultFunctions is the set pipelines load with unless Options name
// another: the DSL's own functions and arc's, and the checks score:
// metrics use (functions_eval.go).
var defaultFunctions = func() Functions {
	fs, err := Functions{}.With(append(builtinFunctions(), evalFunctions...)...)
	if err != nil {
		panic(err)
	}
	return fs
}()

// DefaultFunctions is the set of expression functions every front end
// loads pipelines with: json, fromJSON, extract_code, read_file, render
// and the ARC functions.
func DefaultFunctions() Functions { return defaultFunctions }

// With is fs with fns added. A name already in the set is an error.
func (fs Functions) With(fns ...Function) (Functions, error) {
	list := slices.Clone(fs.list)
	for _, fn := range fns {
		if slices.ContainsFunc(list, func(have Function) bool { return have.Name == fn.Name }) {
			return fs, fmt.Errorf("expression function %s is defined twice", fn.Name)
		}
		list = append(list, fn)
	}
	sort.Slice(list, func(i, j int) bool { return list[i].Name < list[j].Name })
	return Functions{list: list}, nil
}

// List is the set's functions, sorted by name.
func (fs Functions) List() []Function { return slices.Clone(fs.list) }

// options binds every function of the set for one pipeline file.
func (fs Functions) options(dir string, files *confined.Dir) []expr.Option {
	env := FunctionEnv{Dir: dir, Files: files}
	var opts []expr.Option
	for _, fn := range fs.list {
		opts = append(opts, expr.Function(fn.Name, fn.Bind(env), fn.Types...))
	}
	return append(opts, guardOptions()...)
}

// builtinFunctions are the functions of the default set.
func builtinFunctions() []Function {
	return []Function{
		{Name: "json", Signature: "json(value) string", Doc: "The value as compact JSON text.",
			Types: []any{new(func(any) string)},
			Bind: func(FunctionEnv) func(...any) (any, error) {
				return func(args ...any) (any, error) {
					b, err := json.Marshal(args[0])
					return string(b), err
				}
			}},
		{Name: "fromJSON", Signature: "fromJSON(text) any", Doc: "Parses JSON text; integral numbers become integers.",
			Types: []any{new(func(string) any)},
			Bind: func(FunctionEnv) func(...any) (any, error) {
				return func(args ...any) (any, error) {
					v, err := jsonvalue.Decode([]byte(args[0].(string)))
					if err != nil {
						return nil, fmt.Errorf("fromJSON: %w", err)
					}
					return v, nil
				}
			}},
		{Name: "extract_code", Signature: "extract_code(text, lang?) string",
			Doc:   "The first fenced code block of a model's reply (in language lang, when given); an error when there is none.",
			Types: []any{new(func(string) string), new(func(string, string) string)},
			Bind: func(FunctionEnv) func(...any) (any, error) {
				return func(args ...any) (any, error) {
					lang := ""
					if len(args) > 1 {
						lang = args[1].(string)
					}
					return codefence.Block(args[0].(string), lang)
				}
			}},
		{Name: "read_file", Signature: "read_file(path) string",
			Doc:   "The text of a file inside the pipeline directory, at most limits.max_file_kb. A literal path is checked when the pipeline loads.",
			Types: []any{new(func(string) string)},
			Bind: func(env FunctionEnv) func(...any) (any, error) {
				return func(args ...any) (any, error) { return readFile(env.Files, args[0].(string)) }
			}},
		{Name: "render", Signature: "render(path, vars) string",
			Doc:   "Renders a template file inside the pipeline directory; its ${{ }} see vars as the names they read.",
			Types: []any{new(func(string, map[string]any) string)},
			Bind: func(env FunctionEnv) func(...any) (any, error) {
				r := &renderer{dir: env.Dir, files: env.Files}
				return func(args ...any) (any, error) {
					vars, _ := args[1].(map[string]any)
					return r.render(args[0].(string), vars)
				}
			}},
		{Name: "grid_text", Signature: "grid_text(grid) string", Doc: "An ARC grid as rows of digits, one row per line.",
			Types: []any{new(func(any) string)},
			Bind: func(FunctionEnv) func(...any) (any, error) {
				return func(args ...any) (any, error) { return arc.GridText(args[0]) }
			}},
		{Name: "grid_diff", Signature: "grid_diff(expected, actual) string",
			Doc:   "Where a produced ARC grid differs from the expected one, for a prompt: the cells both have as a grid, . where they agree and expected/got where not; a size mismatch or a null actual said in words.",
			Types: []any{new(func(any, any) string)},
			Bind: func(FunctionEnv) func(...any) (any, error) {
				return func(args ...any) (any, error) { return arc.Diff(args[0], args[1]) }
			}},
		{Name: "arc_report", Signature: "arc_report(outputs, task) object",
			Doc:   "Scores what a transform produced for each input of an ARC task: per pair match, size, palette and pixels off; totals, solved flags and a text report.",
			Types: []any{new(func(any, any) map[string]any)},
			Bind: func(FunctionEnv) func(...any) (any, error) {
				return func(args ...any) (any, error) { return arc.Report(args[0], args[1]) }
			}},
		{Name: "arc_augment", Signature: "arc_augment(task) object",
			Doc:   "An ARC task with rotated and flipped copies of its training pairs added.",
			Types: []any{new(func(any) map[string]any)},
			Bind: func(FunctionEnv) func(...any) (any, error) {
				return func(args ...any) (any, error) { return arc.Augment(args[0]) }
			}},
		{Name: "arc_png", Signature: "arc_png(grid) string",
			Doc:   "An ARC grid drawn in the ARC palette, as a PNG data URL for images:.",
			Types: []any{new(func(any) string)},
			Bind: func(FunctionEnv) func(...any) (any, error) {
				return func(args ...any) (any, error) { return arc.PNG(args[0]) }
			}},
	}
}

// readFile is read_file in expressions: the whole file, as text.
// Expressions have no context, so a read is bounded by the size cap alone.
func readFile(files *confined.Dir, name string) (string, error) {
	b, err := files.ReadFile(context.Background(), name)
	if err != nil {
		return "", fmt.Errorf("read_file %q: %w", name, err)
	}
	return string(b), nil
}

// renderer compiles each template file once and renders it with the given
// variables as its whole environment.
type renderer struct {
	dir   string
	files *confined.Dir
	mu    sync.Mutex
	cache map[string]*Template
}

func (r *renderer) render(name string, vars map[string]any) (string, error) {
	r.mu.Lock()
	t, ok := r.cache[name]
	r.mu.Unlock()
	if !ok {
		src, err := readFile(r.files, name)
		if err != nil {
			return "", fmt.Errorf("render: %w", err)
		}
		t, err = compileVarsTemplate(filepath.Join(r.dir, name), src)
		if err != nil {
			return "", fmt.Errorf("render: %w", err)
		}
		r.mu.Lock()
		if r.cache == nil {
			r.cache = map[string]*Template{}
		}
		r.cache[name] = t
		r.mu.Unlock()
	}
	var b strings.Builder
	for _, p := range t.parts {
		if p.expr == nil {
			b.WriteString(p.text)
			continue
		}
		v, err := runProgram(p.expr.prog, vars)
		if err != nil {
			return "", fmt.Errorf("render %s: `%s`: %w", p.expr.Pos, p.expr.Src, err)
		}
		b.WriteString(Stringify(v))
	}
	return b.String(), nil
}

// compileVarsTemplate compiles a template whose expressions see only the
// variables passed to render.
func compileVarsTemplate(file, src string) (*Template, error) {
	spans, err := splitTemplate(src)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", file, err)
	}
	t := &Template{}
	for _, s := range spans {
		if !s.isExpr {
			t.parts = append(t.parts, templatePart{text: s.text})
			continue
		}
		prog, err := expr.Compile(s.text, append(guardOptions(), expr.AllowUndefinedVariables())...)
		if err != nil {
			return nil, fmt.Errorf("%s: `%s`: %w", file, s.text, err)
		}
		t.parts = append(t.parts, templatePart{expr: &Expr{Src: s.text, Pos: offsetPos(file, src, s.offset), prog: prog}})
	}
	return t, nil
}

// templateSpan is a piece of a template: literal text, or the source of one
// ${{ }} expression with its byte offset in the template.
type templateSpan struct {
	text   string
	offset int
	isExpr bool
}

// splitTemplate cuts a string into literal text and ${{ }} expressions. A
// "}}" inside a quoted string in the expression does not close it.
func splitTemplate(s string) ([]templateSpan, error) {
	var spans []templateSpan
	i := 0
	for {
		start := strings.Index(s[i:], "${{")
		if start < 0 {
			if i < len(s) {
				spans = append(spans, templateSpan{text: s[i:], offset: i})
			}
			return spans, nil
		}
		start += i
		if start > i {
			spans = append(spans, templateSpan{text: s[i:start], offset: i})
		}
		end := closingBraces(s, start+3)
		if end < 0 {
			return spans, &templateError{offset: start, msg: "unterminated ${{: add the closing }}"}
		}
		inner := s[start+3 : end]
		lead := len(inner) - len(strings.TrimLeft(inner, " \t\r\n"))
		spans = append(spans, templateSpan{text: strings.TrimSpace(inner), offset: start + 3 + lead, isExpr: true})
		if strings.TrimSpace(inner) == "" {
			return spans, &templateError{offset: start, msg: "empty ${{ }}: put an expression inside"}
		}
		i = end + 2
	}
}

type templateError struct {
	offset int
	msg    string
}

func (e *templateError) Error() string { return e.msg }

func closingBraces(s string, from int) int {
	var quote byte
	for j := from; j < len(s); j++ {
		c := s[j]
		switch {
		case quote != 0:
			if c == '\\' {
				j++
			} else if c == quote {
				quote = 0
			}
		case c == '"' || c == '\'' || c == '`':
			quote = c
		case c == '}' && j+1 < len(s) && s[j+1] == '}':
			return j
		}
	}
	return -1
}

// offsetPos converts a byte offset in a whole file's text to a position.
func offsetPos(file, src string, offset int) Pos {
	line, col := 1, 1
	for _, r := range src[:min(offset, len(src))] {
		if r == '\n' {
			line++
			col = 1
		} else {
			col++
		}
	}
	return Pos{File: file, Line: line, Col: col}
}
