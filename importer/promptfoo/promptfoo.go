// Package promptfoo converts a promptfoo configuration (promptfooconfig.yaml)
// into a flowrun pipeline, a dataset and a score: section, for the subset
// the two share: prompts (inline, in text files named with or without
// file://, or chats of messages in JSON, JSONL or YAML, with a prompt's
// own config) whose Nunjucks output tags, common filters and includes
// become flowrun templates; OpenAI-compatible providers; tests inline, in
// scenarios, or from CSV, YAML, JSON and JSONL files and globs, with
// vars from files; the asserts equals, contains, icontains, regex,
// starts-with, (i)contains-any/all, is-json, contains-json, similar,
// levenshtein, rouge-n, llm-rubric, cost, latency and javascript that is
// an expression (and their not- forms), with weights and test thresholds;
// and defaultTest (in place or in a file) merged into every test as
// promptfoo merges it. The pass metric is a check per assert, passing by
// promptfoo's rule; an assert not converted stays in its item as a check
// that is not checked, with why.
//
// Guarantees: Convert never drops a part of the configuration silently;
// whatever it cannot convert is a Problem with the file, line and column
// it was written at. It reads the configuration and the files it names,
// only regular files of at most 8 MiB and, of the files it names, only
// those inside the configuration's directory (ConvertWithin: inside the
// directory it is given, which holds the configuration); any other is a
// Problem. It writes nothing; Result.Write writes the files, overwriting
// none and following no symbolic link.
package promptfoo

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"maps"
	"path/filepath"
	"regexp"
	"slices"
	"sort"
	"strconv"
	"strings"

	"gopkg.in/yaml.v3"

	"github.com/flowrun/flowrun/dsl"
)

// Problem is a part of the configuration that was not converted, or was
// converted only approximately, and why.
type Problem struct {
	File      string
	Line, Col int
	What      string
}

func (p Problem) String() string { return fmt.Sprintf("%s:%d:%d: %s", p.File, p.Line, p.Col, p.What) }

// RefusedError says a configuration was not converted because none of
// its prompts was, and why for each.
type RefusedError struct {
	Config string
	Why    []Problem
}

func (e *RefusedError) Error() string {
	var b strings.Builder
	fmt.Fprintf(&b, "%s: no prompt to convert: none of the entries of prompts: converted", e.Config)
	for _, p := range e.Why {
		fmt.Fprintf(&b, "\n  %s", p)
	}
	return b.String()
}

// Result is a converted configuration: file names (relative to the output
// directory) with their content, and what was not converted.
type Result struct {
	Files    map[string][]byte
	Problems []Problem
	// Pipelines are the pipeline files written, one per prompt; Models
	// the providers' models, the first being every pipeline's default
	// and the others what a run may swap it for.
	Pipelines []string
	Models    []string
}

// Dataset is the name of the dataset file Convert writes.
const Dataset = "dataset.jsonl"

// Judge is the name of the judge pipeline Convert writes for llm-rubric.
const Judge = "judge.yaml"

// checks are the assert types converted, each as a condition on the
// output text (outputs.text) and the assert (. in all()).
var checks = map[string]string{
	"equals":        `outputs.text == .value`,
	"contains":      `outputs.text contains .value`,
	"icontains":     `lower(outputs.text) contains lower(.value)`,
	"starts-with":   `outputs.text startsWith .value`,
	"regex":         `outputs.text matches .value`,
	"is-json":       `json_valid(outputs.text) && (.value == nil || matches_schema(fromJSON(outputs.text), .value))`,
	"contains-json": `lastIndexOf(outputs.text, "}") > indexOf(outputs.text, "{") && indexOf(outputs.text, "{") >= 0 && json_valid(outputs.text[indexOf(outputs.text, "{"):lastIndexOf(outputs.text, "}") + 1]) && (.value == nil || matches_schema(fromJSON(outputs.text[indexOf(outputs.text, "{"):lastIndexOf(outputs.text, "}") + 1]), .value))`,
	"similar":       `similarity(outputs.text, .value) >= .threshold`,
	"levenshtein":   `round((1 - similarity(outputs.text, .value)) * max(len(outputs.text), len(.value))) <= .threshold`,
	"rouge-n":       `rouge_l(outputs.text, .value) >= .threshold`,
	"cost":          `run.cost_usd <= .threshold`,
	"latency":       `run.duration_ms <= .threshold`,
	"contains-any":  `any(.value, {outputs.text contains #})`,
	"contains-all":  `all(.value, {outputs.text contains #})`,
	"icontains-any": `any(.value, {lower(outputs.text) contains lower(#)})`,
	"icontains-all": `all(.value, {lower(outputs.text) contains lower(#)})`,
}

// textValued are the asserts whose value is compared as text: a number
// or an object is written as its text (as promptfoo renders it);
// listValued those whose value is a list of such texts.
var (
	textValued = []string{"equals", "contains", "icontains", "starts-with", "regex", "similar", "levenshtein", "rouge-n"}
	listValued = []string{"contains-any", "contains-all", "icontains-any", "icontains-all"}
)

// defaultThreshold is promptfoo's threshold for the asserts that have one.
var defaultThreshold = map[string]float64{"similar": 0.75, "levenshtein": 5, "rouge-n": 0.75}

type converter struct {
	file     string // the configuration, as given
	dir      string
	root     string // the files it names are read only inside it
	problems []Problem
	used     map[string]bool // assert types the tests use
	// scripts are the javascript asserts translated, by source.
	scripts map[string]jsCondition
	// promptFunctions says some prompt is a Python prompt function.
	promptFunctions bool
}

func (c *converter) problem(n *yaml.Node, format string, args ...any) {
	c.problems = append(c.problems, Problem{File: c.file, Line: n.Line, Col: n.Column, What: fmt.Sprintf(format, args...)})
}

// Convert reads a promptfoo configuration and converts it, reading the
// files it names only inside its directory.
func Convert(ctx context.Context, path string) (*Result, error) {
	return ConvertWithin(ctx, path, filepath.Dir(path))
}

