package dsl

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"reflect"
	"regexp"
	"slices"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/expr-lang/expr"
	"github.com/expr-lang/expr/ast"
	exprfile "github.com/expr-lang/expr/file"
	"github.com/santhosh-tekuri/jsonschema/v5"
	"gopkg.in/yaml.v3"

	"github.com/flowrun/flowrun/internal/confined"
)

// builtinTools are the tools every agent may use without declaring them.
var builtinTools = []string{"python_execute", "code_execute", "read_file", "http_get"}

// scope says which loop and map variables an expression may use.
type scope struct {
	inLoop   bool // break and continue are allowed
	loopVars bool // loop.* is defined: inside a loop, or a map or parallel branch inside one
	inMap    bool // item and index are defined
	// tool is set while compiling an llm tool's templates: inputs are the
	// tool's parameters, and state and nodes are out of reach.
	tool *Tool
	// node is the node whose field is being compiled (nil for outputs and
	// memories); mapNode is the map whose item and index are in scope.
	node, mapNode *Node
	// maybeText marks a plain string in an expression field: when it does
	// not compile, the author may have meant the text itself.
	maybeText bool
	// afterRun marks the node's own set:, which reads its output.
	afterRun bool
	// score marks a metric of score:, which sees outputs, item and run.
	score bool
}

// decode builds the typed pipeline from the YAML tree. The schema has been
// checked already, but decode must not trust it: it reads only values of
// the right shape and leaves the rest to the schema's diagnostics.
func (f *file) decode() {
	p, root := f.p, f.root
	if s, ok := str(valueOf(root, "name")); ok {
		p.Name = s
	}
	if s, ok := str(valueOf(root, "description")); ok {
		p.Description = s
	}
	for _, e := range items(valueOf(root, "env")) {
		if s, ok := str(e); ok {
			p.Env = append(p.Env, s)
		}
	}
	f.state = map[string]bool{}
	for _, kv := range pairs(valueOf(root, "state")) {
		sv := f.stateDecl(kv[0].Value, kv[1])
		p.State = append(p.State, sv)
		if sv.Merge != MergeNone {
			if p.merges == nil {
				p.merges = map[string]Merge{}
			}
			p.merges[sv.Name] = sv.Merge
		}
		f.state[kv[0].Value] = true
	}
	// Collect node ids first: memory prompts and tool declarations are
	// compiled before the nodes, and may refer to nodes.<id> too.
	f.ids = map[string]*yaml.Node{}
	f.collectIDs(valueOf(root, "nodes"))
	f.decodeInputs(valueOf(root, "inputs"))
	f.decodeLimits(valueOf(root, "limits"), valueOf(root, "sandbox"))
	f.decodeModels(valueOf(root, "models"))
	p.Memories = map[string]*Memory{}
	for _, kv := range pairs(valueOf(root, "memories")) {
		m := &Memory{Name: kv[0].Value, Pos: f.pos(kv[0])}
		if _, sys := get(kv[1], "system"); sys != nil {
			m.System = f.prompt(sys, scope{})
		}
		p.Memories[m.Name] = m
	}
	f.decodeHTTPGet(valueOf(root, "http_get"))
	f.decodeTools(valueOf(root, "tools"))

	if k, _ := get(root, "nodes"); k == nil && valueOf(root, "outputs") == nil {
		f.l.errorf(f.pos(root), "missing required field \"nodes\": a pipeline runs nodes (or, with outputs: alone, computes them from its inputs)")
	}
	p.Nodes = f.block(valueOf(root, "nodes"), scope{})

	for _, kv := range pairs(valueOf(root, "outputs")) {
		p.Outputs = append(p.Outputs, &Output{Name: kv[0].Value, Value: f.value(kv[1], scope{})})
	}
	f.decodeScore(valueOf(root, "score"))
}

func valueOf(n *yaml.Node, key string) *yaml.Node {
	_, v := get(n, key)
	return v
}

