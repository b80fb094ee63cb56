package dsl

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"strings"
	"time"

	"gopkg.in/yaml.v3"

	"github.com/flowrun/flowrun/internal/confined"
	"github.com/flowrun/flowrun/jsonvalue"
	"github.com/flowrun/flowrun/llmconf"
	"github.com/flowrun/flowrun/sandbox/bounds"
)

// builtinTools are the tools every agent may use without declaring them.
var builtinTools = []string{"python_execute", "code_execute", "read_file", "http_get"}

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
	f.decodeMCP(valueOf(root, "mcp"))
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
		s, err := jsonvalue.Compile(schema)
		switch {
		case err != nil:
			f.l.errorf(f.pos(kv[0]), "input %q: the declaration is not a valid JSON schema: %v", in.Name, err)
		case k != nil:
			if err := s.Validate(in.Default); err != nil {
				f.l.errorf(f.pos(d), "input %q: default does not match its declaration: %v", in.Name, err)
			}
		}
	}
}

func (f *file) decodeLimits(limits, sandbox *yaml.Node) {
	p := f.p
	p.Limits.MaxSteps, _ = intValue(valueOf(limits, "max_steps"))
	if c := valueOf(limits, "max_cost_usd"); c != nil {
		p.Limits.MaxCostUSD, _ = floatValue(c)
		p.Limits.MaxCostPos = f.pos(c)
	}
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
	s.MemoryMB = f.boundedInt(valueOf(n, "memory_mb"), label+".memory_mb", bounds.MaxMemoryMB,
		"a WebAssembly guest addresses at most 4 GiB")
	s.MaxOutputBytes = 1024 * f.boundedInt(valueOf(n, "max_output_kb"), label+".max_output_kb", bounds.MaxOutputBytes/1024,
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

// checkLiteral refuses, in a field that takes a YAML value as it is
// (state initial values, ask.default), a string written as an
// expression's string literal would be ("'fast'"): it would keep its
// quotes, which is hardly ever what was meant. A block scalar (|-) is
// how to mean it, so it is let through.
func (f *file) checkLiteral(v *yaml.Node, label string) {
	if v == nil || v.Kind != yaml.ScalarNode || v.ShortTag() != "!!str" || len(v.Value) < 2 || v.Style&(yaml.LiteralStyle|yaml.FoldedStyle) != 0 {
		return
	}
	q := v.Value[0]
	if (q != '"' && q != '\'') || v.Value[len(v.Value)-1] != q || strings.IndexByte(v.Value[1:len(v.Value)-1], q) >= 0 {
		return
	}
	fixed, _ := yaml.Marshal(v.Value[1 : len(v.Value)-1])
	f.l.errorf(f.pos(v), "%s: a literal here, not an expression, so this value keeps its quotes; write %s (or, to keep them, write the value as a block scalar, |-)", label, strings.TrimSpace(string(fixed)))
}

func (f *file) decodeModels(n *yaml.Node) {
	f.p.Models = map[string]*llmconf.Model{}
	for _, kv := range pairs(n) {
		v := kv[1]
		m := &llmconf.Model{Name: kv[0].Value}
		m.Model, _ = str(valueOf(v, "model"))
		f.offlineModel(m, v)
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
		if sv := valueOf(v, "stream"); sv != nil {
			m.Stream = sv.Value // auto, true or false: the schema allows no other
		}
		if cv := valueOf(v, "cache"); cv != nil {
			m.Cache = cv.Value // true, false or always: the schema allows no other
		}
		if bv := valueOf(v, "background"); bv != nil {
			m.Background = bv.Value == "true" // a boolean: the schema allows no other
			if m.Background && m.API != "responses" {
				f.l.errorf(f.pos(bv), "model %q: background: true needs api: responses (background responses are a Responses API feature, and this model uses chat completions)", m.Name)
			}
		}
		m.Poll = f.duration(valueOf(v, "poll"))
		m.MaxReplyBytes, _ = intValue(valueOf(v, "max_reply_bytes"))
		if r := valueOf(v, "retry"); r != nil {
			m.Retry = &llmconf.Retry{Backoff: f.duration(valueOf(r, "backoff")), MaxBackoff: f.duration(valueOf(r, "max_backoff"))}
			m.Retry.MaxAttempts, _ = intValue(valueOf(r, "max_attempts"))
			if j, ok := floatValue(valueOf(r, "jitter")); ok {
				m.Retry.Jitter = &j
			}
		}
		if pr := valueOf(v, "price"); pr != nil {
			m.Price = &llmconf.Price{}
			m.Price.InputPerMTok, _ = floatValue(valueOf(pr, "input_per_mtok"))
			m.Price.OutputPerMTok, _ = floatValue(valueOf(pr, "output_per_mtok"))
			m.Price.CachedInputPerMTok, _ = floatValue(valueOf(pr, "cached_input_per_mtok"))
		}
		f.p.Models[m.Name] = m
	}
}

// offlineModel reads a model's provider: and mock:, the mock file parsed
// now so that its problems show at load, at their line.
func (f *file) offlineModel(m *llmconf.Model, v *yaml.Node) {
	m.Provider, _ = str(valueOf(v, "provider")) // echo, mock or none: the schema allows no other
	mock := valueOf(v, "mock")
	if m.Model == "" {
		m.Model = m.Provider // the schema wants one of them
	}
	switch {
	case mock != nil && m.Provider != llmconf.ProviderMock:
		f.l.errorf(f.pos(mock), "model %q: mock: is the reply file of provider: mock; add provider: mock or remove it", m.Name)
	case mock == nil && m.Provider == llmconf.ProviderMock:
		f.l.errorf(f.pos(valueOf(v, "provider")), "model %q: provider: mock needs mock: FILE, a YAML file of replies:", m.Name)
	case mock != nil:
		m.MockFile, _ = str(mock)
		src, ok := f.readFile(mock, fmt.Sprintf("model %q: mock", m.Name), m.MockFile)
		if !ok {
			return
		}
		var err error
		if m.Mock, err = llmconf.ParseMock(src); err != nil {
			f.l.errorf(f.pos(mock), "model %q: mock %s: %v", m.Name, m.MockFile, err)
		}
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
		if hn := valueOf(kv[1], "http"); hn != nil {
			t.HTTP = f.httpTool(fmt.Sprintf("tool %q", t.Name), hn, scope{tool: t})
			if t.Pipeline != nil || t.LLM != nil {
				f.l.errorf(f.pos(hn), "tool %q: a tool has one implementation: pipeline, llm or http; keep one", t.Name)
			}
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
func (f *file) checkJSONSchema(n *yaml.Node, what string, schema map[string]any) *jsonvalue.Schema {
	if schema == nil {
		return nil
	}
	s, err := jsonvalue.Compile(schema)
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
