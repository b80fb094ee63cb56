package promptfoo

import (
	"bytes"
	"context"
	"encoding/base64"
	"encoding/csv"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"path/filepath"
	"regexp"
	"slices"
	"sort"
	"strconv"
	"strings"

	"gopkg.in/yaml.v3"

	"github.com/flowrun/flowrun/dsl"
)

// looksLikeFile is promptfoo's test for a prompt or test string that names
// a file: file://, or one line with a path separator, a glob or an
// extension of two or three letters; a template ({{) or another scheme
// (://) is text.
func looksLikeFile(s string) bool {
	if strings.HasPrefix(s, "file://") {
		return true
	}
	if strings.ContainsAny(s, "\n") || strings.Contains(s, "{{") || strings.Contains(s, "://") {
		return false
	}
	n := len(s)
	return strings.ContainsAny(s, `/\*`) || n > 3 && s[n-3] == '.' || n > 4 && s[n-4] == '.'
}

// files are the names a reference stands for inside the configuration's
// directory: itself, or what its glob matches, in name order.
func (c *converter) files(n *yaml.Node, ref string) []string {
	name := strings.TrimPrefix(ref, "file://")
	if !strings.ContainsAny(name, "*?[") {
		return []string{name}
	}
	abs, err := filepath.Abs(c.dir)
	if err == nil {
		var matches []string
		matches, err = filepath.Glob(filepath.Join(abs, name))
		if err == nil && len(matches) > 0 {
			out := make([]string, 0, len(matches))
			for _, m := range matches {
				rel, _ := filepath.Rel(abs, m)
				out = append(out, rel)
			}
			sort.Strings(out)
			return out
		}
	}
	if err != nil {
		c.problem(n, "%s: not read: %v", ref, err)
	} else {
		c.problem(n, "%s: not read: the pattern matches no file in the configuration's directory %s", ref, c.dir)
	}
	return nil
}

// read reads a file a reference names, listing it where it is named when
// it cannot be read.
func (c *converter) read(ctx context.Context, n *yaml.Node, what, name string) ([]byte, bool) {
	b, err := readPromptFile(ctx, c.root, c.dir, name)
	if err != nil {
		if ctx.Err() == nil {
			c.problem(n, "%s %s: not read: %v", what, name, err)
		}
		return nil, false
	}
	return b, true
}

// within makes problems name the file a part came from while it is read;
// the returned function goes back to the file before.
func (c *converter) within(name string) func() {
	before := c.file
	c.file = filepath.Join(c.dir, name)
	return func() { c.file = before }
}

// parse reads YAML (or JSON, which YAML reads too) into its document node.
func parse(b []byte) (*yaml.Node, error) {
	var doc yaml.Node
	if err := yaml.Unmarshal(b, &doc); err != nil {
		return nil, err
	}
	if len(doc.Content) == 0 {
		return nil, errors.New("it is empty")
	}
	return doc.Content[0], nil
}

// testFile reads the tests of a CSV, YAML, JSON or JSONL file.
func (c *converter) testFile(ctx context.Context, n *yaml.Node, name string, base test) []test {
	ext := strings.ToLower(filepath.Ext(name))
	switch ext {
	case ".csv", ".yaml", ".yml", ".json", ".jsonl":
	default:
		c.problem(n, "tests %s: not converted (tests are read from CSV, YAML, JSON and JSONL files; generators and other sources are not)", name)
		return nil
	}
	b, ok := c.read(ctx, n, "tests", name)
	if !ok {
		return nil
	}
	defer c.within(name)()
	switch ext {
	case ".csv":
		return c.csvTests(b, base)
	case ".jsonl":
		var out []test
		for i, line := range bytes.Split(b, []byte("\n")) {
			if len(bytes.TrimSpace(line)) == 0 {
				continue
			}
			v, err := parse(line)
			if err != nil {
				c.problems = append(c.problems, Problem{File: c.file, Line: i + 1, Col: 1, What: fmt.Sprintf("test: not converted: not JSON: %v", err)})
				continue
			}
			shift(v, i)
			out = append(out, c.tests(ctx, &yaml.Node{Kind: yaml.SequenceNode, Content: []*yaml.Node{v}, Line: i + 1, Column: 1}, base)...)
		}
		return out
	}
	v, err := parse(b)
	if err != nil {
		line, col, msg := dsl.YAMLError(b, err)
		c.problems = append(c.problems, Problem{File: c.file, Line: line, Col: col, What: "tests: not read: not YAML or JSON: " + msg})
		return nil
	}
	return c.tests(ctx, v, base)
}

