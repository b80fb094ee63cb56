package dsl_test

import (
	"bytes"
	"encoding/json"
	"fmt"
	"sort"
	"strings"
	"testing"

	"github.com/santhosh-tekuri/jsonschema/v5"

	"github.com/flowrun/flowrun/dsl"
)

// pipelineURL is the $id of the pipeline schema.
const pipelineURL = "https://flowrun.dev/schemas/pipeline.schema.json"

// compile compiles the pipeline schema as an editor or another validator
// would, from its JSON text alone.
func compile(t *testing.T) *jsonschema.Schema {
	t.Helper()
	c := jsonschema.NewCompiler()
	c.Draft = jsonschema.Draft2020
	if err := c.AddResource(pipelineURL, bytes.NewReader(dsl.Schema())); err != nil {
		t.Fatalf("add schema resource: %v", err)
	}
	s, err := c.Compile(pipelineURL)
	if err != nil {
		t.Fatalf("compile schema: %v", err)
	}
	return s
}

// normalize round-trips a Go value through JSON so that it only holds the
// types the validator accepts (map[string]any, []any, json.Number, ...).
func normalize(t *testing.T, v any) any {
	t.Helper()
	b, err := json.Marshal(v)
	if err != nil {
		t.Fatalf("marshal: %v", err)
	}
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.UseNumber()
	var out any
	if err := dec.Decode(&out); err != nil {
		t.Fatalf("unmarshal: %v", err)
	}
	return out
}

type m = map[string]any
type l = []any