func (f *file) decodeInputs(n *yaml.Node) {
	for _, kv := range pairs(n) {
		in := &Input{Name: kv[0].Value, Pos: f.pos(kv[0])}
		in.Type, _ = str(valueOf(kv[1], "type"))
		in.Format, _ = str(valueOf(kv[1], "format"))
		in.Description, _ = str(valueOf(kv[1], "description"))
		schema, _ := Plain(kv[1]).(map[string]any)
		if schema == nil {
			continue
		}
		delete(schema, "format") // "path" is checked by the runtime, not as a JSON-schema format
		in.Schema = schema
		k, d := get(kv[1], "default")
		if k != nil {
			in.Default, in.HasDefault = Plain(d), true
		}
		f.p.Inputs = append(f.p.Inputs, in)
		if f.schemaErrorUnder("/inputs/" + escapePointer(in.Name)) {
			continue // the pipeline schema has reported the declaration
		}
		s, err := compileSchema(schema)
		switch {
		case err != nil:
			f.l.errorf(f.pos(kv[0]), "input %q: the declaration is not a valid JSON schema: %v", in.Name, err)
		case k != nil:
			if err := validateWith(s, in.Default); err != nil {
				f.l.errorf(f.pos(d), "input %q: default does not match its declaration: %v", in.Name, err)
			}
		}
	}
}

func (f *file) decodeLimits(limits, sandbox *yaml.Node) {
	p := f.p
	p.Limits.MaxSteps, _ = intValue(valueOf(limits, "max_steps"))
	p.Limits.MaxCostUSD, _ = floatValue(valueOf(limits, "max_cost_usd"))
	p.Limits.Timeout = f.duration(valueOf(limits, "timeout"))
	if kb, ok := intValue(valueOf(limits, "max_file_kb")); ok && kb > 0 {
		p.Files.MaxBytes = int64(kb) * 1024
	}
	p.Sandbox = f.sandboxLimits(sandbox, "sandbox")
	p.Sandbox.Language, _ = str(valueOf(sandbox, "language"))
}

func (f *file) sandboxLimits(n *yaml.Node, label string) SandboxDefaults {
	var s SandboxDefaults
	s.Timeout = f.duration(valueOf(n, "timeout"))
	s.MemoryMB = f.boundedInt(valueOf(n, "memory_mb"), label+".memory_mb", MaxSandboxMemoryMB,
		"a WebAssembly guest addresses at most 4 GiB")
	s.MaxOutputBytes = 1024 * f.boundedInt(valueOf(n, "max_output_kb"), label+".max_output_kb", MaxSandboxOutputBytes/1024,
		"the sandbox holds each of stdout, stderr and the result in memory")
	return s
}

// boundedInt reads a positive integer limit of at most most. A larger one
// (why says why there is a ceiling) is reported and reads as unset; the
// schema reports values below 1 and values that are not integers.
func (f *file) boundedInt(n *yaml.Node, name string, most int, why string) int {
	x, ok := floatValue(n) // a number too large for an int is a YAML float
	if !ok || x < 1 {
		return 0
	}
	if x > float64(most) {
		f.l.errorf(f.pos(n), "%s: %s is more than %d, the most it can be (%s)", name, n.Value, most, why)
		return 0
	}
	v, _ := intValue(n)
	return v
}