// shift moves a node read from one line of a file to that line.
func shift(n *yaml.Node, lines int) {
	n.Line += lines
	for _, k := range n.Content {
		shift(k, lines)
	}
}

// csvTests reads a CSV file of tests as promptfoo does: a header row, a
// test per row; columns are vars (text, as written), except __expected
// (__expected1, ...) and __description; others (__metric, __threshold,
// __prefix, ...) are listed.
func (c *converter) csvTests(b []byte, base test) []test {
	r := csv.NewReader(bytes.NewReader(bytes.TrimPrefix(b, []byte("\xef\xbb\xbf"))))
	r.FieldsPerRecord = -1
	header, err := r.Read()
	if err != nil {
		c.problems = append(c.problems, Problem{File: c.file, Line: 1, Col: 1, What: fmt.Sprintf("tests: not read: not CSV: %v", err)})
		return nil
	}
	at := func(line, col int, format string, args ...any) {
		c.problems = append(c.problems, Problem{File: c.file, Line: line, Col: col, What: fmt.Sprintf(format, args...)})
	}
	var out []test
	for {
		row, err := r.Read()
		if err != nil {
			if !errors.Is(err, io.EOF) {
				line, _ := r.FieldPos(0)
				at(line, 1, "tests: the rest of the file is not read: not CSV: %v", err)
			}
			break
		}
		line, _ := r.FieldPos(0)
		t := base.clone()
		for i, cell := range row {
			if i >= len(header) {
				at(line, i+1, "test: a cell beyond the header's %d columns: not converted", len(header))
				continue
			}
			col := strings.TrimSpace(header[i])
			switch {
			case col == "__description":
				t.description = cell
			case strings.HasPrefix(col, "__expected"):
				if strings.TrimSpace(cell) == "" {
					continue
				}
				_, cpos := r.FieldPos(i)
				if a, ok := c.expected(cell, line, cpos); ok {
					t.asserts = append(t.asserts, a)
				}
			case col == "__threshold":
				if f, err := strconv.ParseFloat(strings.TrimSpace(cell), 64); err == nil {
					t.threshold = &f
				}
			case strings.HasPrefix(col, "__"):
				if cell != "" {
					_, cpos := r.FieldPos(i)
					at(line, cpos, "test column %s: not converted", col)
				}
			default:
				t.vars[col] = cell
			}
		}
		out = append(out, t.filled())
	}
	return out
}

// expectedRE is promptfoo's shorthand for an assert in a CSV cell:
// [not-]TYPE[(THRESHOLD)]:VALUE.
var expectedRE = regexp.MustCompile(`^(not-)?([a-z][a-z-]*)(?:\((\d+(?:\.\d+)?)\))?(?::([\s\S]*))?$`)