// validPipeline is pipelines/sir.yaml, extended so that every
// node kind and most optional fields appear at least once.
func validPipeline() m {
	params := func(field string) m {
		return m{"type": "object", "properties": m{field: m{"type": "string"}}, "required": l{field}}
	}
	return m{
		"version":     1,
		"name":        "sir",
		"description": "Translator/reasoner iterative refinement for visual QA.",
		"inputs": m{
			"question": m{"type": "string", "description": "The question.", "minLength": 1},
			"options":  m{"type": "array", "items": m{"type": "string"}, "default": l{}, "maxItems": 10},
			"image":    m{"type": "string", "format": "path"},
			"count":    m{"type": "integer", "minimum": 1, "maximum": 5, "default": 2},
			"mode":     m{"type": "string", "enum": l{"fast", "slow"}, "default": "fast"},
			"meta":     m{"type": "object", "properties": m{"k": m{"type": "string"}}, "required": l{"k"}},
		},
		"models": m{
			"default": m{"model": "gpt-4.1-mini", "temperature": 0},
			"vision": m{"model": "gpt-4.1", "api": "responses", "reasoning_effort": "low", "verbosity": "low",
				"top_p": 0.9, "max_tokens": 4096, "seed": 7, "base_url": "https://api.openai.com/v1",
				"api_key_env": "OPENAI_API_KEY", "rpm": 500, "tpm": 200000, "max_concurrency": 4, "timeout": "2m",
				"price": m{"input_per_mtok": 2.0, "output_per_mtok": 8.0, "cached_input_per_mtok": 0.5}},
		},
		"memories": m{
			"translator": m{"system": m{"file": "prompts/translator.md"}},
			"reasoner":   m{"system": "You reason about captions.", "description": "The reasoner's conversation."},
		},
		"tools": m{
			"ocr":                          m{"description": "Read the text in a region of the image.", "parameters": params("region"), "pipeline": "tools/ocr.yaml"},
			"terminate_and_output_caption": m{"description": "Output the final SIR.", "parameters": params("global_caption")},
			"terminate_and_answer":         m{"description": "Answer.", "parameters": params("answer")},
			"terminate_and_ask_translator": m{"description": "Ask for more.", "parameters": params("feedback")},
			"describe": m{"description": "Describe a region in words.", "parameters": params("region"),
				"llm": m{"model": "vision", "system": "Describe images.", "prompt": "Describe ${{ inputs.region }}.",
					"images": l{"${{ inputs.region }}"}, "output_schema": m{"type": "object"}, "repair_retries": 1,
					"temperature": 0, "max_tokens": 200}},
		},
		"http_get": m{"allow_hosts": l{"example.com"}, "timeout": "10s", "max_bytes": 65536},
		"env":      l{"OPENAI_API_KEY", "HOME"},
		"state":    m{"sir": "", "answer": nil, "scores": l{}},
		"limits":   m{"max_steps": 500, "max_cost_usd": 2.00, "timeout": "30m", "max_file_kb": 2048},
		"sandbox":  m{"language": "python", "timeout": "10s", "memory_mb": 256, "max_output_kb": 64},
		"nodes": l{
			m{"id": "refine", "description": "Refine until answered.", "loop": m{
				"max_iterations": 3,
				"until":          "state.answer != nil",
				"on_exhausted":   "continue",
				"body": l{
					m{"id": "translate",
						"agent": m{
							"memory":    "translator",
							"model":     "vision",
							"prompt":    "Question: ${{ inputs.question }}\n",
							"images":    l{"${{ inputs.image }}"},
							"tools":     l{"ocr"},
							"finish":    l{"terminate_and_output_caption"},
							"max_steps": 3, "tool_retries": 2, "temperature": 0.2, "max_tokens": 1000,
						},
						"set":   m{"sir": "nodes.translate.finish.args.global_caption"},
						"retry": m{"max_attempts": 3, "backoff": "1.5s", "retry_on": l{"rate_limit", "timeout", "server", "connection"}},
					},
					m{"id": "reason", "agent": m{"memory": "reasoner", "prompt": "${{ state.sir }}", "tools": l{"python_execute"},
						"finish": l{"terminate_and_answer", "terminate_and_ask_translator"}, "max_steps": 3}},
					m{"id": "route",
						"branch": l{
							m{"when": `nodes.reason.finish.name == "terminate_and_answer"`,
								"set":  m{"answer": "nodes.reason.finish.args.answer"},
								"next": "break"},
						},
						"default": "feedback",
					},
					m{"id": "feedback", "set": m{"sir": `state.sir + "\n\n--- REASONING FEEDBACK ---\n" + nodes.reason.finish.args.feedback`}},
				},
			}},
			m{"id": "summarize", "when": "state.answer != nil", "timeout": "1m", "on_error": "continue",
				"llm": m{"model": "default", "system": m{"file": "prompts/summary.md"}, "prompt": "Summarize: ${{ state.sir }}",
					"memory": "reasoner", "output_schema": m{"type": "object", "properties": m{"summary": m{"type": "string"}}},
					"repair_retries": 1, "temperature": 0, "max_tokens": 500, "images": l{}}},
			m{"id": "compute", "confirm": true, "code": m{"language": "python",
				"source": "def main(x):\n    return x * 2\n", "call": "main", "args": m{"x": 21},
				"limits": m{"timeout": "5s", "memory_mb": 128, "max_output_kb": 4}}},
			m{"id": "wasm_step", "code": m{"language": "wasm", "module": "bin/tool.wasm", "source": m{"file": "code/x.py"}}},
			m{"id": "fetch", "tool": m{"name": "read_file", "args": m{"path": "data/${{ inputs.image }}"}}},
			m{"id": "each", "map": m{"over": "inputs.options", "max_concurrency": 4, "on_item_error": "skip",
				"result": "nodes.judge.text",
				"body":   l{m{"id": "judge", "llm": m{"prompt": "Is ${{ item }} right?"}}}}},
			m{"id": "fan", "parallel": m{"max_concurrency": 2, "result": "nodes",
				"branches": m{
					"a": l{m{"id": "pa", "llm": m{"prompt": "A"}}},
					"b": l{m{"id": "pb", "call": m{"pipeline": "sub/other.yaml", "inputs": m{"q": "${{ inputs.question }}"}}}},
				}}},
			m{"id": "count_down", "loop": m{"max_iterations": 5, "while": "state.answer == nil",
				"on_exhausted": "fail", "body": l{m{"id": "tick", "set": m{"answer": 42, "done": true, "none": nil}}}}},
			m{"id": "approve", "ask": m{"question": "Accept ${{ state.answer }}?", "schema": m{"type": "boolean"}, "default": true},
				"next": "end"},
		},
		"outputs": m{"answer": "state.answer", "sir": "state.sir", "version": 1, "ok": true, "nothing": nil},
	}
}

func TestSchemaAcceptsValidPipeline(t *testing.T) {
	s := compile(t)
	if err := s.Validate(normalize(t, validPipeline())); err != nil {
		t.Fatalf("valid pipeline rejected: %#v", err)
	}
}

