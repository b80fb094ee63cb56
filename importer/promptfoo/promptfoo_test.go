package promptfoo

import (
	"context"
	"encoding/json"
	"errors"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/flowrun/flowrun/dsl"
)

func convert(t *testing.T, name string) *Result {
	t.Helper()
	res, err := Convert(context.Background(), filepath.Join("testdata", name, "promptfooconfig.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	return res
}

func problems(res *Result) string {
	var out []string
	for _, p := range res.Problems {
		out = append(out, p.String())
	}
	return strings.Join(out, "\n")
}

func items(t *testing.T, res *Result) []map[string]any {
	t.Helper()
	var out []map[string]any
	for _, line := range strings.Split(strings.TrimSpace(string(res.Files[Dataset])), "\n") {
		var m map[string]any
		if err := json.Unmarshal([]byte(line), &m); err != nil {
			t.Fatalf("dataset line %q: %v", line, err)
		}
		out = append(out, m)
	}
	return out
}

// Two inline prompts become two pipelines; the first provider is their
// model and the second one a model a run may swap in.
func TestConvertGettingStarted(t *testing.T) {
	res := convert(t, "getting_started")
	if len(res.Problems) != 0 {
		t.Errorf("problems:\n%s", problems(res))
	}
	if strings.Join(res.Pipelines, ",") != "pipeline.yaml,pipeline_2.yaml" || strings.Join(res.Models, ",") != "gpt-4.1,o4-mini" {
		t.Errorf("pipelines %v, models %v", res.Pipelines, res.Models)
	}
	p := string(res.Files["pipeline.yaml"])
	for _, want := range []string{
		"prompt: 'Convert this English to ${{ inputs.language }}: ${{ inputs.input }}'",
		"model: gpt-4.1\n", "language:\n    type: string", `.type == "contains" ? outputs.text contains .value :`,
		`.type == "icontains" ? lower(outputs.text) contains lower(.value) :`,
	} {
		if !strings.Contains(p, want) {
			t.Errorf("pipeline.yaml lacks %q:\n%s", want, p)
		}
	}
	if strings.Contains(p, "judge") || res.Files[Judge] != nil {
		t.Error("no llm-rubric, yet a judge")
	}
	it := items(t, res)
	if len(it) != 2 || it[1]["language"] != "Spanish" || it[1]["id"] != nil {
		t.Errorf("items %v", it)
	}
}

// What is not converted is listed by line and column, in file order; a
// file:// prompt with --- gives one pipeline per prompt; a python assert
// is kept in the item with why it was not converted (its check is not
// checked), a $ref (no type) is dropped, the rest kept (a one-line
// javascript expression is translated).
func TestConvertSimpleTestListsWhatItCannot(t *testing.T) {
	res := convert(t, "simple_test")
	want := []string{
		"simple_test/promptfooconfig.yaml:33:15: assert type python: not converted",
		"simple_test/promptfooconfig.yaml:35:15: assert similar: converted approximately",
		"simple_test/promptfooconfig.yaml:44:9: assert: not converted (no type:; $ref and assert-sets are not converted)",
		"simple_test/promptfooconfig.yaml:46:1: outputPath: not converted",
		"simple_test/promptfooconfig.yaml:48:1: assertionTemplates: not converted",
	}
	got := problems(res)
	if n := len(res.Problems); n != len(want) {
		t.Errorf("%d problems, want %d:\n%s", n, len(want), got)
	}
	for i, w := range want {
		if i >= len(res.Problems) || !strings.Contains(res.Problems[i].String(), w) {
			t.Errorf("problem %d: want %q in\n%s", i, w, got)
		}
	}
	if len(res.Pipelines) != 2 || !strings.Contains(string(res.Files["pipeline_2.yaml"]), "Rephrase this like a pirate: ${{ inputs.body }}") {
		t.Errorf("pipelines %v:\n%s", res.Pipelines, res.Files["pipeline_2.yaml"])
	}
	if !strings.Contains(string(res.Files["pipeline.yaml"]), "pipeline: judge.yaml") || res.Files[Judge] == nil {
		t.Error("llm-rubric wants the judge")
	}
	it := items(t, res)
	if it[0]["id"] != "Check for exact match" || it[0]["body"] != "Yes" {
		t.Errorf("first item %v", it[0])
	}
	asserts := it[3]["asserts"].([]any)
	py, sim := asserts[1].(map[string]any), asserts[2].(map[string]any)
	if len(asserts) != 3 || py["type"] != "python" || !strings.HasPrefix(py["not_converted"].(string), "assert type python: not converted") ||
		sim["type"] != "similar" || sim["threshold"] != 0.75 || sim["not_converted"] != nil {
		t.Errorf("similar item's asserts %v", asserts)
	}
}

// defaultTest's vars and asserts apply to every test; a test's own vars
// win; a schema on is-json is kept; provider config becomes the model's.
func TestConvertJSONOutputDefaults(t *testing.T) {
	res := convert(t, "json_output")
	got := problems(res)
	for _, want := range []string{":31:5: test options: not converted"} {
		if !strings.Contains(got, want) {
			t.Errorf("problems lack %q:\n%s", want, got)
		}
	}
	it := items(t, res)
	if len(it) != 3 || it[0]["item"] != "Banana" || it[2]["item"] != "Apple" || it[2]["id"] != nil {
		t.Fatalf("items %v", it)
	}
	first := it[0]["asserts"].([]any)
	if len(first) != 4 || first[0].(map[string]any)["type"] != "cost" || first[3].(map[string]any)["type"] != "regex" {
		t.Errorf("Banana's asserts %v", first)
	}
	passion := it[1]["asserts"].([]any)
	schema := passion[1].(map[string]any)["value"].(map[string]any)
	if schema["type"] != "object" {
		t.Errorf("is-json schema %v", schema)
	}
	if anyOf := passion[2].(map[string]any); anyOf["type"] != "contains-any" || len(anyOf["value"].([]any)) != 4 {
		t.Errorf("contains-any %v", anyOf)
	}
	p := string(res.Files["pipeline.yaml"])
	if len(res.Problems) != 1 {
		t.Errorf("problems:\n%s", got)
	}
	if !strings.Contains(p, "temperature: 0\n") || !strings.Contains(p, "max_tokens: 300") || !strings.Contains(p, `.type == "not-contains" ? !(outputs.text contains .value) :`) {
		t.Errorf("pipeline:\n%s", p)
	}
}

// A prompt with a Nunjucks filter, a provider that is not OpenAI's and a
// file var are refused by line; a configuration with no prompt left is
// an error.
func TestConvertRefusals(t *testing.T) {
	dir := t.TempDir()
	cfg := filepath.Join(dir, "promptfooconfig.yaml")
	write := func(src string) {
		if err := os.WriteFile(cfg, []byte(src), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	write(`prompts:
  - 'Say {{ name | allcaps }}'
  - 'Say {{ name }}'
providers: [anthropic:messages:claude-sonnet-4, 'openai:embedding:text-embedding-3-small']
tests:
  - vars: {name: file://name.txt}
  - vars: {name: [Ann, Bob]}
`)
	res, err := Convert(context.Background(), cfg)
	if err != nil {
		t.Fatal(err)
	}
	got := problems(res)
	for _, want := range []string{
		`:2:5: prompt: not converted: {{ name | allcaps }}: the filter allcaps is not translated`,
		`:4:13: provider anthropic:messages:claude-sonnet-4: not converted`,
		`:4:49: provider openai:embedding:text-embedding-3-small: not converted`,
		`:1:1: providers: none converted; the pipelines fall back to the model gpt-4.1-mini (OpenAI's)`,
		`:6:18: var name: name.txt: not read: no such file in the configuration's directory`,
	} {
		if !strings.Contains(got, want) {
			t.Errorf("problems lack %q:\n%s", want, got)
		}
	}
	write("prompts: ['{% if x %}y{% endif %}', file://make.py]\n")
	_, err = Convert(context.Background(), cfg)
	var refused *RefusedError
	if !errors.As(err, &refused) || len(refused.Why) != 2 || !strings.Contains(err.Error(), ":1:11: prompt: not converted: it uses a Nunjucks tag or comment") ||
		!strings.Contains(err.Error(), ":1:37: prompt make.py: not converted (a prompt built by a script is not)") {
		t.Errorf("no prompt left: %v", err)
	}
	write("prompts: ['Context: {{#each chunks}}- {{this}} {{/each}}']\n")
	if _, err := Convert(context.Background(), cfg); err == nil || !strings.Contains(err.Error(), ":1:11: prompt: not converted: {{/each}}: it is a Handlebars block, which promptfoo's Nunjucks cannot parse either") {
		t.Errorf("a Handlebars block: %v", err)
	}
	write("prompts: ['Say {{prompt}}']\nredteam: {plugins: [pii]}\n")
	if res, err := Convert(context.Background(), cfg); err != nil || !strings.Contains(problems(res), ":2:1: redteam: not converted: promptfoo makes red-team tests with a model (promptfoo redteam generate)") {
		t.Errorf("a red-team suite: %v", err)
	}
	write("prompts: [file://make.py:build]\n")
	if _, err := Convert(context.Background(), cfg); err == nil || !strings.Contains(err.Error(), ":1:11: prompt make.py:build: not converted (make.py is not in the configuration's directory; a Python prompt function runs in the sandbox from its file)") {
		t.Errorf("a prompt function: %v", err)
	}
	write("- a list\n")
	if _, err := Convert(context.Background(), cfg); err == nil || !strings.Contains(err.Error(), "a promptfoo configuration is a mapping") {
		t.Errorf("a list: %v", err)
	}
	write("prompts: [{raw: 'Hi {{x}}', label: hi, metadata: {team: a}}]\n")
	res, err = Convert(context.Background(), cfg)
	if err != nil || !strings.Contains(problems(res), ":1:40: prompt metadata: not converted") || len(res.Problems) != 2 {
		t.Errorf("a prompt's other keys: %v\n%s", err, problems(res))
	}
}

// TestWriteOverwritesNothing: Write writes every file into a new
// directory; when one of them is there already, it writes none.
func TestWriteOverwritesNothing(t *testing.T) {
	res := convert(t, "getting_started")
	dir := filepath.Join(t.TempDir(), "out")
	written, err := res.Write(dir)
	if err != nil || len(written) != len(res.Files) {
		t.Fatalf("wrote %v of %d files: %v", written, len(res.Files), err)
	}
	for _, path := range written {
		if b, err := os.ReadFile(path); err != nil || string(b) != string(res.Files[filepath.Base(path)]) {
			t.Errorf("%s: %v", path, err)
		}
	}
	again := filepath.Join(t.TempDir(), "again")
	if err := os.MkdirAll(again, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(again, Dataset), []byte("mine\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	written, err = res.Write(again)
	var exists *ExistsError
	if !errors.As(err, &exists) || exists.Path != filepath.Join(again, Dataset) || len(written) != 0 {
		t.Fatalf("Write over %s: %v, wrote %v", Dataset, err, written)
	}
	if entries, _ := os.ReadDir(again); len(entries) != 1 {
		t.Errorf("%d files in the directory, want only the one that was there", len(entries))
	}
}

// Prompts, tests and vars in files are read as promptfoo reads them: a
// prompt path without file://, chats in JSON and YAML, a prompt's own
// config, tests from CSV (__expected, __description), a glob of YAML
// files and JSONL, defaultTest from a file, and file:// vars.
func TestConvertReadsFiles(t *testing.T) {
	res := convert(t, "files")
	if len(res.Problems) != 0 {
		t.Errorf("problems:\n%s", problems(res))
	}
	want := map[string][]string{
		"pipeline.yaml":   {"prompt: 'Answer in one line: ${{ inputs.question }}'"},
		"pipeline_2.yaml": {"system: You answer ${{ inputs.context }} questions.", "prompt: ${{ inputs.question }}"},
		"pipeline_3.yaml": {"system: Be brief.", "prompt: 'Question: ${{ inputs.question }}'"},
		"pipeline_4.yaml": {"temperature: 0.2", "max_tokens: 50"},
	}
	for name, parts := range want {
		for _, w := range parts {
			if !strings.Contains(string(res.Files[name]), w) {
				t.Errorf("%s lacks %q:\n%s", name, w, res.Files[name])
			}
		}
	}
	it := items(t, res)
	if len(it) != 7 {
		t.Fatalf("%d items, want 7: %v", len(it), it)
	}
	asserts := func(i int) []any { return it[i]["asserts"].([]any) }
	for i := range it {
		if a := asserts(i)[0].(map[string]any); a["type"] != "not-contains" || a["value"] != "As an AI" {
			t.Errorf("item %d does not start with defaultTest's assert: %v", i+1, asserts(i))
		}
	}
	checks := []struct {
		item        int
		typ, field  string
		value, want any
	}{
		{0, "equals", "question", "4", "What is 2+2?"},
		{2, "icontains", "context", "paris", "general"},
		{4, "icontains", "question", "shakespeare", "Who wrote Hamlet?"},
		{5, "contains", "context", "4", "animals"},
		{6, "contains", "question", `{"topic":"physics"}`, "What is the speed of light?\n"},
	}
	for _, c := range checks {
		a := asserts(c.item)[1].(map[string]any)
		if a["type"] != c.typ || a["value"] != c.value || it[c.item][c.field] != c.want {
			t.Errorf("item %d: %v", c.item+1, it[c.item])
		}
	}
	if anyOf := asserts(1)[1].(map[string]any); anyOf["type"] != "contains-any" || len(anyOf["value"].([]any)) != 2 {
		t.Errorf("CSV contains-any: %v", anyOf)
	}
	if it[6]["context"] != `{"topic":"physics"}` {
		t.Errorf("a YAML var file is its JSON text: %v", it[6])
	}
}

// A configuration without prompts: sends each test's prompt var, as
// promptfoo's {{prompt}}; tests that give none are listed.
func TestConvertNoPromptsIsPromptVar(t *testing.T) {
	res := convert(t, "no_prompts")
	if p := string(res.Files["pipeline.yaml"]); !strings.Contains(p, "prompt: ${{ inputs.prompt }}") {
		t.Errorf("pipeline:\n%s", p)
	}
	if len(res.Problems) != 0 {
		t.Errorf("problems:\n%s", problems(res))
	}
	cfg := configIn(t, "providers: [openai:gpt-4.1-mini]\ntests:\n  - vars: {question: Hi}\n  - vars: {prompt: Hi}\n")
	res, err := Convert(context.Background(), cfg)
	if err != nil {
		t.Fatal(err)
	}
	if got := problems(res); !strings.Contains(got, ":1:1: prompts: none given, so each test's prompt var is the prompt, as in promptfoo; 1 of 2 tests give none") {
		t.Errorf("problems:\n%s", got)
	}
}

// A var that is a number in one test and text in another is text in
// every item (it crashed the run before), an integer in one and a
// fraction in another a number, and a list var gives one item per value,
// as promptfoo runs the test once per value.
func TestConvertMixedAndListVars(t *testing.T) {
	cfg := configIn(t, "prompts: ['{{count}}']\ntests: [{vars: {count: 3}}, {vars: {count: 3.5}}]\n")
	res, err := Convert(context.Background(), cfg)
	if err != nil {
		t.Fatal(err)
	}
	if p := string(res.Files["pipeline.yaml"]); !strings.Contains(p, "count:\n    type: number") || items(t, res)[0]["count"] != 3.0 {
		t.Errorf("3 and 3.5 are numbers:\n%s\n%s", p, res.Files[Dataset])
	}
	res = convert(t, "mixed")
	it := items(t, res)
	var got []any
	for _, i := range it {
		got = append(got, i["number"])
	}
	if len(got) != 4 || got[0] != "3" || got[1] != "three" || got[2] != "5" || got[3] != "seven" {
		t.Errorf("numbers %v", got)
	}
	if got := problems(res); len(res.Problems) != 1 || !strings.Contains(got, ":8:20: var number: a list of 2 values: one item per value") {
		t.Errorf("problems:\n%s", got)
	}
}

// targets: is promptfoo's other name for providers:; an llm-rubric's
// threshold, an assert's weight and a test's threshold are kept in the
// item, for the judge's score and the checks' verdict.
func TestConvertTargetsAndRubricThreshold(t *testing.T) {
	cfg := configIn(t, `prompts: ['{{prompt}}']
targets:
  - id: groq:llama-3.1-8b-instant
tests:
  - vars: {prompt: Be kind}
    assert:
      - type: llm-rubric
        value: is kind
        threshold: 0.8
        weight: 2
    threshold: 0.5
`)
	res, err := Convert(context.Background(), cfg)
	if err != nil {
		t.Fatal(err)
	}
	if strings.Join(res.Models, ",") != "llama-3.1-8b-instant" {
		t.Errorf("models %v", res.Models)
	}
	if len(res.Problems) != 0 {
		t.Errorf("problems:\n%s", problems(res))
	}
	it := items(t, res)[0]
	if a := it["asserts"].([]any)[0].(map[string]any); a["threshold"] != 0.8 || a["weight"] != 2.0 || it["threshold"] != 0.5 {
		t.Errorf("item %v", it)
	}
}

// One-line javascript asserts over output and context.vars become expr
// conditions in the pass metric, keyed by their source; a script that is
// not one such expression is listed with its position and why.
func TestConvertTranslatesJavascript(t *testing.T) {
	cfg := configIn(t, `prompts: ['Classify: {{text}}']
providers: [openai:gpt-4.1-mini]
tests:
  - vars: {text: my card was charged twice, label: billing}
    assert:
      - type: javascript
        value: output.length < 200
      - type: javascript
        value: JSON.parse(output).category === 'billing'
      - type: javascript
        value: output.toLowerCase().includes(context.vars.label)
      - type: not-javascript
        value: "['bug', 'other'].includes(JSON.parse(output).category)"
      - type: javascript
        value: 'output.length <= 280 ? 1 : 0'
      - type: javascript
        value: |
          const words = output.split(/\s+/).length;
          return words < 50;
      - type: javascript
        value: output.sentiment === context.vars.label
      - type: javascript
        value: 1 / (output.length + 1)
      - type: javascript
        value: (output.length - 1) * 2 >= -4 / 2
      - type: javascript
        value: |
          // a category we route
          const data = JSON.parse(output);
          const category = data.category;
          return category === "billing" ||
            category === "bug";
      - type: javascript
        value: "(() => { const d = JSON.parse(output); return d.ok === true; })()"
      - type: javascript
        value: |
          const obj = JSON.parse(output);
          obj.brief !== undefined;
`)
	res, err := Convert(context.Background(), cfg)
	if err != nil {
		t.Fatal(err)
	}
	got := problems(res)
	for _, want := range []string{
		`:14:15: assert type javascript: not converted: a choice (? :) is a score`,
		`:16:15: assert type javascript: not converted: regular expressions are not translated`,
		`:35:15: assert type javascript: not converted: it does not end with a return: promptfoo gets no result from it`,
		`:20:15: assert type javascript: not converted: output.sentiment: output is the reply's text`,
		`:22:15: assert type javascript: not converted: it returns a score or a value, not true or false`,
	} {
		if !strings.Contains(got, want) {
			t.Errorf("problems lack %q:\n%s", want, got)
		}
	}
	if len(res.Problems) != 5 {
		t.Errorf("problems:\n%s", got)
	}
	p := string(res.Files["pipeline.yaml"])
	for _, want := range []string{
		`.type == "javascript" && .value == "output.length < 200" ? (len(outputs.text) < 200) :`,
		`.type == "javascript" && .value == "JSON.parse(output).category === 'billing'" ? !(json_valid(outputs.text)) ? false : (fromJSON(outputs.text)?.category == "billing") :`,
		`? (lower(outputs.text) contains item.label) :`,
		`.type == "not-javascript" && .value == "['bug', 'other'].includes(JSON.parse(output).category)" ? !(json_valid(outputs.text)) ? false : !((fromJSON(outputs.text)?.category in ["bug", "other"])) :`,
		`? (((len(outputs.text) - 1) * 2) >= (-4 / 2)) :`,
		`? !(json_valid(outputs.text)) ? false : let js_data = fromJSON(outputs.text); let js_category = js_data?.category; (js_category == "billing") || (js_category == "bug") :`,
		`? !(json_valid(outputs.text)) ? false : let js_d = fromJSON(outputs.text); (js_d?.ok == true) :`,
	} {
		if !strings.Contains(p, want) {
			t.Errorf("pipeline lacks %q:\n%s", want, p)
		}
	}
	dir := filepath.Join(t.TempDir(), "out")
	if _, err := res.Write(dir); err != nil {
		t.Fatal(err)
	}
	if _, diags := dsl.Load(filepath.Join(dir, "pipeline.yaml")); diags.HasErrors() {
		t.Errorf("the pipeline does not validate:\n%v", diags)
	}
}

// OpenAI-compatible providers become models with their server's base_url
// and key variable; a model id keeps its colons; a model id from the
// environment is listed.
func TestConvertCompatibleProviders(t *testing.T) {
	cfg := configIn(t, `prompts: ['Say {{x}}']
providers:
  - ollama:chat:llama3.1:8b
  - openrouter:meta-llama/llama-3-8b-instruct
  - id: azure:chat:my-deployment
    label: azure
    transform: output.trim()
    config: {apiHost: res.openai.azure.com}
  - openai:{{env.MODEL}}
tests: [{vars: {x: hi}}]
`)
	res, err := Convert(context.Background(), cfg)
	if err != nil {
		t.Fatal(err)
	}
	if got := strings.Join(res.Models, ","); got != "llama3.1:8b,meta-llama/llama-3-8b-instruct,my-deployment" {
		t.Errorf("models %s", got)
	}
	if p := string(res.Files["pipeline.yaml"]); !strings.Contains(p, "model: llama3.1:8b\n    base_url: http://localhost:11434/v1") {
		t.Errorf("pipeline:\n%s", p)
	}
	if got := problems(res); !strings.Contains(got, ":9:5: provider openai:{{env.MODEL}}: not converted: a model id from the environment is not") || !strings.Contains(got, ":7:5: provider transform: not converted") || strings.Contains(got, "label") {
		t.Errorf("problems:\n%s", got)
	}
}

// A scenario runs each of its tests once per entry of its config, the
// entry's vars filling the test's asserts, after defaultTest's.
func TestConvertScenarios(t *testing.T) {
	res := convert(t, "scenarios")
	it := items(t, res)
	if len(it) != 2 {
		t.Fatalf("items %v", it)
	}
	for i, want := range []string{"Hola mundo", "Bonjour le monde"} {
		asserts := it[i]["asserts"].([]any)
		if len(asserts) != 2 || asserts[0].(map[string]any)["type"] != "not-icontains" || asserts[1].(map[string]any)["value"] != want || it[i]["input"] != "Hello world" {
			t.Errorf("item %d: %v", i+1, it[i])
		}
	}
	if got := problems(res); len(res.Problems) != 1 || !strings.Contains(got, ":15:19: assert similar: converted approximately") {
		t.Errorf("problems (each once):\n%s", got)
	}
}

// CSV columns the importer does not convert are listed by row and
// column in the CSV file; an __expected in promptfoo's shorthand that
// names a script is translated like an assert, one naming an assert type
// not converted is listed, and other text is an equals.
func TestConvertCSVListsOtherColumns(t *testing.T) {
	cfg := configIn(t, "prompts: ['{{q}}']\ntests: file://cases.csv\n")
	writeFile(t, filepath.Join(filepath.Dir(cfg), "cases.csv"), "q,__expected,__metric,__prefix\nHi,javascript:output.length < 5,brevity,Say: \nHo,factuality:Ho is a word\nHa,yes: indeed\n")
	res, err := Convert(context.Background(), cfg)
	if err != nil {
		t.Fatal(err)
	}
	got := problems(res)
	for _, want := range []string{"cases.csv:2:33: test column __metric: not converted", "cases.csv:2:41: test column __prefix: not converted", "cases.csv:3:4: assert type factuality: not converted"} {
		if !strings.Contains(got, want) {
			t.Errorf("problems lack %q:\n%s", want, got)
		}
	}
	if p := string(res.Files["pipeline.yaml"]); !strings.Contains(p, `.value == "output.length < 5" ? (len(outputs.text) < 5) :`) {
		t.Errorf("pipeline:\n%s", p)
	}
	if a := items(t, res)[2]["asserts"].([]any)[0].(map[string]any); a["type"] != "equals" || a["value"] != "yes: indeed" {
		t.Errorf("text that names no assert type is an equals: %v", a)
	}
}

// Nunjucks output tags with fields and promptfoo's common filters become
// expressions in the prompt's ${{ }}; the pipeline validates.
func TestConvertNunjucksFilters(t *testing.T) {
	cfg := configIn(t, `prompts:
  - "Ask {{ vars.name }}"
  - "Tone: {{ (style | load).tone }}. Say {{ name | upper }} to {{ user.friends | join(', ') }}, {{ user.name | default('you') }}; {{ user.items[0] | dump }}"
tests:
  - vars: {style: '{"tone": "formal"}', name: hi, user: {name: Cy, friends: [Ann, Bob], items: [{a: 1}]}}
`)
	res, err := Convert(context.Background(), cfg)
	if err != nil {
		t.Fatal(err)
	}
	if got := problems(res); !strings.Contains(got, ":2:5: prompt: not converted: {{ vars.name }}: promptfoo has no variable vars") {
		t.Errorf("problems:\n%s", got)
	}
	p := string(res.Files["pipeline.yaml"])
	want := `Tone: ${{ (fromJSON(inputs.style))?.tone }}. Say ${{ upper(inputs.name) }} to ${{ join(inputs.user?.friends, ", ") }}, ${{ (inputs.user?.name ?? "you") }}; ${{ toJSON(inputs.user?.items[0]) }}`
	if !strings.Contains(p, want) {
		t.Errorf("pipeline lacks %s:\n%s", want, p)
	}
	dir := filepath.Join(t.TempDir(), "out")
	if _, err := res.Write(dir); err != nil {
		t.Fatal(err)
	}
	if _, diags := dsl.Load(filepath.Join(dir, "pipeline.yaml")); diags.HasErrors() {
		t.Errorf("the pipeline does not validate:\n%v", diags)
	}
}

// {% include "FILE" %} puts the file's text, itself a template, in the
// prompt; a file outside the configuration's directory, and a file that
// includes itself, are refused with the reason.
func TestConvertIncludes(t *testing.T) {
	cfg := configIn(t, `prompts:
  - |
    Follow these rules:
    {% include "rules/style.md" %}
    Review {{ diff }}
  - '{% include "../secret.md" %}'
  - '{% include "loop.md" %}'
tests: [{vars: {diff: x, tone: calm}}]
`)
	dir := filepath.Dir(cfg)
	if err := os.MkdirAll(filepath.Join(dir, "rules"), 0o755); err != nil {
		t.Fatal(err)
	}
	writeFile(t, filepath.Join(dir, "rules", "style.md"), "Be {{ tone }}.")
	writeFile(t, filepath.Join(filepath.Dir(dir), "secret.md"), "TOPSECRET")
	writeFile(t, filepath.Join(dir, "loop.md"), `{% include "loop.md" %}{% include "loop.md" %}`)
	res, err := Convert(context.Background(), cfg)
	if err != nil {
		t.Fatal(err)
	}
	if p := string(res.Files["pipeline.yaml"]); !strings.Contains(p, "Follow these rules:\n        Be ${{ inputs.tone }}.\n        Review ${{ inputs.diff }}") {
		t.Errorf("pipeline:\n%s", p)
	}
	got := problems(res)
	for _, want := range []string{
		`:6:5: prompt: not converted: {% include "../secret.md" %}: not read: it is outside the configuration's directory`,
		`:7:5: prompt: not converted: {% include "loop.md" %}: includes nested more than 8 deep`,
		`:2:5: prompt: {% include "rules/style.md" %} read from the configuration's directory; promptfoo reads includes from the directory it runs in`,
	} {
		if !strings.Contains(got, want) {
			t.Errorf("problems lack %q:\n%s", want, got)
		}
	}
	if strings.Contains(got+string(res.Files["pipeline.yaml"]), "TOPSECRET") || len(res.Pipelines) != 1 {
		t.Errorf("pipelines %v, problems:\n%s", res.Pipelines, got)
	}
}

// A prompt that looks like a path (a / in it) but names no file is the
// prompt's text, as promptfoo takes it; with file:// it is a file.
func TestConvertBarePathThatIsNoFileIsText(t *testing.T) {
	cfg := configIn(t, "prompts: ['Answer yes/no', 'file://yes/no']\ntests: [{vars: {}}]\n")
	res, err := Convert(context.Background(), cfg)
	if err != nil {
		t.Fatal(err)
	}
	if len(res.Pipelines) != 1 || !strings.Contains(string(res.Files["pipeline.yaml"]), "prompt: Answer yes/no") {
		t.Errorf("pipelines %v:\n%s", res.Pipelines, res.Files["pipeline.yaml"])
	}
	if got := problems(res); !strings.Contains(got, ":1:28: prompt yes/no: not read: no such file in the configuration's directory") {
		t.Errorf("problems:\n%s", got)
	}
}

// An http provider becomes an http tool every pipeline calls; what of
// its request or response cannot be is listed where it is written, and a
// provider whose request cannot be converted is listed as a whole.
func TestConvertHTTPEndpointLists(t *testing.T) {
	cases := []struct{ provider, want string }{
		{"{id: https, config: {url: 'http://localhost:8000/a', method: POST, body: {q: '{{prompt}}'}, transformResponse: 'json.a ? 1 : 2'}}",
			`:2:116: provider https: transformResponse "json.a ? 1 : 2": not converted (json, text and json.FIELD.FIELD are); the output is the response's body`},
		{"{id: http, config: {url: 'http://localhost:8000/a', body: {q: '{{prompt}}'}}}",
			":2:10: provider http: not converted: it has a body and the method GET (promptfoo's default); write method: POST"},
		{"{id: http, config: {url: 'http://localhost:8000/{{env.PATH}}', method: POST}}",
			":2:10: provider http: not converted: its url comes from vars or the environment; write it out"},
		{"{id: http, config: {url: 'http://localhost:8000/a', method: POST, body: {q: '{{vars.q}}'}}}",
			":2:77: provider http: body: not converted: {{vars.q}}: promptfoo has no variable vars"},
		{"{id: 'http://localhost:8000/a', config: {method: POST, body: {q: '{{q}}'}}}\n  - openai:gpt-4.1-mini",
			":3:5: provider openai:gpt-4.1-mini: not converted: the pipelines call one application's endpoint, or models, not both"},
	}
	for _, c := range cases {
		res, err := Convert(context.Background(), configIn(t, "providers:\n  - "+c.provider+"\ntests: [{vars: {prompt: hi, q: x}}]\n"))
		if err != nil {
			t.Fatal(err)
		}
		if got := problems(res); !strings.Contains(got, c.want) {
			t.Errorf("provider %s: problems\n%s\nwant %s", c.provider, got, c.want)
		}
	}
}

// Chat prompts with content parts: a user message's text and image_url
// parts become the prompt and images:; what the node would send
// otherwise (text after an image, an image outside the one user message,
// an option besides url, another part type) is refused with its reason,
// and joined text parts are listed.
func TestConvertChatContentParts(t *testing.T) {
	img := func(url string) string { return `{"type": "image_url", "image_url": {"url": "` + url + `"}}` }
	text := func(s string) string { return `{"type": "text", "text": "` + s + `"}` }
	user := func(parts ...string) string {
		return `{"role": "user", "content": [` + strings.Join(parts, ", ") + `]}`
	}
	for _, c := range []struct {
		name, chat, want string
	}{
		{"text and image", "[" + user(text("Describe {{q}}"), img("data:image/png;base64,{{pic}}")) + "]",
			"prompt: Describe ${{ inputs.q }}\n      images:\n        - data:image/png;base64,${{ inputs.pic }}"},
		{"two texts", "[" + user(text("One"), text("Two"), img("https://example.com/a.png")) + "]",
			"converted approximately: a user message's 2 text parts are sent as one, joined by line breaks"},
		{"text after image", "[" + user(img("https://example.com/a.png"), text("What is it?")) + "]",
			"not converted: a text part after an image part (the node sends its text first)"},
		{"system image", `[{"role": "system", "content": [` + img("https://example.com/a.png") + `]}, {"role": "user", "content": "hi"}]`,
			"not converted: images in a system message (only the user message's are)"},
		{"detail", `[{"role": "user", "content": [{"type": "image_url", "image_url": {"url": "https://example.com/a.png", "detail": "low"}}]}]`,
			"not converted: an image_url part with options besides url (detail is not converted)"},
		{"audio", `[{"role": "user", "content": [{"type": "input_audio", "input_audio": {}}]}]`,
			`not converted: a content part of type "input_audio" (text and image_url parts are converted)`},
		{"conversation", "[" + user(text("Look"), img("https://example.com/a.png")) + `, {"role": "assistant", "content": "A cat."}, {"role": "user", "content": "Sure?"}]`,
			"not converted: images in a conversation of 3 messages (only a single user message's are)"},
	} {
		t.Run(c.name, func(t *testing.T) {
			cfg := configIn(t, "prompts: [file://chat.json]\ntests: [{vars: {q: it, pic: abc}}]\n")
			if err := os.WriteFile(filepath.Join(filepath.Dir(cfg), "chat.json"), []byte(c.chat), 0o644); err != nil {
				t.Fatal(err)
			}
			res, err := Convert(context.Background(), cfg)
			if err != nil {
				if !strings.Contains(err.Error(), ":1:11: prompt: "+c.want) {
					t.Errorf("want %q in %v", c.want, err)
				}
				return
			}
			if got := string(res.Files["pipeline.yaml"]) + problems(res); !strings.Contains(got, c.want) {
				t.Errorf("want %q in\n%s", c.want, got)
			}
		})
	}
}

// A configuration that is not YAML is refused at the line and column of
// the mistake, with the hint a pipeline file's YAML error gets: a
// question mark in a flow mapping's plain value, which yaml.v3 cannot
// read, says to quote it.
func TestConvertNotYAMLSaysWhere(t *testing.T) {
	cfg := configIn(t, "prompts: ['Answer {{q}}']\ntests:\n  - vars: {q: What is 2+2?}\n")
	_, err := Convert(context.Background(), cfg)
	if err == nil || !strings.Contains(err.Error(), "promptfooconfig.yaml:3:11: not YAML: did not find expected ',' or '}': close this { mapping, and quote values that contain ': ', '?' or ','") {
		t.Errorf("got %v", err)
	}
}

// A Python prompt function converts to a code node that calls it with
// promptfoo's context, its file copied beside the pipelines; vars that
// only some tests give are listed, as is the provider id a --model run
// does not change. JavaScript ones and a function for an HTTP endpoint
// are refused by name.
func TestConvertPromptFunctions(t *testing.T) {
	cfg := configIn(t, `prompts: [file://p.py:make, file://p.js:make]
providers: [openai:gpt-4.1-mini, openai:gpt-4o]
tests:
  - vars: {topic: cats, extra: x}
  - vars: {topic: dogs}
`)
	if err := os.WriteFile(filepath.Join(filepath.Dir(cfg), "p.py"), []byte("def make(context):\n    return context['vars']['topic']\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	res, err := Convert(context.Background(), cfg)
	if err != nil {
		t.Fatal(err)
	}
	if string(res.Files["p.py"]) != "def make(context):\n    return context['vars']['topic']\n" || len(res.Pipelines) != 1 {
		t.Errorf("files %v, pipelines %v", slices.Collect(maps.Keys(res.Files)), res.Pipelines)
	}
	for _, want := range []string{
		"call: make",
		`- '{"vars": {"topic": inputs.topic}, "provider": {"id": "openai:gpt-4.1-mini"}}'`,
		"when: nodes.prompt.ok",
		"name: \"prompt function\", reason: outputs.prompt_error",
	} {
		if !strings.Contains(string(res.Files["pipeline.yaml"]), want) {
			t.Errorf("pipeline lacks %q:\n%s", want, res.Files["pipeline.yaml"])
		}
	}
	got := problems(res)
	for _, want := range []string{
		":1:11: prompt p.py:make: converted approximately: the function runs in the sandbox",
		":1:11: prompt p.py:make: vars extra are given by only some tests (or are not Python names): not passed to the function in context.vars",
		":1:11: prompt p.py:make: context.provider.id is openai:gpt-4.1-mini, the first provider's, in every run",
		":1:29: prompt p.js:make: not converted (a JavaScript or TypeScript prompt function is not, a Python one is",
	} {
		if !strings.Contains(got, want) {
			t.Errorf("problems lack %q:\n%s", want, got)
		}
	}
	cfg = configIn(t, "prompts: [file://p.py:make]\nproviders: [https://example.com/chat]\ntests: [{vars: {q: a}}]\n")
	if err := os.WriteFile(filepath.Join(filepath.Dir(cfg), "p.py"), []byte("def make(context):\n    return 'x'\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if _, err := Convert(context.Background(), cfg); err == nil || !strings.Contains(err.Error(), ":1:11: prompt p.py:make: not converted: a prompt function for an HTTP endpoint is not") {
		t.Errorf("a prompt function for an endpoint: %v", err)
	}
}