func (f *file) decodeModels(n *yaml.Node) {
	f.p.Models = map[string]*Model{}
	for _, kv := range pairs(n) {
		v := kv[1]
		m := &Model{Name: kv[0].Value, Pos: f.pos(kv[0])}
		m.Model, _ = str(valueOf(v, "model"))
		m.API, _ = str(valueOf(v, "api"))
		if m.API == "" {
			m.API = "chat"
		}
		if x, ok := floatValue(valueOf(v, "temperature")); ok {
			m.Temperature = &x
		}
		if x, ok := floatValue(valueOf(v, "top_p")); ok {
			m.TopP = &x
		}
		if x, ok := intValue(valueOf(v, "seed")); ok {
			m.Seed = &x
		}
		m.MaxTokens, _ = intValue(valueOf(v, "max_tokens"))
		m.ReasoningEffort, _ = str(valueOf(v, "reasoning_effort"))
		m.Verbosity, _ = str(valueOf(v, "verbosity"))
		m.BaseURL, _ = str(valueOf(v, "base_url"))
		m.APIKeyEnv, _ = str(valueOf(v, "api_key_env"))
		m.RPM, _ = intValue(valueOf(v, "rpm"))
		m.TPM, _ = intValue(valueOf(v, "tpm"))
		m.MaxConcurrency, _ = intValue(valueOf(v, "max_concurrency"))
		m.Timeout = f.duration(valueOf(v, "timeout"))
		if pr := valueOf(v, "price"); pr != nil {
			m.Price = &Price{}
			m.Price.InputPerMTok, _ = floatValue(valueOf(pr, "input_per_mtok"))
			m.Price.OutputPerMTok, _ = floatValue(valueOf(pr, "output_per_mtok"))
			m.Price.CachedInputPerMTok, _ = floatValue(valueOf(pr, "cached_input_per_mtok"))
		}
		f.p.Models[m.Name] = m
	}
}

func (f *file) decodeTools(n *yaml.Node) {
	f.p.Tools = map[string]*Tool{}
	for _, kv := range pairs(n) {
		t := &Tool{Name: kv[0].Value, Pos: f.pos(kv[0])}
		if slices.Contains(builtinTools, t.Name) {
			f.l.errorf(f.pos(kv[0]), "tool %q is built in; pick another name for your tool", t.Name)
		}
		t.Description, _ = str(valueOf(kv[1], "description"))
		t.Parameters, _ = Plain(valueOf(kv[1], "parameters")).(map[string]any)
		f.checkJSONSchema(valueOf(kv[1], "parameters"), fmt.Sprintf("tool %q: parameters", t.Name), t.Parameters)
		if pn := valueOf(kv[1], "pipeline"); pn != nil {
			t.Pipeline = f.subPipeline(pn)
		}
		if ln := valueOf(kv[1], "llm"); ln != nil {
			t.LLM = f.llm(fmt.Sprintf("tool %q", t.Name), ln, scope{tool: t})
		}
		f.p.Tools[t.Name] = t
	}
}

// defaultHTTPMaxBytes is where http_get cuts a body unless max_bytes says.
const defaultHTTPMaxBytes = 1 << 20

func (f *file) decodeHTTPGet(n *yaml.Node) {
	if n == nil || n.Kind != yaml.MappingNode {
		return
	}
	h := &HTTPGet{AllowHosts: []string{}, Timeout: 30 * time.Second, MaxBytes: defaultHTTPMaxBytes}
	for _, e := range items(valueOf(n, "allow_hosts")) {
		if s, ok := str(e); ok {
			h.AllowHosts = append(h.AllowHosts, strings.ToLower(s))
		}
	}
	if d := f.duration(valueOf(n, "timeout")); d > 0 {
		h.Timeout = d
	}
	if b, ok := intValue(valueOf(n, "max_bytes")); ok {
		h.MaxBytes = b
	}
	f.p.HTTPGet = h
}

// collectIDs records every node id in the file, nested bodies included, so
// that expressions can refer to nodes defined later.
func (f *file) collectIDs(seq *yaml.Node) {
	for _, n := range items(seq) {
		if idn := valueOf(n, "id"); idn != nil {
			if id, ok := str(idn); ok && id != "" {
				if first, dup := f.ids[id]; dup {
					f.l.errorf(f.pos(idn), "duplicate node id %q (first defined at line %d): node ids must be unique in a file", id, first.Line)
				} else {
					f.ids[id] = idn
					f.idSet = append(f.idSet, id)
				}
			}
		}
		for _, spec := range Kinds() {
			if v := valueOf(n, string(spec.Kind)); v != nil && spec.yamlBodies != nil {
				for _, body := range spec.yamlBodies(v) {
					f.collectIDs(body)
				}
			}
		}
	}
}

