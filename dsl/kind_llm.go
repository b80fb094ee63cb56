package dsl

import (
	"strings"

	"gopkg.in/yaml.v3"

	"github.com/flowrun/flowrun/llmconf"
)

// KindLLM is the llm node kind.
const KindLLM Kind = "llm"

func init() {
	registerKind(&KindSpec{
		Kind:    KindLLM,
		Summary: "One model call.",
		Doc:     "One model call. Messages come from `memory` (a named conversation), `system`, `prompt` and `images` (paths inside the pipeline directory, URLs, or data URLs). With `output_schema` the reply is strict JSON-schema structured output, validated on return and repaired up to `repair_retries` times, and `json` is typed by the schema.",
		Output:  "`{text, json, finish_reason, usage: {prompt, completion, reasoning, cached, total}, cost_usd, model}`.",
		Example: `- id: critique
  llm:
    model: default
    prompt: "Critique this draft: ${{ inputs.draft }}"
    output_schema:
      type: object
      properties: {verdict: {type: string, enum: [ACCEPT, REVISE]}, notes: {type: string}}
      required: [verdict, notes]`,
		Schema: `{
  "description": "One model call built from \u0060system\u0060, \u0060prompt\u0060, \u0060images\u0060 and \u0060memory\u0060.",
  "type": "object",
  "additionalProperties": false,
  "properties": {
    "model": {
      "description": "Name of a model under \u0060models:\u0060 (default \u0060default\u0060).",
      "type": "string"
    },
    "system": {
      "$ref": "#/$defs/prompt",
      "description": "System prompt for this call."
    },
    "prompt": {
      "$ref": "#/$defs/prompt",
      "description": "User message for this call."
    },
    "images": {
      "$ref": "#/$defs/images"
    },
    "memory": {
      "description": "Name of a memory under \u0060memories:\u0060; the call continues and extends that conversation.",
      "type": "string"
    },
    "output_schema": {
      "description": "JSON schema the reply must satisfy (strict structured output); the parsed reply is \u0060json\u0060.",
      "type": "object"
    },
    "repair_retries": {
      "description": "How many times to ask the model to fix a reply that does not match \u0060output_schema\u0060.",
      "type": "integer",
      "minimum": 0
    },
    "temperature": {
      "description": "Sampling temperature for this call, overriding the model's.",
      "type": "number"
    },
    "max_tokens": {
      "description": "Most tokens to generate in this call, overriding the model's.",
      "type": "integer",
      "minimum": 1
    },
    "cache": {
      "$ref": "#/$defs/node_cache"
    }
  }
}`,
		decode: func(d *nodeDecoder) any { return d.f.llm(d.label, d.v, d.sc) },
		output: func(_ *resolver, n *Node) *Type { return llmOutput(n.LLM()) },
	})
}

// LLM is one model call.
type LLM struct {
	Model         string
	System        *Template
	Prompt        *Template
	Images        []*Value // each a path or URL, or a list of them
	Memory        string
	OutputSchema  map[string]any
	RepairRetries int
	Temperature   *float64
	MaxTokens     int
	// Cache is "" (the model's), "true", "false" or "always".
	Cache string
}

// LLM is the configuration of a llm node; nil for a node of another kind.
func (n *Node) LLM() *LLM { return Config[*LLM](n) }

func (f *file) llm(label string, v *yaml.Node, sc scope) *LLM {
	l := &LLM{}
	f.modelCall(label, l, v, sc)
	if o := valueOf(v, "output_schema"); o != nil {
		l.OutputSchema = f.jsonSchema(o)
		if f.checkJSONSchema(o, label+": output_schema", l.OutputSchema) != nil {
			for _, problem := range strictProblems(l.OutputSchema) {
				f.l.errorf(f.pos(o), "%s: output_schema: %s", label, problem)
			}
		}
	}
	l.RepairRetries, _ = intValue(valueOf(v, "repair_retries"))
	return l
}

// modelCall decodes the fields llm and agent nodes share.
func (f *file) modelCall(label string, l *LLM, v *yaml.Node, sc scope) {
	mn := valueOf(v, "model")
	l.Model, _ = str(mn)
	switch {
	case mn != nil && l.Model != "" && f.p.Models[l.Model] == nil:
		f.l.errorf(f.pos(mn), "%s: unknown model %q%s; declare it under models:", label, l.Model, Suggest(l.Model, keysOf(f.p.Models)))
	case mn == nil && f.p.Models["default"] == nil:
		f.l.errorf(f.pos(v), "%s: no model: set model: or declare a model named default under models:", label)
	case mn == nil:
		l.Model = "default"
	}
	if cv := valueOf(v, "cache"); cv != nil {
		l.Cache = cv.Value // true, false or always: the schema allows no other
	}
	if s := valueOf(v, "system"); s != nil {
		l.System = f.prompt(s, sc)
	}
	if p := valueOf(v, "prompt"); p != nil {
		l.Prompt = f.prompt(p, sc)
	}
	for _, im := range items(valueOf(v, "images")) {
		l.Images = append(l.Images, f.text(im, sc))
		if ref, ok := str(im); ok && ref != "" && !strings.Contains(ref, "${{") && !llmconf.IsImageURL(ref) {
			if err := f.p.Files.Check(ref); err != nil {
				f.l.errorf(f.pos(im), "%s: image file %q: %s", label, ref, f.fileProblem(ref, err))
			}
		}
	}
	if mem := valueOf(v, "memory"); mem != nil {
		l.Memory, _ = str(mem)
		if _, ok := f.p.Memories[l.Memory]; !ok {
			names := make([]string, 0, len(f.p.Memories))
			for n := range f.p.Memories {
				names = append(names, n)
			}
			f.l.errorf(f.pos(mem), "%s: unknown memory %q%s; declare it under memories:", label, l.Memory, Suggest(l.Memory, names))
		}
	}
	if t, ok := floatValue(valueOf(v, "temperature")); ok {
		l.Temperature = &t
	}
	l.MaxTokens, _ = intValue(valueOf(v, "max_tokens"))
}

// usageType is the shape of a model call's token counts.
var usageType = Object(map[string]*Type{"prompt": IntType, "completion": IntType, "reasoning": IntType, "cached": IntType, "total": IntType})

func llmOutput(l *LLM) *Type {
	json := AnyType
	if l.OutputSchema != nil {
		json = TypeFromSchema(l.OutputSchema)
	}
	return Object(map[string]*Type{"text": StringType, "json": json, "finish_reason": StringType,
		"usage": usageType, "cost_usd": FloatType, "model": StringType})
}