func TestSchemaAcceptsMinimalPipeline(t *testing.T) {
	s := compile(t)
	doc := m{"version": 1, "name": "min", "nodes": l{m{"id": "only", "set": m{"x": "1 + 1"}}}}
	if err := s.Validate(normalize(t, doc)); err != nil {
		t.Fatalf("minimal pipeline rejected: %#v", err)
	}
}

// node returns the first top-level node with the given id.
func node(doc m, id string) m {
	for _, n := range doc["nodes"].(l) {
		if n.(m)["id"] == id {
			return n.(m)
		}
	}
	panic("no node " + id)
}

func TestSchemaRejectsInvalidPipelines(t *testing.T) {
	s := compile(t)
	loopBody := func(doc m) l { return node(doc, "refine")["loop"].(m)["body"].(l) }
	cases := []struct {
		name   string
		mutate func(doc m)
		want   string // substring expected in the error
	}{
		{"unknown top-level key", func(d m) { d["stages"] = l{} }, "stages"},
		{"missing version", func(d m) { delete(d, "version") }, "version"},
		{"version 2", func(d m) { d["version"] = 2 }, "version"},
		{"bad name", func(d m) { d["name"] = "my pipeline" }, "name"},
		{"empty nodes", func(d m) { d["nodes"] = l{} }, "nodes"},
		{"loop without max_iterations", func(d m) { delete(node(d, "refine")["loop"].(m), "max_iterations") }, "max_iterations"},
		{"loop max_iterations 0", func(d m) { node(d, "refine")["loop"].(m)["max_iterations"] = 0 }, "max_iterations"},
		{"bad duration", func(d m) { d["limits"].(m)["timeout"] = "5 minutes" }, "timeout"},
		{"bad nested duration", func(d m) { loopBody(d)[0].(m)["retry"].(m)["backoff"] = "1 s" }, "backoff"},
		{"branch case without next", func(d m) { delete(loopBody(d)[2].(m)["branch"].(l)[0].(m), "next") }, "next"},
		{"branch case unknown key", func(d m) { loopBody(d)[2].(m)["branch"].(l)[0].(m)["goto"] = "x" }, "goto"},
		{"empty branch", func(d m) { loopBody(d)[2].(m)["branch"] = l{} }, "branch"},
		{"unknown node key", func(d m) { node(d, "summarize")["llm_call"] = m{} }, "llm_call"},
		{"node without id", func(d m) { delete(node(d, "summarize"), "id") }, "id"},
		{"bad node id", func(d m) { node(d, "summarize")["id"] = "9lives" }, "id"},
		{"unknown llm key", func(d m) { node(d, "summarize")["llm"].(m)["tools"] = l{"ocr"} }, "tools"},
		{"agent with output_schema", func(d m) { loopBody(d)[1].(m)["agent"].(m)["output_schema"] = m{} }, "output_schema"},
		{"prompt file ref extra key", func(d m) { node(d, "summarize")["llm"].(m)["system"] = m{"file": "a.md", "vars": m{}} }, "vars"},
		{"prompt is a number", func(d m) { node(d, "summarize")["llm"].(m)["prompt"] = 3 }, "prompt"},
		{"model without model", func(d m) { d["models"].(m)["default"] = m{"temperature": 0} }, "model"},
		{"temperature too high", func(d m) { d["models"].(m)["default"].(m)["temperature"] = 3 }, "temperature"},
		{"unknown price key", func(d m) { d["models"].(m)["vision"].(m)["price"].(m)["per_call"] = 1 }, "per_call"},
		{"input without type", func(d m) { d["inputs"].(m)["question"] = m{"description": "q"} }, "type"},
		{"input bad type", func(d m) { d["inputs"].(m)["question"] = m{"type": "text"} }, "type"},
		{"tool without description", func(d m) { d["tools"].(m)["ocr"] = m{"pipeline": "x.yaml"} }, "description"},
		{"tool with pipeline and llm", func(d m) { d["tools"].(m)["ocr"].(m)["llm"] = m{"prompt": "x"} }, "not"},
		{"llm tool without prompt", func(d m) { delete(d["tools"].(m)["describe"].(m)["llm"].(m), "prompt") }, "prompt"},
		{"llm tool with memory", func(d m) { d["tools"].(m)["describe"].(m)["llm"].(m)["memory"] = "reasoner" }, "memory"},
		{"http_get unknown key", func(d m) { d["http_get"].(m)["hosts"] = l{"x"} }, "hosts"},
		{"http_get max_bytes zero", func(d m) { d["http_get"].(m)["max_bytes"] = 0 }, "max_bytes"},
		{"bad env name", func(d m) { d["env"] = l{"NOT-OK"} }, "env"},
		{"duplicate env", func(d m) { d["env"] = l{"HOME", "HOME"} }, "env"},
		{"max_cost_usd zero", func(d m) { d["limits"].(m)["max_cost_usd"] = 0 }, "max_cost_usd"},
		{"unknown limits key", func(d m) { d["limits"].(m)["max_tokens"] = 1 }, "max_tokens"},
		{"bad sandbox language", func(d m) { d["sandbox"].(m)["language"] = "ruby" }, "language"},
		{"bad retry_on", func(d m) { loopBody(d)[0].(m)["retry"].(m)["retry_on"] = l{"everything"} }, "retry_on"},
		{"tool call without name", func(d m) { delete(node(d, "fetch")["tool"].(m), "name") }, "name"},
		{"map without over", func(d m) { delete(node(d, "each")["map"].(m), "over") }, "over"},
		{"map empty body", func(d m) { node(d, "each")["map"].(m)["body"] = l{} }, "body"},
		{"bad on_item_error", func(d m) { node(d, "each")["map"].(m)["on_item_error"] = "ignore" }, "on_item_error"},
		{"parallel no branches", func(d m) { node(d, "fan")["parallel"].(m)["branches"] = m{} }, "branches"},
		{"parallel empty branch", func(d m) { node(d, "fan")["parallel"].(m)["branches"].(m)["a"] = l{} }, "branches"},
		{"nested node in parallel invalid", func(d m) {
			node(d, "fan")["parallel"].(m)["branches"].(m)["a"] = l{m{"id": "pa", "bogus": 1}}
		}, "bogus"},
		{"call without pipeline", func(d m) { node(d, "fan")["parallel"].(m)["branches"].(m)["b"] = l{m{"id": "pb", "call": m{}}} }, "pipeline"},
		{"ask without question", func(d m) { delete(node(d, "approve")["ask"].(m), "question") }, "question"},
		{"bad on_exhausted", func(d m) { node(d, "count_down")["loop"].(m)["on_exhausted"] = "stop" }, "on_exhausted"},
		{"set value is an object", func(d m) { loopBody(d)[3].(m)["set"] = m{"sir": m{"a": 1}} }, "set"},
		{"output value is a list", func(d m) { d["outputs"].(m)["answer"] = l{1} }, "outputs"},
		{"confirm is a string", func(d m) { node(d, "compute")["confirm"] = "yes" }, "confirm"},
		{"code limits unknown key", func(d m) { node(d, "compute")["code"].(m)["limits"].(m)["cpu"] = 1 }, "cpu"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			doc := validPipeline()
			tc.mutate(doc)
			err := s.Validate(normalize(t, doc))
			if err == nil {
				t.Fatalf("invalid pipeline accepted")
			}
			if msg := fmt.Sprintf("%#v", err); !strings.Contains(msg, tc.want) {
				t.Errorf("error does not mention %q:\n%s", tc.want, msg)
			}
		})
	}
}