// block decodes a list of sibling nodes and checks the flow between them.
func (f *file) block(seq *yaml.Node, sc scope) Block {
	var b Block
	var yn []*yaml.Node
	for _, n := range items(seq) {
		if node := f.node(n, sc); node != nil {
			b = append(b, node)
			yn = append(yn, n)
		}
	}
	f.checkFlow(b, yn, sc)
	return b
}

func (f *file) node(n *yaml.Node, sc scope) *Node {
	if n == nil || n.Kind != yaml.MappingNode {
		return nil
	}
	node := &Node{Pos: f.pos(n)}
	sc.node = node
	node.ID, _ = str(valueOf(n, "id"))
	node.Description, _ = str(valueOf(n, "description"))
	label := fmt.Sprintf("node %q", node.ID)

	var kindKey *yaml.Node
	for _, kv := range pairs(n) {
		key := kv[0]
		if k := Kind(key.Value); k == KindSet || specs[k] == nil {
			continue
		}
		if kindKey != nil {
			f.l.errorf(f.pos(key), "%s has two kinds, %s and %s: a node has one kind key; split it into two nodes", label, kindKey.Value, key.Value)
			continue
		}
		kindKey, node.Kind = key, Kind(key.Value)
	}
	if kindKey == nil {
		node.Kind = KindSet
		if valueOf(n, "set") == nil {
			f.l.errorf(f.pos(n), "%s has no kind: give it one of %s, or a set:", label, kindList())
		}
	}

	if w := valueOf(n, "when"); w != nil {
		node.When = f.condition(w, sc, "when")
	}
	after := sc
	after.afterRun = true
	node.Set = f.assigns(label, valueOf(n, "set"), after)
	node.Next, _ = str(valueOf(n, "next"))
	node.OnError, _ = str(valueOf(n, "on_error"))
	node.Timeout = f.duration(valueOf(n, "timeout"))
	node.Confirm = boolValue(valueOf(n, "confirm"))
	if r := valueOf(n, "retry"); r != nil {
		node.Retry = &Retry{MaxAttempts: 1}
		if a, ok := intValue(valueOf(r, "max_attempts")); ok {
			node.Retry.MaxAttempts = a
		}
		node.Retry.Backoff = f.duration(valueOf(r, "backoff"))
		for _, c := range items(valueOf(r, "retry_on")) {
			if s, ok := str(c); ok {
				node.Retry.RetryOn = append(node.Retry.RetryOn, s)
			}
		}
	}
	if k, _ := get(n, "default"); k != nil && node.Kind != KindBranch {
		f.l.errorf(f.pos(k), "%s: default: belongs to branch nodes; use next: to say where to go after this node", label)
	}

	if spec := specs[node.Kind]; spec != nil {
		d := &nodeDecoder{f: f, node: node, n: n, v: valueOf(n, string(node.Kind)), sc: sc, label: label}
		node.Config = spec.decode(d)
	}
	return node
}

func kindList() string {
	var names []string
	for _, s := range Kinds() {
		names = append(names, string(s.Kind))
	}
	return strings.Join(names, ", ")
}

func mapOf(n *yaml.Node) map[string]any {
	m, _ := Plain(n).(map[string]any)
	return m
}

func (f *file) assigns(label string, n *yaml.Node, sc scope) []*Assign {
	var out []*Assign
	for _, kv := range pairs(n) {
		key := kv[0].Value
		if !f.state[key] {
			f.l.errorf(f.pos(kv[0]), "%s: set: no state variable %q%s; declare it under state:", label, key, Suggest(key, keys(f.state)))
		}
		out = append(out, &Assign{Key: key, Pos: f.pos(kv[0]), Value: f.value(kv[1], sc)})
	}
	return out
}

func keys(m map[string]bool) []string {
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	sort.Strings(out)
	return out
}