// ConvertWithin is Convert reading the files the configuration names
// inside root, a directory that holds the configuration (a repository's
// root, whose configurations name files beside their own directory).
func ConvertWithin(ctx context.Context, path, within string) (*Result, error) {
	absWithin, err1 := filepath.Abs(within)
	absDir, err2 := filepath.Abs(filepath.Dir(path))
	if rel, err := filepath.Rel(absWithin, absDir); err1 != nil || err2 != nil || err != nil || !filepath.IsLocal(rel) && rel != "." {
		return nil, fmt.Errorf("converting %s: the directory to read from, %s, does not hold it", path, within)
	}
	if err := ctx.Err(); err != nil {
		return nil, fmt.Errorf("converting %s: %w", path, err)
	}
	src, err := readConfig(ctx, path)
	if err != nil {
		return nil, fmt.Errorf("reading the promptfoo configuration %s: %w", path, err)
	}
	var doc yaml.Node
	if err := yaml.Unmarshal(src, &doc); err != nil {
		line, col, msg := dsl.YAMLError(src, err)
		return nil, fmt.Errorf("%s:%d:%d: not YAML: %s", path, line, col, msg)
	}
	if len(doc.Content) == 0 || doc.Content[0].Kind != yaml.MappingNode {
		return nil, fmt.Errorf("%s: a promptfoo configuration is a mapping (prompts:, providers:, tests:)", path)
	}
	c := &converter{file: path, dir: filepath.Dir(path), root: within, used: map[string]bool{}, scripts: map[string]jsCondition{}}
	root := doc.Content[0]
	var prompts []prompt
	var models []modelDoc
	var target *endpoint
	var tests []test
	var promptProblems []Problem
	description := ""
	for i := 0; i+1 < len(root.Content); i += 2 {
		k, v := root.Content[i], root.Content[i+1]
		switch k.Value {
		case "description":
			description = v.Value
		case "prompts":
			before := len(c.problems)
			prompts = c.prompts(ctx, v)
			promptProblems = c.problems[before:len(c.problems):len(c.problems)]
		case "providers", "targets": // targets: is promptfoo's other name for providers:
			models, target = c.providers(v)
		case "tests", "defaultTest", "scenarios":
			// read below: a test starts from defaultTest, wherever it is written
		case "outputPath":
			c.problem(k, "outputPath: not converted; flowrun keeps results in its run store (flowrun batch show, flowrun batch report -o FILE)")
		case "redteam":
			c.problem(k, "redteam: not converted: promptfoo makes red-team tests with a model (promptfoo redteam generate), so there are none here to import; import the configuration that command writes (redteam.yaml), whose tests are listed")
		default:
			c.problem(k, "%s: not converted", k.Value)
		}
	}
	if err := ctx.Err(); err != nil {
		return nil, fmt.Errorf("converting %s: %w", path, err)
	}
	base := c.defaultTest(ctx, valueOf(root, "defaultTest"))
	if t := valueOf(root, "tests"); t != nil {
		tests = c.tests(ctx, t, base)
	}
	if v := valueOf(root, "scenarios"); v != nil {
		tests = append(tests, c.scenarios(ctx, v, base)...)
	}
	if valueOf(root, "prompts") == nil {
		p, _ := c.prompt(ctx, root, "", "{{prompt}}") // promptfoo's prompt when none is given
		prompts = []prompt{p}
		lacking := 0
		for _, t := range tests {
			if _, ok := t.vars["prompt"]; !ok {
				lacking++
			}
		}
		switch {
		case lacking == 0 || target != nil && !target.sendsPrompt:
		case target != nil:
			c.problem(root, "prompts: none given, so each test's prompt var is the prompt, as in promptfoo; %d of %d tests give none", lacking, len(tests))
		default:
			c.problem(root, "prompts: none given, so each test's prompt var is the prompt, as in promptfoo; %d of %d tests give none (a provider that builds its own request, such as an HTTP endpoint, is not converted)", lacking, len(tests))
		}
	}
	if target != nil {
		before := len(c.problems)
		prompts = c.dropScripts(prompts)
		promptProblems = append(promptProblems, c.problems[before:]...)
	}
	if len(prompts) == 0 {
		return nil, &RefusedError{Config: path, Why: promptProblems}
	}
	res := &Result{Files: map[string][]byte{}}
	rubric := c.used["llm-rubric"]
	switch {
	case target != nil:
		for i := range prompts {
			prompts[i].vars = target.reads(prompts[i])
		}
		if rubric {
			c.problem(root, "llm-rubric: graded by the model gpt-4.1-mini (OpenAI's), as the provider is an endpoint, not a model; set the judge's model in %s (promptfoo grades with its default grader or defaultTest.options.provider)", Judge)
		}
		models = []modelDoc{{Model: "gpt-4.1-mini"}}
	case len(models) == 0:
		c.problem(root, "providers: none converted; the pipelines fall back to the model gpt-4.1-mini (OpenAI's)")
		models = []modelDoc{{Model: "gpt-4.1-mini"}}
		fallthrough
	default:
		for _, m := range models {
			res.Models = append(res.Models, m.Model)
		}
	}
	c.scriptVars(prompts, tests, models, res.Files)
	inputs := c.inputs(prompts, tests)
	for _, v := range target.structured(inputs) {
		c.problem(root, "var %s: a list or mapping, sent to the endpoint as JSON text; promptfoo renders it as Nunjucks does (a list as a,b, a mapping as [object Object])", v)
	}
	// A var given as a number in one test and as text in another is text,
	// as promptfoo puts every value into the prompt.
	for name, in := range inputs {
		for _, t := range tests {
			if v, ok := t.vars[name]; ok && in.Type == "string" {
				t.vars[name] = text(v)
			}
		}
	}
	for i, p := range prompts {
		name := "pipeline.yaml"
		if i > 0 {
			name = fmt.Sprintf("pipeline_%d.yaml", i+1)
		}
		b, err := c.pipeline(pipelineName(description, i), description, p, inputs, models[0], target, rubric)
		if err != nil {
			return nil, err
		}
		res.Files[name] = b
		res.Pipelines = append(res.Pipelines, name)
	}
	if rubric {
		b, err := marshal(c.judgeDoc(models[0]))
		if err != nil {
			return nil, err
		}
		res.Files[Judge] = b
	}
	res.Files[Dataset] = dataset(tests)
	res.Problems = sorted(path, c.problems)
	return res, nil
}

// otherKeys lists the keys of a mapping other than those converted (a
// label only names the part, in promptfoo's report).
func (c *converter) otherKeys(m *yaml.Node, what string, converted ...string) {
	for i := 0; m.Kind == yaml.MappingNode && i+1 < len(m.Content); i += 2 {
		if k := m.Content[i]; !slices.Contains(converted, k.Value) {
			c.problem(k, "%s %s: not converted", what, k.Value)
		}
	}
}

// sorted are the problems in file order, the configuration's first, each
// once (a scenario's tests are read once per config entry).
func sorted(config string, ps []Problem) []Problem {
	rank := func(p Problem) string {
		if p.File == config {
			return ""
		}
		return p.File
	}
	sort.SliceStable(ps, func(i, j int) bool {
		a, b := ps[i], ps[j]
		if rank(a) != rank(b) {
			return rank(a) < rank(b)
		}
		return a.Line < b.Line || a.Line == b.Line && a.Col < b.Col
	})
	return slices.Compact(ps)
}

func valueOf(m *yaml.Node, key string) *yaml.Node {
	for i := 0; m != nil && m.Kind == yaml.MappingNode && i+1 < len(m.Content); i += 2 {
		if m.Content[i].Value == key {
			return m.Content[i+1]
		}
	}
	return nil
}

func pipelineName(description string, i int) string {
	name := strings.Trim(nameRE.ReplaceAllString(strings.ToLower(description), "_"), "_.-")
	if name == "" {
		name = "promptfoo"
	}
	if i > 0 {
		name += "_" + strconv.Itoa(i+1)
	}
	return name
}

// prompt is one prompt's system message and text with {{var}} turned
// into ${{ inputs.var }}, and its own temperature and max_tokens.
type prompt struct {
	system, text string
	images       []string
	// script is a Python prompt function, run in the sandbox for the
	// prompt; system and text are then unused.
	script      *promptScript
	vars        []string
	temperature *float64
	maxTokens   int
}

var (
	varRE      = regexp.MustCompile(`\{\{\s*([A-Za-z_][A-Za-z0-9_]*)\s*\}\}`)
	templateRE = regexp.MustCompile(`\{\{|\{%|\{#`)
	nameRE     = regexp.MustCompile(`[^A-Za-z0-9_.-]+`)
	separator  = regexp.MustCompile(`(?m)^---\s*$`)
)