// expected reads an __expected cell as promptfoo does: grade: and
// llm-rubric: are rubrics, javascript:, fn: and eval: scripts, TYPE:VALUE
// that assert, and any other text an equals.
func (c *converter) expected(cell string, line, col int) (assert, bool) {
	n := &yaml.Node{Kind: yaml.MappingNode, Line: line, Column: col}
	add := func(k string, v *yaml.Node) {
		n.Content = append(n.Content, &yaml.Node{Kind: yaml.ScalarNode, Value: k, Line: line, Column: col}, v)
	}
	scalar := func(s string) *yaml.Node {
		return &yaml.Node{Kind: yaml.ScalarNode, Tag: "!!str", Value: s, Line: line, Column: col}
	}
	typ, value := "equals", cell
	for _, p := range []struct{ prefix, typ string }{{"grade:", "llm-rubric"}, {"llm-rubric:", "llm-rubric"}, {"javascript:", "javascript"}, {"fn:", "javascript"}, {"eval:", "javascript"}, {"python:", "python"}} {
		if rest, ok := strings.CutPrefix(cell, p.prefix); ok {
			typ, value = p.typ, strings.TrimSpace(rest)
			break
		}
	}
	if typ == "equals" {
		if m := expectedRE.FindStringSubmatch(cell); m != nil && (known(m[2]) || slices.Contains(otherAssertTypes, m[2])) && (m[4] != "" || strings.Contains(cell, ":") || noValue(m[2])) {
			typ, value = m[1]+m[2], m[4]
			if m[3] != "" {
				add("threshold", &yaml.Node{Kind: yaml.ScalarNode, Tag: "!!float", Value: m[3], Line: line, Column: col})
			}
		}
	}
	add("type", scalar(typ))
	base := strings.TrimPrefix(typ, "not-")
	switch {
	case slices.Contains(listValued, base):
		list := &yaml.Node{Kind: yaml.SequenceNode, Line: line, Column: col}
		for _, part := range strings.Split(value, ",") {
			list.Content = append(list.Content, scalar(strings.TrimSpace(part)))
		}
		add("value", list)
	case noValue(base) && value == "":
	case base == "cost" || base == "latency":
	default:
		add("value", scalar(value))
	}
	return c.kept(n)
}

// otherAssertTypes are promptfoo's assert types the importer does not
// convert: a CSV cell TYPE:VALUE with one is that assert (and listed),
// not an equals.
var otherAssertTypes = []string{"javascript", "python", "ruby", "webhook", "answer-relevance", "bleu", "classifier",
	"context-faithfulness", "context-recall", "context-relevance", "contains-html", "contains-sql", "contains-xml",
	"factuality", "finish-reason", "g-eval", "gleu", "guardrails", "is-html", "is-refusal", "is-sql", "is-xml",
	"is-valid-function-call", "is-valid-openai-function-call", "is-valid-openai-tools-call", "meteor",
	"model-graded-closedqa", "model-graded-factuality", "moderation", "perplexity", "perplexity-score", "pi",
	"select-best", "word-count"}

func known(typ string) bool {
	_, ok := checks[typ]
	return ok || typ == "llm-rubric"
}

func noValue(typ string) bool { return typ == "is-json" || typ == "contains-json" }

// varFile is a file:// var's value as promptfoo gives it: the file's
// text, YAML turned into JSON text.
func (c *converter) varFile(ctx context.Context, n *yaml.Node, name, ref string) (any, bool) {
	path := strings.TrimPrefix(ref, "file://")
	switch strings.ToLower(filepath.Ext(path)) {
	case ".js", ".mjs", ".cjs", ".ts", ".py":
		c.problem(n, "var %s: %s: not converted (a value computed by a script is not)", name, ref)
		return nil, false
	case ".pdf", ".mp3", ".wav", ".mp4", ".webm", ".ogg", ".mov", ".avi", ".wmv", ".mkv", ".m4v":
		c.problem(n, "var %s: %s: not converted (audio, video and documents as vars are not; images are)", name, ref)
		return nil, false
	}
	if strings.ContainsAny(path, "*?[") {
		c.problem(n, "var %s: %s: not converted (a glob in a var is not; name one file)", name, ref)
		return nil, false
	}
	b, ok := c.read(ctx, n, "var "+name+":", path)
	if !ok {
		return nil, false
	}
	switch strings.ToLower(filepath.Ext(path)) {
	case ".jpg", ".jpeg", ".png", ".gif", ".bmp", ".webp", ".svg":
		// promptfoo gives an image as its bytes in base64, for a prompt to
		// put in a data: URL.
		return base64.StdEncoding.EncodeToString(b), true
	case ".yaml", ".yml":
		var v any
		if err := yaml.Unmarshal(b, &v); err != nil {
			c.problem(n, "var %s: %s: not YAML: %v", name, ref, err)
			return nil, false
		}
		j, err := json.Marshal(v)
		if err != nil {
			c.problem(n, "var %s: %s: not converted: %v", name, ref, err)
			return nil, false
		}
		return string(j), true
	}
	return string(b), true
}