// subPipeline loads a pipeline file named relative to this one.
func (f *file) subPipeline(n *yaml.Node) *Pipeline {
	rel, ok := str(n)
	if !ok {
		return nil
	}
	src, ok := f.readFile(n, "pipeline file", rel)
	if !ok {
		return nil
	}
	at := f.pos(n)
	return f.l.load(filepath.Join(f.dir, rel), src, &at)
}

// IsImageURL reports whether an images: entry is an http(s) or data URL,
// sent as it is, rather than a file.
func IsImageURL(ref string) bool {
	lower := strings.ToLower(ref)
	return strings.HasPrefix(lower, "http://") || strings.HasPrefix(lower, "https://") || strings.HasPrefix(lower, "data:")
}

func keysOf[V any](m map[string]V) []string {
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	sort.Strings(out)
	return out
}

// checkJSONSchema compiles a JSON schema written at n, so that a broken one
// fails the load rather than the run; nil when there is none or it is broken.
func (f *file) checkJSONSchema(n *yaml.Node, what string, schema map[string]any) *jsonschema.Schema {
	if schema == nil {
		return nil
	}
	s, err := compileSchema(schema)
	if err != nil {
		f.l.errorf(f.pos(n), "%s is not a valid JSON schema: %v", what, err)
	}
	return s
}

// jsonSchema reads an inline schema, or {file: path} holding JSON or YAML.
func (f *file) jsonSchema(n *yaml.Node) map[string]any {
	m := mapOf(n)
	rel, isFile := m["file"].(string)
	if !isFile || len(m) != 1 {
		return m
	}
	fn := valueOf(n, "file")
	src, ok := f.readFile(fn, "schema file", rel)
	if !ok {
		return nil
	}
	var doc yaml.Node
	if err := yaml.Unmarshal(src, &doc); err != nil {
		f.l.errorf(f.pos(fn), "schema file %q: %v", rel, err)
		return nil
	}
	out, ok := Plain(&doc).(map[string]any)
	if !ok {
		f.l.errorf(f.pos(fn), "schema file %q does not hold a JSON-schema object", rel)
	}
	return out
}

// readFile reads a file the pipeline names at n, inside the pipeline
// directory and under its size cap; a problem is reported at n.
func (f *file) readFile(n *yaml.Node, what, rel string) ([]byte, bool) {
	src, err := f.p.Files.ReadFile(context.Background(), rel)
	if err != nil {
		f.l.errorf(f.pos(n), "%s %q: %s", what, rel, f.fileProblem(rel, err))
		return nil, false
	}
	f.recordFile(rel, src)
	return src, true
}

// fileProblem says why the file rel could not be read. Only a file inside
// the pipeline directory gets a suggestion: nothing outside is looked at.
func (f *file) fileProblem(rel string, err error) string {
	if errors.Is(err, confined.ErrOutside) {
		shown := f.l.root
		if wd, err := os.Getwd(); err == nil {
			if rel, err := filepath.Rel(wd, shown); err == nil && filepath.IsLocal(rel) {
				shown = rel
			}
		}
		return fmt.Sprintf("%v (%s): name a file inside it", err, shown)
	}
	return missingFile(f.dir, rel, err)
}

// prompt compiles a prompt field: an inline template, or {file: path}
// whose contents are the template (positions then point into that file).
func (f *file) prompt(n *yaml.Node, sc scope) *Template {
	if n.Kind == yaml.ScalarNode {
		return f.template(n, sc)
	}
	fn := valueOf(n, "file")
	rel, ok := str(fn)
	if !ok {
		return nil
	}
	src, ok := f.readFile(fn, "prompt file", rel)
	if !ok {
		return nil
	}
	path := filepath.Join(f.dir, rel)
	text := string(src)
	f.l.sources[path] = strings.Split(text, "\n")
	spans, err := splitTemplate(text)
	var te *templateError
	if errors.As(err, &te) {
		f.l.errorf(offsetPos(path, text, te.offset), "%s", te.msg)
		return nil
	}
	t := &Template{}
	for _, s := range spans {
		if !s.isExpr {
			f.templateHints(s.text, func(off int) Pos { return offsetPos(path, text, s.offset+off) })
			t.parts = append(t.parts, templatePart{text: s.text})
			continue
		}
		e := f.compile(s.text, sc, false, func(off int) Pos { return offsetPos(path, text, s.offset+off) })
		t.parts = append(t.parts, templatePart{expr: e})
	}
	return t
}

