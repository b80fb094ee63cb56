package dsl

import (
	"fmt"
	"path/filepath"
	"strings"

	"gopkg.in/yaml.v3"
)

// A judge metric (score: NAME: {judge: {rubric, model, type}}) is an
// inline rubric that a model of the pipeline judges per item. It becomes
// a one-node pipeline, made here from the rubric and a copy of the model's
// declaration, whose llm node answers in a strict JSON schema with the
// verdict and its reasoning: so it runs, is recorded and costs like any
// judge pipeline.

// JudgeVerdict and JudgeReasoning are the outputs of a judge metric's
// pipeline.
const (
	JudgeVerdict   = "verdict"
	JudgeReasoning = "reasoning"
)

const judgeTemplate = `version: 1
name: %s
description: The judge of metric %s, made from its rubric.
inputs:
  item: {type: object, default: {}}
  outputs: {type: object, default: {}}
models:
  %s: %s
nodes:
  - id: judge
    llm:
      model: %s
      system: |
        You grade the output of an automated pipeline against a rubric.
        Read the rubric, the dataset item (which may hold the expected
        answer) and the output; explain your reasoning briefly, then give
        the verdict: %s.
      prompt: |
        Rubric:
        %s

        Dataset item:
        ${{ json(inputs.item) }}

        Output:
        ${{ json(inputs.outputs) }}
      output_schema:
        type: object
        properties:
          reasoning: {type: string}
          verdict: {type: %s}
        required: [reasoning, verdict]
outputs:
  verdict: nodes.judge.json.verdict
  reasoning: nodes.judge.json.reasoning
`

// judgeMetric decodes NAME: {judge: {...}} into a metric run by a judge
// pipeline; it reports what is wrong at its place and returns a broken
// metric then.
func (f *file) judgeMetric(name string, n *yaml.Node) *Metric {
	m := &Metric{Name: name, Pos: f.pos(n), Type: BoolType}
	j := valueOf(n, "judge")
	rubricNode, modelNode := valueOf(j, "rubric"), valueOf(j, "model")
	rubric, _ := str(rubricNode)
	model, _ := str(modelNode)
	verdict := "boolean"
	if t := valueOf(j, "type"); t != nil {
		verdict, _ = str(t)
	}
	if verdict == "number" {
		m.Type = FloatType
	}
	var decl *yaml.Node
	for _, kv := range pairs(valueOf(f.root, "models")) {
		if kv[0].Value == model {
			decl = kv[1]
		}
	}
	if decl == nil {
		at := m.Pos
		if modelNode != nil {
			at = f.pos(modelNode)
		}
		f.l.errorf(at, "score: judge of metric %q: no model %q under models:%s", name, model, Suggest(model, keysOf(f.p.Models)))
		m.broken = true
		return m
	}
	flow, err := yaml.Marshal(&yaml.Node{Kind: decl.Kind, Style: yaml.FlowStyle, Tag: decl.Tag, Value: decl.Value, Content: decl.Content})
	if err != nil {
		f.l.errorf(m.Pos, "score: judge of metric %q: copying model %q: %v", name, model, err)
		m.broken = true
		return m
	}
	what := "true when the output meets the rubric, false when it does not"
	if verdict == "number" {
		what = "a number, the score the rubric defines"
	}
	indented := strings.ReplaceAll(strings.TrimSpace(rubric), "\n", "\n        ")
	src := fmt.Sprintf(judgeTemplate, judgeName(f.p.Name, name), name, model, strings.TrimSpace(string(flow)), model, what, indented, verdict)
	at := f.pos(j)
	m.Judge = f.l.load(filepath.Join(f.dir, "score."+name+".judge.yaml"), []byte(src), &at)
	m.broken = m.Judge == nil
	if m.Judge != nil {
		m.Judge.Generated = src
	}
	return m
}

// judgeName is a judge pipeline's name: the pipeline's and the metric's,
// in the characters a pipeline name allows.
func judgeName(pipeline, metric string) string {
	return strings.Map(func(r rune) rune {
		if r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' || r == '_' || r == '-' {
			return r
		}
		return '_'
	}, pipeline+"-judge-"+metric)
}