// applicatorKeys are keywords whose value is a single subschema.
var applicatorKeys = map[string]bool{
	"items": true, "additionalProperties": true, "not": true, "if": true, "then": true,
	"else": true, "contains": true, "propertyNames": true,
	"unevaluatedItems": true, "unevaluatedProperties": true,
}

// listKeys are keywords whose value is an array of subschemas.
var listKeys = map[string]bool{"oneOf": true, "anyOf": true, "allOf": true, "prefixItems": true}

// mapKeys are keywords whose value maps names to subschemas.
var mapKeys = map[string]bool{"$defs": true, "patternProperties": true, "dependentSchemas": true}

// walk visits every subschema of schema (following the schema keywords, so a
// property *named* "properties" or "items" is not mistaken for the keyword)
// and calls visit with the JSON pointer of each one.
func walk(schema any, ptr string, visit func(ptr string, s map[string]any)) {
	s, ok := schema.(map[string]any)
	if !ok {
		return
	}
	visit(ptr, s)
	for _, k := range sortedKeys(s) {
		v := s[k]
		switch {
		case k == "properties" || mapKeys[k]:
			sub, _ := v.(map[string]any)
			for _, name := range sortedKeys(sub) {
				walk(sub[name], ptr+"/"+k+"/"+name, visit)
			}
		case applicatorKeys[k]:
			walk(v, ptr+"/"+k, visit)
		case listKeys[k]:
			arr, _ := v.([]any)
			for i, e := range arr {
				walk(e, fmt.Sprintf("%s/%s/%d", ptr, k, i), visit)
			}
		}
	}
}