// template compiles a string field that interpolates ${{ }}.
func (f *file) template(n *yaml.Node, sc scope) *Template {
	s, ok := str(n)
	if !ok {
		if n != nil && n.Kind == yaml.ScalarNode {
			s = n.Value // a number or boolean written where text goes
		} else {
			return nil
		}
	}
	spans, err := splitTemplate(s)
	var te *templateError
	if errors.As(err, &te) {
		f.l.errorf(f.scalarPos(n, te.offset), "%s", te.msg)
		return nil
	}
	t := &Template{}
	for _, sp := range spans {
		if !sp.isExpr {
			f.templateHints(sp.text, func(off int) Pos { return f.scalarPos(n, sp.offset+off) })
			t.parts = append(t.parts, templatePart{text: sp.text})
			continue
		}
		e := f.compile(sp.text, sc, false, func(off int) Pos { return f.scalarPos(n, sp.offset+off) })
		t.parts = append(t.parts, templatePart{expr: e})
	}
	if len(t.parts) == 0 {
		t.parts = []templatePart{{text: ""}}
	}
	return t
}

// wholeExpr returns the inner expression and its offset when s is exactly
// one ${{ expr }}.
func wholeExpr(s string) (string, int, bool) {
	spans, err := splitTemplate(s)
	if err != nil {
		return "", 0, false
	}
	var exprSpan *templateSpan
	for i := range spans {
		switch {
		case spans[i].isExpr && exprSpan == nil:
			exprSpan = &spans[i]
		case spans[i].isExpr || strings.TrimSpace(spans[i].text) != "":
			return "", 0, false
		}
	}
	if exprSpan == nil {
		return "", 0, false
	}
	return exprSpan.text, exprSpan.offset, true
}

// condition compiles a boolean field (when, until, while). It takes a bare
// expression; "${{ expr }}" alone is accepted too, but text mixed with
// ${{ }} is an error because a string is never coerced to a boolean.
func (f *file) condition(n *yaml.Node, sc scope, field string) *Expr {
	if n.Kind != yaml.ScalarNode {
		return nil
	}
	s := n.Value
	if strings.Contains(s, "${{") {
		inner, off, ok := wholeExpr(s)
		if !ok {
			f.l.errorf(f.scalarPos(n, strings.Index(s, "${{")), "%s takes a bare expression, not text with ${{ }}: a string is never true or false; write the condition without ${{ }}", field)
			return nil
		}
		return f.compile(inner, sc, true, func(o int) Pos { return f.scalarPos(n, off+o) })
	}
	return f.bare(n, sc, true, field)
}

// bare compiles a bare expression field.
func (f *file) bare(n *yaml.Node, sc scope, asBool bool, field string) *Expr {
	if n.Kind != yaml.ScalarNode {
		return nil
	}
	s := n.Value
	if strings.TrimSpace(s) == "" {
		f.l.errorf(f.pos(n), "%s: empty expression", field)
		return nil
	}
	lead := len(s) - len(strings.TrimLeft(s, " \t\r\n"))
	return f.compile(s, sc, asBool, func(o int) Pos { return f.scalarPos(n, lead+o) })
}

// value compiles an expression field (set: values, outputs, call inputs,
// tool and code args, ...). A string is an expression, and "${{ expr }}"
// alone is one too; a string mixing text with ${{ }} is a template that
// yields a string. Lists and mappings hold values, and any other scalar is
// a literal.
func (f *file) value(n *yaml.Node, sc scope) *Value {
	v := f.valueAt(n, sc)
	if n != nil {
		v.pos = f.pos(n)
	}
	return v
}