// entries are a list's items, or the one value that stands for a list of
// one (prompts: TEXT, providers: ID).
func entries(v *yaml.Node) []*yaml.Node {
	if v.Kind == yaml.SequenceNode {
		return v.Content
	}
	return []*yaml.Node{v}
}

func (c *converter) prompts(ctx context.Context, v *yaml.Node) []prompt {
	var out []prompt
	for _, it := range entries(v) {
		raw, cfg := it, (*yaml.Node)(nil)
		if it.Kind == yaml.MappingNode {
			raw, cfg = valueOf(it, "raw"), valueOf(it, "config")
			if raw == nil {
				raw = valueOf(it, "id")
			}
		}
		if raw == nil || raw.Kind != yaml.ScalarNode {
			c.problem(it, "prompt: not converted (a prompt is text, a file, or {raw: TEXT} / {id: FILE} with label: and config:)")
			continue
		}
		c.otherKeys(it, "prompt", "raw", "id", "config", "label")
		var ps []prompt
		if looksLikeFile(raw.Value) {
			var isFile bool
			ps, isFile = c.promptFiles(ctx, raw, raw.Value)
			if !isFile {
				ps = c.promptText(ctx, raw, raw.Value)
			}
		} else {
			ps = c.promptText(ctx, raw, raw.Value)
		}
		for i := range ps {
			c.promptConfig(&ps[i], cfg)
		}
		out = append(out, ps...)
	}
	return out
}

// promptText is an inline prompt: text, or a chat written as a JSON list
// of messages.
func (c *converter) promptText(ctx context.Context, n *yaml.Node, text string) []prompt {
	if t := strings.TrimSpace(text); strings.HasPrefix(t, "[") {
		var msgs []any
		if json.Unmarshal([]byte(t), &msgs) == nil {
			return c.chat(ctx, n, msgs)
		}
	}
	if p, ok := c.prompt(ctx, n, "", text); ok {
		return []prompt{p}
	}
	return nil
}