func sortedKeys(m map[string]any) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	return keys
}

// undocumented returns the pointers of properties without a non-empty
// description. A property that is only a reference to one of the
// schema's $defs has the description of what it references (editors
// show that one).
func undocumented(schema any) []string {
	var missing []string
	root, _ := schema.(map[string]any)
	defs, _ := root["$defs"].(map[string]any)
	walk(schema, "#", func(ptr string, s map[string]any) {
		props, _ := s["properties"].(map[string]any)
		for _, name := range sortedKeys(props) {
			p, _ := props[name].(map[string]any)
			if ref, ok := p["$ref"].(string); ok && len(p) == 1 {
				p, _ = defs[strings.TrimPrefix(ref, "#/$defs/")].(map[string]any)
			}
			if d, _ := p["description"].(string); strings.TrimSpace(d) == "" {
				missing = append(missing, ptr+"/properties/"+name)
			}
		}
	})
	return missing
}

func loadSchemaDoc(t *testing.T) any {
	t.Helper()
	var doc any
	if err := json.Unmarshal(dsl.Schema(), &doc); err != nil {
		t.Fatalf("schema is not valid JSON: %v", err)
	}
	return doc
}

func TestSchemaPropertiesHaveDescriptions(t *testing.T) {
	doc := loadSchemaDoc(t)
	count := 0
	walk(doc, "#", func(_ string, s map[string]any) {
		props, _ := s["properties"].(map[string]any)
		count += len(props)
	})
	if count < 100 {
		t.Fatalf("walked only %d properties; the walker is not reaching the whole schema", count)
	}
	for _, p := range undocumented(doc) {
		t.Errorf("property %s has no description", p)
	}
}

// TestUndocumentedDetected makes sure the description check can fail.
func TestUndocumentedDetected(t *testing.T) {
	var doc any
	src := `{"$defs": {"x": {"oneOf": [{"properties": {"a": {"type": "string"}}}]},
	                   "bare": {"type": "string"}, "told": {"description": "told", "type": "string"}},
	         "properties": {"properties": {"description": "named properties", "type": "object"},
	                        "b": {"description": "b", "items": {"properties": {"c": {}}}},
	                        "d": {"$ref": "#/$defs/bare"}, "e": {"$ref": "#/$defs/told"}, "f": {"$ref": "#/$defs/gone"}}}`
	if err := json.Unmarshal([]byte(src), &doc); err != nil {
		t.Fatal(err)
	}
	got := strings.Join(undocumented(doc), " ")
	want := "#/properties/d #/properties/f #/$defs/x/oneOf/0/properties/a #/properties/b/items/properties/c"
	if got != want {
		t.Fatalf("undocumented = %q, want %q", got, want)
	}
}

// TestClosedObjects checks that every object schema listing its properties
// also forbids unknown keys, or gives them a schema of their own (score:
// takes metrics by name beside pipeline:), so typos are reported.
func TestSchemaObjectsAreClosed(t *testing.T) {
	walk(loadSchemaDoc(t), "#", func(ptr string, s map[string]any) {
		if _, ok := s["properties"]; !ok {
			return
		}
		switch ap := s["additionalProperties"].(type) {
		case bool:
			if ap {
				t.Errorf("%s lists properties but allows any other key", ptr)
			}
		case map[string]any:
		default:
			t.Errorf("%s lists properties but does not set additionalProperties", ptr)
		}
	})
}

func TestSchemaIDMatches(t *testing.T) {
	var doc struct {
		ID     string `json:"$id"`
		Schema string `json:"$schema"`
	}
	if err := json.Unmarshal(dsl.Schema(), &doc); err != nil {
		t.Fatal(err)
	}
	if doc.ID != pipelineURL {
		t.Errorf("$id = %q, want %q", doc.ID, pipelineURL)
	}
	if doc.Schema != "https://json-schema.org/draft/2020-12/schema" {
		t.Errorf("$schema = %q, want draft 2020-12", doc.Schema)
	}
}