func (f *file) valueAt(n *yaml.Node, sc scope) *Value {
	switch {
	case n == nil:
		return &Value{}
	case n.Kind == yaml.SequenceNode:
		v := &Value{list: []*Value{}}
		for _, c := range items(n) {
			v.list = append(v.list, f.value(c, sc))
		}
		return v
	case n.Kind == yaml.MappingNode:
		v := &Value{obj: []*Field{}}
		for _, kv := range pairs(n) {
			v.obj = append(v.obj, &Field{Name: kv[0].Value, Value: f.value(kv[1], sc)})
		}
		return v
	}
	s, ok := str(n)
	if !ok {
		return &Value{lit: Plain(n)}
	}
	if strings.Contains(s, "${{") {
		if inner, off, ok := wholeExpr(s); ok {
			return &Value{expr: f.compile(inner, sc, false, func(o int) Pos { return f.scalarPos(n, off+o) })}
		}
		return &Value{tmpl: f.template(n, sc)}
	}
	sc.maybeText = true
	return &Value{expr: f.bare(n, sc, false, "value")}
}

// text compiles a text field that may also give a list (images:): a
// template, except that "${{ expr }}" alone keeps the expression's type.
func (f *file) text(n *yaml.Node, sc scope) *Value {
	if s, ok := str(n); ok {
		if inner, off, ok := wholeExpr(s); ok {
			return &Value{expr: f.compile(inner, sc, false, func(o int) Pos { return f.scalarPos(n, off+o) })}
		}
	}
	return &Value{tmpl: f.template(n, sc)}
}

// compile compiles one expression and checks its names. at maps a byte
// offset in src to a file position.
func (f *file) compile(src string, sc scope, asBool bool, at func(int) Pos) *Expr {
	tree, err := parseOnly(src)
	if err == nil {
		f.checkNames(tree, src, sc, at)
	}
	opts, names := f.opts, envNames
	if sc.score {
		opts, names = f.scoreOptions(), scoreNames
	}
	prog, err := expr.Compile(src, opts...)
	if err != nil {
		var fe *exprfile.Error
		if errors.As(err, &fe) {
			msg := fe.Message
			if msg == "unexpected token EOF" {
				msg = "the expression ends too early: is a parenthesis, bracket or operand missing?"
			}
			// state.x is untyped, so expr-lang refuses `state.log + [x]`.
			if strings.HasPrefix(msg, "invalid operation: + (mismatched types") && strings.Contains(msg, "[]") {
				msg += ": to add to a list, write concat(list, [x])"
			}
			if strings.HasPrefix(msg, "unknown name ") {
				name := strings.TrimPrefix(msg, "unknown name ")
				msg = fmt.Sprintf("unknown name %s%s; %s can use %s", name, Suggest(name, names), exprKind(sc), strings.Join(names, ", "))
			}
			if m := structFieldRE.FindStringSubmatch(msg); m != nil {
				root, fields := "loop", loopFields
				switch m[1] {
				case "RunInfo":
					root, fields = "run", runFields
				case "ScoreRun":
					root, fields = "run", scoreRunFields
				}
				msg = fmt.Sprintf("%s has no field %q%s; its fields are %s", root, m[2], Suggest(m[2], fields), strings.Join(fields, ", "))
			}
			if sc.maybeText && !namesRoot(src) && (strings.HasPrefix(msg, "unknown name ") || strings.HasPrefix(msg, "unexpected token")) {
				msg += fmt.Sprintf("; this field is an expression: to give the text itself, quote it: '%s'", strconv.Quote(src))
			}
			f.l.errorf(at(runeOffset(src, fe.From)), "in `%s`: %s", oneLine(src), msg)
		} else {
			f.l.errorf(at(0), "in `%s`: %v", oneLine(src), err)
		}
		return nil
	}
	// A condition whose type is known must be a boolean; one of unknown
	// type (a state value, say) is checked when it runs.
	if t := prog.Node().Type(); asBool && t != nil && t.Kind() != reflect.Bool && t.Kind() != reflect.Interface {
		f.l.errorf(at(0), "in `%s`: a condition must be true or false, but this is %s", oneLine(src), t)
		return nil
	}
	e := &Expr{Src: src, Pos: at(0), prog: prog}
	pe := &pendingExpr{src: src, tree: tree, sc: sc, asBool: asBool, at: at}
	f.pending = append(f.pending, pe)
	f.pendingOf[e] = pe
	return e
}