// promptFiles reads the prompts of the files a reference names. A name
// without file:// that names no file is the prompt's text (isFile false),
// as promptfoo takes it.
func (c *converter) promptFiles(ctx context.Context, n *yaml.Node, ref string) (out []prompt, isFile bool) {
	explicit := strings.HasPrefix(ref, "file://")
	name := strings.TrimPrefix(ref, "file://")
	if i := strings.LastIndex(name, ":"); i > 1 && !strings.ContainsAny(name[i:], `/\`) {
		script, fn := name[:i], name[i+1:]
		src, err := readPromptFile(ctx, c.root, c.dir, script)
		python := strings.EqualFold(filepath.Ext(script), ".py")
		if python && err == nil && pythonNameRE.MatchString(fn) {
			return []prompt{{script: &promptScript{at: n, name: name, file: filepath.Base(script), fn: fn, source: src}}}, true
		}
		why := ""
		switch {
		case errors.Is(err, fs.ErrNotExist):
			why = script + " is not in the configuration's directory"
		case err != nil:
			why = script + " is not read: " + err.Error()
		case python:
			why = fn + " is not a Python function's name"
		}
		if python {
			c.problem(n, "prompt %s: not converted (%s; a Python prompt function runs in the sandbox from its file)", name, why)
		} else {
			if why != "" {
				why = "; and " + why
			}
			c.problem(n, "prompt %s: not converted (a JavaScript or TypeScript prompt function is not, a Python one is: the prompt is what the function returns when promptfoo runs it; write that prompt as a text or chat file%s)", name, why)
		}
		return nil, true
	}
	if !explicit && !strings.ContainsAny(name, "*?[") {
		if _, err := readPromptFile(ctx, c.root, c.dir, name); errors.Is(err, fs.ErrNotExist) {
			return nil, false
		}
	}
	for _, f := range c.files(n, ref) {
		out = append(out, c.promptFile(ctx, n, f)...)
	}
	return out, true
}

// promptFile reads one prompt file as promptfoo reads it: text (several
// prompts separated by lines of ---), a chat as JSON or YAML, or one chat
// per line of JSONL. It reads only a regular file inside the
// configuration's directory.
func (c *converter) promptFile(ctx context.Context, n *yaml.Node, path string) []prompt {
	ext := strings.ToLower(filepath.Ext(path))
	switch ext {
	case ".js", ".mjs", ".cjs", ".ts", ".py":
		c.problem(n, "prompt %s: not converted (a prompt built by a script is not)", path)
		return nil
	}
	b, ok := c.read(ctx, n, "prompt", path)
	if !ok {
		return nil
	}
	switch ext {
	case ".json":
		var v any
		if err := json.Unmarshal(b, &v); err != nil {
			return c.promptText(ctx, n, string(b))
		}
		if msgs, ok := v.([]any); ok {
			return c.chat(ctx, n, msgs)
		}
		return c.promptText(ctx, n, string(b))
	case ".jsonl":
		var out []prompt
		for _, line := range strings.Split(string(b), "\n") {
			if strings.TrimSpace(line) != "" {
				out = append(out, c.promptText(ctx, n, line)...)
			}
		}
		return out
	case ".yaml", ".yml":
		var v any
		if err := yaml.Unmarshal(b, &v); err == nil {
			switch v := v.(type) {
			case []any:
				return c.chat(ctx, n, v)
			case string:
				return c.promptText(ctx, n, v)
			}
		}
		c.problem(n, "prompt %s: not converted (a YAML prompt file holds a list of messages or a text)", path)
		return nil
	}
	var out []prompt
	for _, part := range separator.Split(string(b), -1) {
		if s := strings.TrimSpace(part); s != "" {
			if p, ok := c.prompt(ctx, n, "", s); ok {
				out = append(out, p)
			}
		}
	}
	return out
}

// chat is a prompt written as messages: system messages first, then one
// user message, become the node's system and prompt; any other
// conversation is sent as one user message, and listed. The user
// message's content may be a list of text and image_url parts: its text
// is the prompt and its images the node's images, which the node sends
// after the text.
func (c *converter) chat(ctx context.Context, n *yaml.Node, msgs []any) []prompt {
	var system, rest []string
	var roles []string
	var images []string
	for _, m := range msgs {
		mm, _ := m.(map[string]any)
		role, _ := mm["role"].(string)
		content, urls, texts, why := chatContent(mm["content"])
		if role == "" || why != "" {
			if why == "" {
				why = "a chat message is {role: ROLE, content: TEXT or a list of text and image_url parts}"
			}
			c.problem(n, "prompt: not converted: %s; tool messages are not converted", why)
			return nil
		}
		if len(urls) > 0 && role != "user" {
			c.problem(n, "prompt: not converted: images in a %s message (only the user message's are)", role)
			return nil
		}
		if texts > 1 {
			c.problem(n, "prompt: converted approximately: a %s message's %d text parts are sent as one, joined by line breaks", role, texts)
		}
		if role == "system" && len(rest) == 0 {
			system = append(system, content)
			continue
		}
		roles = append(roles, role)
		rest = append(rest, content)
		images = append(images, urls...)
	}
	var text string
	switch {
	case len(rest) == 1 && roles[0] == "user":
		text = rest[0]
	case len(rest) == 0:
		c.problem(n, "prompt: not converted: a chat with no user message")
		return nil
	case len(images) > 0:
		c.problem(n, "prompt: not converted: images in a conversation of %d messages (only a single user message's are)", len(rest))
		return nil
	default:
		parts := make([]string, len(rest))
		for i := range rest {
			parts[i] = roles[i] + ": " + rest[i]
		}
		text = strings.Join(parts, "\n\n")
		c.problem(n, "prompt: converted approximately: the chat's %d messages after the system message are sent as one user message, each after its role", len(rest))
	}
	p, ok := c.prompt(ctx, n, strings.Join(system, "\n\n"), text)
	if !ok {
		return nil
	}
	for _, url := range images {
		out, err := translateOutputs(url, &p.vars)
		if err == nil && templateRE.MatchString(outputRE.ReplaceAllString(url, "")) {
			err = errors.New("it uses a Nunjucks tag or comment")
		}
		if err != nil {
			c.problem(n, "prompt: not converted: image_url %q: %v", snippet(url, 0), err)
			return nil
		}
		p.images = append(p.images, out)
	}
	return []prompt{p}
}

// chatContent is a message's content as text and image URLs: a text, or
// a list of {type: text, text} and {type: image_url, image_url: {url}}
// parts, texts before images (the order the node sends them in), and
// how many text parts it joined. why says what is not converted.
func chatContent(v any) (text string, images []string, texts int, why string) {
	if s, ok := v.(string); ok {
		return s, nil, 1, ""
	}
	parts, ok := v.([]any)
	if !ok || len(parts) == 0 {
		return "", nil, 0, "a chat message's content is a text or a list of parts"
	}
	var all []string
	for _, part := range parts {
		pm, _ := part.(map[string]any)
		switch typ, _ := pm["type"].(string); typ {
		case "text":
			t, ok := pm["text"].(string)
			if !ok {
				return "", nil, 0, "a text part without its text"
			}
			if len(images) > 0 {
				return "", nil, 0, "a text part after an image part (the node sends its text first)"
			}
			all = append(all, t)
		case "image_url":
			var url string
			switch u := pm["image_url"].(type) {
			case string:
				url = u
			case map[string]any:
				url, _ = u["url"].(string)
				if len(u) > 1 {
					return "", nil, 0, "an image_url part with options besides url (detail is not converted)"
				}
			}
			if url == "" {
				return "", nil, 0, "an image_url part without its url"
			}
			images = append(images, url)
		default:
			return "", nil, 0, fmt.Sprintf("a content part of type %q (text and image_url parts are converted)", typ)
		}
	}
	return strings.Join(all, "\n"), images, len(all), ""
}

// promptConfig is a prompt's own config:, which promptfoo merges over the
// provider's for that prompt.
func (c *converter) promptConfig(p *prompt, cfg *yaml.Node) {
	if cfg == nil {
		return
	}
	m := modelDoc{}
	c.providerConfig(&m, cfg)
	if m.BaseURL != "" || m.APIKeyEnv != "" {
		c.problem(cfg, "prompt config apiBaseUrl, apiKeyEnvar: not converted (they belong to the provider)")
	}
	p.temperature, p.maxTokens = m.Temperature, m.MaxTokens
}

func (c *converter) prompt(ctx context.Context, n *yaml.Node, system, text string) (prompt, bool) {
	p := prompt{}
	var failed error
	replace := func(s string) string {
		out, err := translateOutputs(s, &p.vars)
		if err != nil {
			failed = err
		}
		return out
	}
	tags := includeRE.FindAllString(system+text, -1)
	system, err := c.includes(ctx, system, 0)
	if err == nil {
		text, err = c.includes(ctx, text, 0)
	}
	if err == nil {
		p.system, p.text = replace(system), replace(text)
	} else {
		failed = err
	}
	if len(tags) > 0 && failed == nil {
		c.problem(n, "prompt: %s read from the configuration's directory; promptfoo reads includes from the directory it runs in, usually that one", strings.Join(tags, ", "))
	}
	if failed != nil {
		c.problem(n, "prompt: not converted: %v", failed)
		return p, false
	}
	rest := outputRE.ReplaceAllString(system+"\n"+text, "")
	if loc := templateRE.FindStringIndex(rest); loc != nil {
		c.problem(n, "prompt: not converted: it uses a Nunjucks tag or comment ({%% %%}, {# #}) near %q", snippet(rest, loc[0]))
		return p, false
	}
	return p, true
}

// translateOutputs turns each {{ EXPR }} of s into ${{ EXPR }} in expr,
// adding the vars it reads to vars; the error names the last one that
// is not translated (a Handlebars block's closing tag says most).
func translateOutputs(s string, vars *[]string) (string, error) {
	var failed error
	out := outputRE.ReplaceAllStringFunc(s, func(m string) string {
		e, read, err := nunjucksExpr(outputRE.FindStringSubmatch(m)[1])
		if err != nil {
			failed = fmt.Errorf("%s: %w", m, err)
			return m
		}
		for _, v := range read {
			if !slices.Contains(*vars, v) {
				*vars = append(*vars, v)
			}
		}
		return "${{ " + e + " }}"
	})
	return out, failed
}

// includeRE is a Nunjucks include tag of a file named by a literal.
var includeRE = regexp.MustCompile(`\{%-?\s*include\s+(?:"([^"]+)"|'([^']+)')\s*-?%\}`)

// maxIncludeDepth bounds includes within includes (a file that includes
// itself).
const maxIncludeDepth = 8

// includes puts in each {% include "FILE" %} the file's text, read as the
// prompt files are (inside the configuration's directory), itself a
// template. The whole is held to maxFileSize, as a file that includes
// itself twice would otherwise double at each level.
func (c *converter) includes(ctx context.Context, s string, depth int) (string, error) {
	var failed error
	out := includeRE.ReplaceAllStringFunc(s, func(tag string) string {
		if failed != nil {
			return tag
		}
		m := includeRE.FindStringSubmatch(tag)
		if depth >= maxIncludeDepth {
			failed = fmt.Errorf("%s: includes nested more than %d deep", tag, maxIncludeDepth)
			return tag
		}
		b, err := readPromptFile(ctx, c.root, c.dir, m[1]+m[2])
		if err != nil {
			failed = fmt.Errorf("%s: not read: %w", tag, err)
			return tag
		}
		inner, err := c.includes(ctx, string(b), depth+1)
		if err != nil {
			failed = err
			return tag
		}
		return inner
	})
	if failed == nil && len(out) > maxFileSize {
		failed = fmt.Errorf("with its includes it is over %d MiB", maxFileSize>>20)
	}
	return out, failed
}

func snippet(s string, at int) string {
	end := min(len(s), at+30)
	return s[at:end]
}

// modelDoc is a flowrun model configuration.
type modelDoc struct {
	// id is the provider as promptfoo names it, which a prompt function
	// sees as context.provider.id.
	id          string
	Model       string   `yaml:"model,omitempty"`
	Provider    string   `yaml:"provider,omitempty"`
	Temperature *float64 `yaml:"temperature,omitempty"`
	MaxTokens   int      `yaml:"max_tokens,omitempty"`
	BaseURL     string   `yaml:"base_url,omitempty"`
	APIKeyEnv   string   `yaml:"api_key_env,omitempty"`
}

// providers are the models the providers name, or the endpoint the
// first one is (the pipelines then call it, and no other provider).
func (c *converter) providers(v *yaml.Node) ([]modelDoc, *endpoint) {
	var out []modelDoc
	var target *endpoint
	for _, it := range entries(v) {
		id, cfg := it, (*yaml.Node)(nil)
		if it.Kind == yaml.MappingNode {
			id, cfg = valueOf(it, "id"), valueOf(it, "config")
		}
		if id == nil || id.Kind != yaml.ScalarNode {
			c.problem(it, "provider: not converted (write openai:MODEL or {id: openai:MODEL, config: {...}})")
			continue
		}
		c.otherKeys(it, "provider", "id", "config", "label")
		if strings.Contains(id.Value, "{{") {
			c.problem(id, "provider %s: not converted: a model id from the environment is not; write the model's name", id.Value)
			continue
		}
		if isEndpoint(id.Value) || target != nil {
			switch {
			case len(out) > 0 || target != nil:
				c.problem(id, "provider %s: not converted: the pipelines call one application's endpoint, or models, not both; import a configuration with this provider alone", id.Value)
			default:
				target = c.endpoint(id, cfg)
			}
			continue
		}
		m, ok := compatibleModel(id.Value)
		if id.Value == "echo" {
			// promptfoo's echo replies with the prompt, as flowrun's does.
			m, ok = modelDoc{Model: "echo", Provider: "echo"}, true
		}
		if !ok {
			c.problem(id, "provider %s: not converted; only OpenAI-compatible providers are (openai, azure, ollama, openrouter, groq, togetherai, vllm, lmstudio, localai; another server through config.apiBaseUrl)", id.Value)
			continue
		}
		model := m.Model
		m.id = id.Value
		c.providerConfig(&m, cfg)
		if len(out) > 0 && (m.Temperature != nil || m.MaxTokens != 0 || m.BaseURL != out[0].BaseURL || m.APIKeyEnv != out[0].APIKeyEnv) {
			c.problem(id, "provider %s: its server and config are not in the pipelines, which run the first provider; a run swaps in its model with --model default=%s, without them", id.Value, model)
		}
		out = append(out, m)
	}
	return out, target
}

// compatibleServers are promptfoo's providers that speak OpenAI's Chat
// Completions API, with the server and key variable promptfoo uses.
var compatibleServers = map[string]modelDoc{
	"openai":     {},
	"ollama":     {BaseURL: "http://localhost:11434/v1"},
	"openrouter": {BaseURL: "https://openrouter.ai/api/v1", APIKeyEnv: "OPENROUTER_API_KEY"},
	"groq":       {BaseURL: "https://api.groq.com/openai/v1", APIKeyEnv: "GROQ_API_KEY"},
	"togetherai": {BaseURL: "https://api.together.xyz/v1", APIKeyEnv: "TOGETHER_API_KEY"},
	"vllm":       {BaseURL: "http://localhost:8000/v1"},
	"lmstudio":   {BaseURL: "http://localhost:1234/v1"},
	"localai":    {BaseURL: "http://localhost:8080/v1"},
	"azure":      {APIKeyEnv: "AZURE_API_KEY"},
}

// compatibleModel is the model a provider id names: PROVIDER:MODEL or
// PROVIDER:chat:MODEL, the model's name keeping any further colons
// (ollama:chat:llama3:8b). Embedding, completion and assistant
// providers are not chat models.
func compatibleModel(id string) (modelDoc, bool) {
	provider, rest, ok := strings.Cut(id, ":")
	server, known := compatibleServers[provider]
	if !ok || !known {
		return modelDoc{}, false
	}
	if m, ok := strings.CutPrefix(rest, "chat:"); ok {
		rest = m
	} else if kind, _, ok := strings.Cut(rest, ":"); ok && (provider == "openai" || provider == "azure" || slices.Contains([]string{"embedding", "embeddings", "completion", "assistant", "responses"}, kind)) {
		return modelDoc{}, false
	}
	if rest == "" {
		return modelDoc{}, false
	}
	server.Model = rest
	return server, true
}

func (c *converter) providerConfig(m *modelDoc, cfg *yaml.Node) {
	for i := 0; cfg != nil && i+1 < len(cfg.Content); i += 2 {
		k, v := cfg.Content[i], cfg.Content[i+1]
		switch k.Value {
		case "temperature":
			if f, err := strconv.ParseFloat(v.Value, 64); err == nil {
				m.Temperature = &f
				continue
			}
		case "max_tokens":
			if n, err := strconv.Atoi(v.Value); err == nil {
				m.MaxTokens = n
				continue
			}
		case "apiBaseUrl":
			m.BaseURL = v.Value
			continue
		case "apiHost": // Azure's resource host
			m.BaseURL = "https://" + v.Value + "/openai/v1"
			continue
		case "apiKeyEnvar":
			m.APIKeyEnv = v.Value
			continue
		}
		c.problem(k, "provider config %s: not converted", k.Value)
	}
}

// assert is one assertion as the dataset holds it: promptfoo's type,
// value, threshold and weight, and, for one that was not converted, why
// (its check is then not checked).
type assert struct {
	Type         string   `json:"type"`
	Value        any      `json:"value"`
	Threshold    *float64 `json:"threshold,omitempty"`
	Weight       *float64 `json:"weight,omitempty"`
	NotConverted string   `json:"not_converted,omitempty"`
}

// test is one dataset item: its vars, asserts and threshold (the mean
// score of its asserts that passes it, in place of every assert passing).
type test struct {
	description string
	vars        map[string]any
	asserts     []assert
	threshold   *float64
}

func (t test) clone() test {
	out := test{description: t.description, vars: make(map[string]any, len(t.vars)), asserts: slices.Clone(t.asserts), threshold: t.threshold}
	for k, v := range t.vars {
		out.vars[k] = v
	}
	return out
}

// filled is the test with {{var}} in its asserts' values filled in from
// its vars, as promptfoo renders them.
func (t test) filled() test {
	for i, a := range t.asserts {
		if s, ok := a.Value.(string); ok {
			t.asserts[i].Value = varRE.ReplaceAllStringFunc(s, func(m string) string {
				if x, ok := t.vars[varRE.FindStringSubmatch(m)[1]]; ok {
					return text(x)
				}
				return m
			})
		}
	}
	return t
}

// defaultTest reads defaultTest: vars and asserts every test starts with,
// written in place or in a file (file://).
func (c *converter) defaultTest(ctx context.Context, v *yaml.Node) test {
	t := test{vars: map[string]any{}}
	if v == nil {
		return t
	}
	if v.Kind == yaml.ScalarNode && strings.HasPrefix(v.Value, "file://") {
		name := strings.TrimPrefix(v.Value, "file://")
		b, ok := c.read(ctx, v, "defaultTest", name)
		if !ok {
			return t
		}
		n, err := parse(b)
		if err != nil || n.Kind != yaml.MappingNode {
			c.problem(v, "defaultTest %s: not converted (it holds a mapping with vars: and assert:)", name)
			return t
		}
		defer c.within(name)()
		v = n
	}
	if v.Kind != yaml.MappingNode {
		c.problem(v, "defaultTest: not converted (a mapping with vars: and assert:, or file://FILE)")
		return t
	}
	c.testFields(ctx, v, &t, true)
	return t
}

// tests reads tests: a list of tests and of files holding tests, or one
// file or glob (CSV, YAML, JSON, JSONL). Each test starts from base, the
// defaultTest: its vars under the test's, its asserts before the test's.
func (c *converter) tests(ctx context.Context, v *yaml.Node, base test) []test {
	var out []test
	for _, it := range entries(v) {
		switch {
		case it.Kind == yaml.ScalarNode && it.Value != "":
			for _, f := range c.files(it, it.Value) {
				out = append(out, c.testFile(ctx, it, f, base)...)
			}
		case it.Kind == yaml.MappingNode:
			t := base.clone()
			c.testFields(ctx, it, &t, false)
			out = append(out, expand(t.filled())...)
		default:
			c.problem(it, "test: not converted (a test is a mapping with vars: and assert:, or the name of a file of tests)")
		}
	}
	return out
}

// scenarios are promptfoo's scenarios: each of a scenario's tests once
// per entry of its config, the entry's vars and asserts between
// defaultTest's and the test's.
func (c *converter) scenarios(ctx context.Context, v *yaml.Node, base test) []test {
	var out []test
	for _, sc := range entries(v) {
		if sc.Kind != yaml.MappingNode || valueOf(sc, "tests") == nil {
			c.problem(sc, "scenario: not converted (a scenario is {config: [...], tests: [...]})")
			continue
		}
		bases := []test{base}
		if cfg := valueOf(sc, "config"); cfg != nil {
			bases = nil
			for _, entry := range entries(cfg) {
				if entry.Kind != yaml.MappingNode {
					c.problem(entry, "scenario config: not converted (an entry is a mapping with vars: and assert:)")
					continue
				}
				b := base.clone()
				c.testFields(ctx, entry, &b, false)
				bases = append(bases, b)
			}
		}
		for i := 0; i+1 < len(sc.Content); i += 2 {
			if k := sc.Content[i]; k.Value != "config" && k.Value != "tests" && k.Value != "description" {
				c.problem(k, "scenario %s: not converted", k.Value)
			}
		}
		for _, b := range bases {
			out = append(out, c.tests(ctx, valueOf(sc, "tests"), b)...)
		}
	}
	return out
}

// expand is promptfoo's test per combination of the values of its list
// vars.
func expand(t test) []test {
	out := []test{t}
	names := make([]string, 0, len(t.vars))
	for k := range t.vars {
		names = append(names, k)
	}
	sort.Strings(names)
	for _, name := range names {
		list, ok := t.vars[name].([]any)
		if !ok || len(list) == 0 {
			continue
		}
		var next []test
		for _, o := range out {
			for _, v := range list {
				x := o.clone()
				x.vars[name] = v
				next = append(next, x.filled())
			}
		}
		out = next
	}
	return out
}

// testFields reads a test's fields into t.
func (c *converter) testFields(ctx context.Context, v *yaml.Node, t *test, isDefault bool) {
	where := "test"
	if isDefault {
		where = "defaultTest"
	}
	for i := 0; i+1 < len(v.Content); i += 2 {
		k, x := v.Content[i], v.Content[i+1]
		switch k.Value {
		case "description":
			if !isDefault {
				t.description = x.Value
				continue
			}
		case "vars":
			if x.Kind == yaml.MappingNode {
				c.vars(ctx, x, t)
				continue
			}
		case "assert":
			if x.Kind == yaml.SequenceNode {
				for _, a := range x.Content {
					if conv, ok := c.kept(a); ok {
						t.asserts = append(t.asserts, conv)
					}
				}
				continue
			}
		case "threshold":
			if f, err := strconv.ParseFloat(x.Value, 64); err == nil && x.Kind == yaml.ScalarNode {
				t.threshold = &f
				continue
			}
		}
		c.problem(k, "%s %s: not converted", where, k.Value)
	}
}

// vars reads a test's vars; a file:// value is the file's text.
func (c *converter) vars(ctx context.Context, x *yaml.Node, t *test) {
	for i := 0; i+1 < len(x.Content); i += 2 {
		name, n := x.Content[i].Value, x.Content[i+1]
		val := dsl.Plain(n)
		if s, isText := val.(string); isText && strings.HasPrefix(s, "file://") {
			var ok bool
			if val, ok = c.varFile(ctx, n, name, s); !ok {
				continue
			}
		}
		if list, ok := val.([]any); ok {
			c.problem(n, "var %s: a list of %d values: one item per value, as promptfoo runs the test once per value", name, len(list))
		}
		t.vars[name] = val
	}
}

// kept is an assert as the dataset keeps it: converted, or else with why
// not, so that its item's checks show it as not checked. ok is false
// only for an assert with no type to keep.
func (c *converter) kept(n *yaml.Node) (assert, bool) {
	before := len(c.problems)
	if a, ok := c.assert(n); ok {
		return a, true
	}
	typ := valueOf(n, "type")
	if typ == nil || typ.Kind != yaml.ScalarNode {
		return assert{}, false
	}
	why := "not converted"
	if len(c.problems) > before {
		why = c.problems[len(c.problems)-1].What
	}
	return assert{Type: typ.Value, Value: dsl.Plain(valueOf(n, "value")), NotConverted: why}, true
}

func (c *converter) assert(n *yaml.Node) (assert, bool) {
	typ := valueOf(n, "type")
	if typ == nil {
		c.problem(n, "assert: not converted (no type:; $ref and assert-sets are not converted)")
		return assert{}, false
	}
	a := assert{Type: typ.Value, Value: dsl.Plain(valueOf(n, "value"))}
	base := strings.TrimPrefix(a.Type, "not-")
	if base == "javascript" {
		return c.script(n, typ, a)
	}
	if _, ok := checks[base]; !ok && base != "llm-rubric" {
		c.problem(typ, "assert type %s: not converted (converted: %s)", a.Type, strings.Join(convertible(), ", "))
		return assert{}, false
	}
	if base == "llm-rubric" && a.Type != base {
		c.problem(typ, "assert type %s: not converted", a.Type)
		return assert{}, false
	}
	for i := 0; i+1 < len(n.Content); i += 2 {
		switch k := n.Content[i]; k.Value {
		case "type", "value":
		case "threshold", "weight":
			f, err := strconv.ParseFloat(n.Content[i+1].Value, 64)
			if err != nil {
				c.problem(n.Content[i+1], "%s: %q is not a number", k.Value, n.Content[i+1].Value)
				return assert{}, false
			}
			if k.Value == "weight" {
				a.Weight = &f
			} else {
				a.Threshold = &f
			}
		default:
			c.problem(k, "assert %s: not converted (the check is, without it)", k.Value)
		}
	}
	if d, ok := defaultThreshold[base]; ok && a.Threshold == nil {
		a.Threshold = &d
	}
	switch base {
	case "similar":
		c.problem(typ, "assert %s: converted approximately: flowrun's similarity() compares characters (edit distance), not embeddings, at the same threshold", a.Type)
	case "levenshtein":
		c.problem(typ, "assert %s: converted approximately: flowrun's edit distance also counts two swapped characters as one edit", a.Type)
	case "rouge-n":
		c.problem(typ, "assert %s: converted approximately: flowrun has ROUGE-L (longest common subsequence of words), not ROUGE-N, compared at the same threshold", a.Type)
	case "cost", "latency":
		if a.Threshold == nil {
			c.problem(typ, "assert %s: not converted (it needs threshold:)", a.Type)
			return assert{}, false
		}
	}
	if slices.Contains(textValued, base) && a.Value != nil {
		a.Value = text(a.Value)
	}
	if slices.Contains(listValued, base) {
		list, ok := a.Value.([]any)
		if !ok {
			c.problem(typ, "assert %s: not converted (its value: a list of texts)", a.Type)
			return assert{}, false
		}
		texts := make([]any, len(list))
		for i, x := range list {
			texts[i] = text(x)
		}
		a.Value = texts
	}
	c.used[a.Type] = true
	return a, true
}

// script translates a javascript assert that is one expression over
// output and context.vars; any other is listed with the reason.
func (c *converter) script(n, typ *yaml.Node, a assert) (assert, bool) {
	src, ok := a.Value.(string)
	if !ok || strings.HasPrefix(src, "file://") {
		c.problem(typ, "assert type %s: not converted (a script in a file is not)", a.Type)
		return assert{}, false
	}
	cond, err := jsToExpr(src)
	if err != nil {
		c.problem(typ, "assert type %s: not converted: %v (what is: an expression over output and context.vars, or a body of const bindings and a return of one)", a.Type, err)
		return assert{}, false
	}
	for i := 0; i+1 < len(n.Content); i += 2 {
		switch k := n.Content[i]; k.Value {
		case "type", "value":
		case "weight":
			f, err := strconv.ParseFloat(n.Content[i+1].Value, 64)
			if err != nil {
				c.problem(n.Content[i+1], "weight: %q is not a number", n.Content[i+1].Value)
				return assert{}, false
			}
			a.Weight = &f
		default:
			c.problem(k, "assert %s: not converted (the check is, without it)", k.Value)
		}
	}
	c.scripts[src] = cond
	c.used[a.Type] = true
	return a, true
}

func convertible() []string {
	out := []string{"llm-rubric"}
	for k := range checks {
		out = append(out, k)
	}
	sort.Strings(out)
	return out
}

// text is a value as promptfoo compares it with output text.
func text(v any) string {
	if s, ok := v.(string); ok {
		return s
	}
	b, _ := json.Marshal(v)
	return string(b)
}

// inputDoc is a pipeline input.
type inputDoc struct {
	Type string `yaml:"type,omitempty"`
}

// inputs are the variables the prompts read, typed by the values tests
// give them (text when they disagree or give none).
func (c *converter) inputs(prompts []prompt, tests []test) map[string]inputDoc {
	out := map[string]inputDoc{}
	for _, p := range prompts {
		for _, name := range p.vars {
			typ := ""
			for _, t := range tests {
				if v, ok := t.vars[name]; ok {
					vt := jsonType(v)
					switch {
					case typ == "" || typ == vt:
						typ = vt
					case (typ == "integer" || typ == "number") && (vt == "integer" || vt == "number"):
						typ = "number" // 3 in one test, 3.5 in another
					default:
						typ = "mixed"
					}
				}
			}
			if typ == "" || typ == "mixed" {
				typ = "string"
			}
			out[name] = inputDoc{Type: typ}
		}
	}
	return out
}

func jsonType(v any) string {
	switch v.(type) {
	case string:
		return "string"
	case bool:
		return "boolean"
	case int, int64:
		return "integer"
	case float64:
		return "number"
	case []any:
		return "array"
	case map[string]any:
		return "object"
	}
	return "mixed"
}

type pipelineDoc struct {
	Version     int                 `yaml:"version"`
	Name        string              `yaml:"name"`
	Description string              `yaml:"description,omitempty"`
	Inputs      map[string]inputDoc `yaml:"inputs,omitempty"`
	Models      map[string]modelDoc `yaml:"models,omitempty"`
	Tools       map[string]toolDoc  `yaml:"tools,omitempty"`
	Nodes       []nodeDoc           `yaml:"nodes"`
	Outputs     map[string]string   `yaml:"outputs"`
	Score       *scoreDoc           `yaml:"score,omitempty"`
}

type nodeDoc struct {
	ID   string       `yaml:"id"`
	When string       `yaml:"when,omitempty"`
	Code *codeDoc     `yaml:"code,omitempty"`
	LLM  *llmDoc      `yaml:"llm,omitempty"`
	Tool *toolCallDoc `yaml:"tool,omitempty"`
	Map  *mapDoc      `yaml:"map,omitempty"`
}

type codeDoc struct {
	Language string            `yaml:"language"`
	Source   map[string]string `yaml:"source"`
	Call     string            `yaml:"call"`
	Args     []string          `yaml:"args"`
}

type mapDoc struct {
	Over   string    `yaml:"over"`
	Result string    `yaml:"result"`
	Body   []nodeDoc `yaml:"body"`
}

type llmDoc struct {
	System       string         `yaml:"system,omitempty"`
	Prompt       string         `yaml:"prompt"`
	Images       []string       `yaml:"images,omitempty"`
	OutputSchema map[string]any `yaml:"output_schema,omitempty"`
	Temperature  *float64       `yaml:"temperature,omitempty"`
	MaxTokens    int            `yaml:"max_tokens,omitempty"`
}

type scoreDoc struct {
	Pass     string `yaml:"pass,omitempty"`
	Pipeline string `yaml:"pipeline,omitempty"`
}

func (c *converter) pipeline(name, description string, p prompt, inputs map[string]inputDoc, model modelDoc, target *endpoint, rubric bool) ([]byte, error) {
	in := map[string]inputDoc{}
	for _, v := range p.vars {
		in[v] = inputs[v]
	}
	doc := pipelineDoc{Version: 1, Name: name, Inputs: in,
		Description: strings.TrimSpace("Imported from promptfoo. " + description),
		Models:      map[string]modelDoc{"default": model},
		Nodes:       []nodeDoc{{ID: "answer", LLM: &llmDoc{System: p.system, Prompt: p.text, Images: p.images, Temperature: p.temperature, MaxTokens: p.maxTokens}}},
		Outputs:     map[string]string{"text": "nodes.answer.text"},
		Score:       &scoreDoc{Pass: c.checksExpr("", false)},
	}
	if p.script != nil {
		id := model.id
		if id == "" {
			id = "openai:" + model.Model // the model the pipelines fall back to
		}
		doc.Nodes = p.script.nodes(p.vars, id)
		doc.Outputs["text"] = "nodes.answer?.text" // no model call when the function failed
		doc.Outputs[promptError] = "nodes.prompt.ok ? nil : nodes.prompt.error.class + \": \" + nodes.prompt.error.message"
		doc.Score.Pass = c.checksExpr("", true)
	}
	if target != nil {
		doc.Models = nil
		doc.Tools = map[string]toolDoc{endpointTool: target.tool}
		doc.Nodes = []nodeDoc{{ID: "answer", Tool: target.call(p, inputs)}}
		doc.Outputs = map[string]string{"text": target.output}
	}
	if rubric {
		// The judge checks every assert, so that a rubric counts in the
		// item's pass as in promptfoo's.
		doc.Score = &scoreDoc{Pipeline: Judge}
	}
	return marshal(doc)
}

// checksExpr is the pass metric: a check per assert of the item, each
// checked by its type (only the types some test uses are written), one
// that was not converted not checked; with the test's threshold. A test
// without asserts passes, as promptfoo passes it ("No assertions").
// rubric, in the judge, is what a rubric's check is; "" elsewhere, where
// there is none.
//
// With scriptError, the output prompt_error (a prompt function that
// failed) fails the item as the one check, as promptfoo fails a test
// whose prompt cannot be made, whatever its threshold.
func (c *converter) checksExpr(rubric string, scriptError bool) string {
	var types []string
	for t := range c.used {
		if t != "llm-rubric" {
			types = append(types, t)
		}
	}
	sort.Strings(types)
	var b strings.Builder
	b.WriteString("{checks: ")
	if scriptError {
		b.WriteString("outputs.prompt_error != nil ? [{pass: false, name: \"prompt function\", reason: outputs.prompt_error}] :\n")
	}
	b.WriteString("len(item.asserts) == 0 ? [{pass: true, name: \"no asserts\", reason: \"promptfoo passes a test that has none\"}] : map(item.asserts, {{\n  pass: .not_converted != nil ? nil :\n")
	if rubric != "" {
		fmt.Fprintf(&b, "  .type == \"llm-rubric\" ? %s :\n", rubric)
	}
	for _, t := range types {
		if strings.TrimPrefix(t, "not-") == "javascript" {
			c.scriptBranches(&b, t)
			continue
		}
		cond := checks[strings.TrimPrefix(t, "not-")]
		if strings.HasPrefix(t, "not-") {
			cond = "!(" + cond + ")"
		}
		fmt.Fprintf(&b, "  .type == %q ? %s :\n", t, cond)
	}
	b.WriteString("  nil,\n")
	b.WriteString("  name: .type + (.value == nil ? \"\" : \": \" + (type(.value) == \"string\" ? .value : toJSON(.value))),\n")
	b.WriteString("  weight: .weight ?? 1,\n")
	if rubric != "" {
		b.WriteString("  score: .type == \"llm-rubric\" && .not_converted == nil ? nodes.grade[#index]?.score : nil,\n")
		fmt.Fprintf(&b, "  reason: .not_converted ?? (.type == \"llm-rubric\" ? nodes.grade[#index]?.reason : %s),\n", c.scriptReasons())
	} else {
		fmt.Fprintf(&b, "  reason: .not_converted ?? %s,\n", c.scriptReasons())
	}
	if scriptError {
		b.WriteString("}}), threshold: outputs.prompt_error != nil ? nil : item.threshold}\n")
	} else {
		b.WriteString("}}), threshold: item.threshold}\n")
	}
	return b.String()
}

// scriptBranches are the pass metric's branches for the javascript
// asserts translated, one per source.
func (c *converter) scriptBranches(b *strings.Builder, typ string) {
	for _, src := range slices.Sorted(maps.Keys(c.scripts)) {
		s := c.scripts[src]
		cond := s.Expr
		if typ != "javascript" {
			cond = "!(" + cond + ")"
		}
		if s.Parses != "" {
			// JSON.parse of what is not JSON throws, and promptfoo fails
			// that one assert (a not- one too): so does the check.
			cond = "!(" + s.Parses + ") ? false : " + cond
		}
		fmt.Fprintf(b, "  .type == %q && .value == %q ? %s :\n", typ, src, cond)
	}
}

// scriptReasons is the reason of a translated javascript assert whose
// JSON.parse meets what is not JSON, as promptfoo gives it; nil
// elsewhere.
func (c *converter) scriptReasons() string {
	var parts []string
	for _, src := range slices.Sorted(maps.Keys(c.scripts)) {
		if guard := c.scripts[src].Parses; guard != "" {
			parts = append(parts, fmt.Sprintf("(.type == \"javascript\" || .type == \"not-javascript\") && .value == %q && !(%s) ? \"JSON.parse threw: the output is not JSON, so the assert fails\" :", src, guard))
		}
	}
	if len(parts) == 0 {
		return "nil"
	}
	return "(" + strings.Join(parts, " ") + " nil)"
}

// judgeDoc checks the asserts of an item: each llm-rubric by a call to
// the model the pipeline uses (an item without one makes no call), the
// others as the pipeline would.
func (c *converter) judgeDoc(model modelDoc) pipelineDoc {
	const graded = `nodes.grade[#index]?.pass == true && (.threshold == nil || (nodes.grade[#index]?.score ?? 0) >= .threshold)`
	return pipelineDoc{Version: 1, Name: "rubric_judge",
		Description: "Checks an output against the asserts of its item, grading each llm-rubric (imported from promptfoo).",
		Inputs:      map[string]inputDoc{"item": {Type: "object"}, "outputs": {Type: "object"}, "run": {Type: "object"}},
		Models:      map[string]modelDoc{"default": model},
		Nodes: []nodeDoc{{ID: "grade", Map: &mapDoc{Over: "inputs.item.asserts",
			Result: "nodes.rubric == nil ? nil : nodes.rubric.json",
			Body: []nodeDoc{{ID: "rubric", When: `item.type == "llm-rubric" && item.not_converted == nil`, LLM: &llmDoc{
				System: "You grade an output against a rubric. Pass it only if it meets the rubric. Give a score from 0 to 1 for how well it meets it, and say why in one or two sentences.",
				Prompt: "Output:\n${{ inputs.outputs.text }}\n\nRubric:\n${{ item.value }}",
				OutputSchema: map[string]any{"type": "object", "required": []any{"pass", "score", "reason"}, "additionalProperties": false,
					"properties": map[string]any{"pass": map[string]any{"type": "boolean"}, "score": map[string]any{"type": "number"}, "reason": map[string]any{"type": "string"}}},
			}}}}}},
		Outputs: map[string]string{"pass": inJudge(c.checksExpr(graded, c.promptFunctions))},
	}
}

// rootRE is a use of what a metric reads (item, outputs, run), or a
// string literal (skipped).
var rootRE = regexp.MustCompile(`"(?:[^"\\]|\\.)*"|[A-Za-z0-9_.]?(?:item|outputs|run)\.`)

// inJudge is a metric's expression as the judge computes it, where what a
// metric reads are its inputs (and item and run are reserved names).
func inJudge(src string) string {
	return rootRE.ReplaceAllStringFunc(src, func(m string) string {
		switch m {
		case "item.", "outputs.", "run.":
			return "inputs." + m
		}
		return m
	})
}

func marshal(v any) ([]byte, error) {
	var b bytes.Buffer
	enc := yaml.NewEncoder(&b)
	enc.SetIndent(2)
	if err := enc.Encode(v); err != nil {
		return nil, fmt.Errorf("writing the converted pipeline: %w", err)
	}
	if err := enc.Close(); err != nil {
		return nil, err
	}
	return b.Bytes(), nil
}

// dataset is one JSON line per test: its vars, its converted asserts,
// and its description as id when every test has a distinct one.
func dataset(tests []test) []byte {
	ids := map[string]bool{}
	for _, t := range tests {
		if t.description != "" {
			ids[t.description] = true
		}
	}
	named := len(ids) == len(tests)
	var b bytes.Buffer
	for _, t := range tests {
		item := map[string]any{}
		for k, v := range t.vars {
			item[k] = v
		}
		asserts := t.asserts
		if asserts == nil {
			asserts = []assert{}
		}
		item["asserts"] = asserts
		if t.threshold != nil {
			item["threshold"] = *t.threshold
		}
		if named {
			item["id"] = t.description
		}
		line, _ := json.Marshal(item)
		b.Write(line)
		b.WriteByte('\n')
	}
	return b.Bytes()
}