var envNames = []string{"inputs", "state", "nodes", "loop", "item", "index", "run", "env"}

func exprKind(sc scope) string {
	if sc.score {
		return "a metric"
	}
	return "expressions"
}

var (
	structFieldRE = regexp.MustCompile(`^type dsl\.(LoopInfo|RunInfo|ScoreRun) has no field (\w+)$`)
	loopFields    = []string{"index", "iteration", "max"}
	runFields     = []string{"cost_usd", "id", "step", "tokens"}
)

var rootNameRE = regexp.MustCompile(`\b(inputs|state|nodes|loop|item|index|run|env)\b`)

// namesRoot reports whether src mentions a name expressions read, so that
// it is surely an expression rather than text that was meant literally.
func namesRoot(src string) bool { return rootNameRE.MatchString(src) }

func oneLine(s string) string {
	s = strings.Join(strings.Fields(s), " ")
	if len(s) > 60 {
		s = s[:57] + "..."
	}
	return s
}

// runeOffset converts expr-lang's rune offset into a byte offset.
func runeOffset(s string, runes int) int {
	i := 0
	for b := range s {
		if i == runes {
			return b
		}
		i++
	}
	return len(s)
}

func parseOnly(src string) (*ast.Node, error) {
	tree, err := parserParse(src)
	if err != nil {
		return nil, err
	}
	return &tree.Node, nil
}

// checkNames reports names used outside the scope that defines them: loop
// exists only inside loops, item and index only inside maps, and an llm
// tool sees its arguments only. Member names are checked with their types
// by the resolve phase.
func (f *file) checkNames(root *ast.Node, src string, sc scope, at func(int) Pos) {
	v := &nameVisitor{f: f, sc: sc}
	ast.Walk(root, v)
	for _, p := range v.problems {
		f.l.errorf(at(runeOffset(src, p.from)), "in `%s`: %s", oneLine(src), p.msg)
	}
}

type nameProblem struct {
	from int
	msg  string
}

type nameVisitor struct {
	f        *file
	sc       scope
	problems []nameProblem
}

func (v *nameVisitor) Visit(node *ast.Node) {
	switch n := (*node).(type) {
	case *ast.IdentifierNode:
		switch {
		case v.sc.tool != nil && slices.Contains(toolHidden, n.Value):
			v.add(n, fmt.Sprintf("tool %q: an llm tool's templates see its arguments as inputs.<parameter>, not %s; add a parameter for what the tool needs", v.sc.tool.Name, n.Value))
		case n.Value == "loop" && !v.sc.loopVars:
			v.add(n, "loop is only defined inside a loop body")
		case v.sc.score:
		case (n.Value == "item" || n.Value == "index") && !v.sc.inMap:
			v.add(n, n.Value+" is only defined inside a map body")
		}
	}
}

// toolHidden are the names an llm tool's templates cannot use: a tool is
// a function of its arguments, whichever node calls it.
var toolHidden = []string{"state", "nodes", "loop", "item", "index"}

func (v *nameVisitor) add(n ast.Node, msg string) {
	v.problems = append(v.problems, nameProblem{from: n.Location().From, msg: msg})
}

// ValidateValue checks a value against a JSON schema given as Go values.
func ValidateValue(schema map[string]any, v any) error {
	s, err := compileSchema(schema)
	if err != nil {
		return err
	}
	return validateWith(s, v)
}

func jsonRoundTrip(v any) (any, error) {
	b, err := json.Marshal(v)
	if err != nil {
		return nil, err
	}
	return FromJSON(b)
}
