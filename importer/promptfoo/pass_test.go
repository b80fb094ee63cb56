package promptfoo

import (
	"context"
	"fmt"
	"path/filepath"
	"strings"
	"testing"

	"github.com/flowrun/flowrun/dsl"
)

// passMetric converts a configuration and returns its first pipeline's
// pass metric, evaluated on an item and an output text: whether every
// check that was checked passed.
func passMetric(t *testing.T, src string) func(item map[string]any, output string) (any, error) {
	t.Helper()
	res, p := loadConverted(t, src)
	var pass *dsl.Metric
	for _, m := range p.Score.Metrics {
		if m.Name == "pass" {
			pass = m
		}
	}
	items := items(t, res)
	return func(item map[string]any, output string) (any, error) {
		if item == nil {
			item = items[0]
		}
		v, err := pass.Eval(&dsl.ScoreEnv{Outputs: map[string]any{"text": output}, Item: item})
		if err != nil {
			return nil, err
		}
		checks, ok := v.(map[string]any)["checks"].([]any)
		if !ok {
			return nil, fmt.Errorf("pass gave %v, not checks", v)
		}
		all := true
		for _, c := range checks {
			if p := c.(map[string]any)["pass"]; p != nil {
				all = all && p == true
			}
		}
		return all, nil
	}
}

// loadConverted converts a configuration, writes it and loads its first
// pipeline.
func loadConverted(t *testing.T, src string) (*Result, *dsl.Pipeline) {
	t.Helper()
	res, err := Convert(context.Background(), configIn(t, src))
	if err != nil {
		t.Fatal(err)
	}
	dir := filepath.Join(t.TempDir(), "out")
	if _, err := res.Write(dir); err != nil {
		t.Fatal(err)
	}
	p, diags := dsl.Load(filepath.Join(dir, res.Pipelines[0]))
	if p == nil {
		t.Fatalf("the pipeline does not validate:\n%v", diags)
	}
	return res, p
}

// Each translated assert holds exactly when promptfoo's does, on outputs
// that pass and outputs that fail it.
func TestConvertedAssertsHoldAsPromptfoos(t *testing.T) {
	cases := []struct {
		assert     string
		pass, fail string
	}{
		{"{type: javascript, value: 'output.length < 10'}", "short", "far too long an answer"},
		{"{type: javascript, value: \"JSON.parse(output).category === 'billing'\"}", `{"category": "billing"}`, `{"category": "bug"}`},
		{"{type: javascript, value: \"['bug', 'other'].includes(JSON.parse(output).category)\"}", `{"category": "other"}`, `{"category": "billing"}`},
		{"{type: javascript, value: 'output.toLowerCase().includes(context.vars.word)'}", "It is RED", "It is blue"},
		{"{type: javascript, value: '!output.startsWith(\"Sorry\") && output.trim().endsWith(\".\")'}", "Yes. ", "Sorry."},
		{"{type: javascript, value: 'JSON.parse(output).needs_human === true'}", `{"needs_human": true}`, `{"needs_human": false}`},
		{"{type: javascript, value: 'output.length * 2 - 1 > 10 / 2'}", "longer", "hi"},
		{"{type: javascript, value: \"const d = JSON.parse(output);\\nconst c = d.category;\\nreturn c === 'a' || c === 'b';\"}", `{"category": "b"}`, `{"category": "c"}`},
		{"{type: javascript, value: \"const d = JSON.parse(output);\\nreturn typeof d.a === 'string' && typeof d.b !== 'number' && typeof d.c === 'undefined';\"}", `{"a": "x", "b": "1"}`, `{"a": "x", "b": 1}`},
		{"{type: levenshtein, value: kitten, threshold: 3}", "sitting", "sitting down"},
		{"{type: levenshtein, value: kitten, threshold: 0}", "kitten", "kitten!"},
		{"{type: rouge-n, value: the cat sat on the mat}", "the cat sat on a mat", "dogs bark"},
		{"{type: not-icontains-any, value: [sorry, apolog]}", "Here it is", "We APOLOGIZE"},
		{"{type: starts-with, value: 'Yes'}", "Yes, sure", "No"},
		{"{type: not-regex, value: '\\d'}", "no digits", "4 digits"},
		{"{type: contains-json}", `Here: {"a": 1} ok`, `Here: {"a": 1 ok}`},
	}
	fenced := "{type: javascript, value: \"(() => { const data = JSON.parse(output.replace(/^```json\\\\s*|^```\\\\s*|\\\\s*```$/g, '').trim()); return data.move === '1'; })()\"}"
	cases = append(cases,
		struct{ assert, pass, fail string }{fenced, "```json\n{\"move\": \"1\"}\n```", "```json\n{\"move\": \"2\"}\n```"},
		struct{ assert, pass, fail string }{fenced, "```\n{\"move\": \"1\"}```", "{\"move\": 1}"},
		struct{ assert, pass, fail string }{fenced, " {\"move\": \"1\"} ", "```json{\"move\": \"3\"}```"})
	for _, c := range cases {
		pass := passMetric(t, "prompts: ['{{word}}']\ntests:\n  - vars: {word: red}\n    assert: ["+c.assert+"]\n")
		if got, err := pass(nil, c.pass); err != nil || got != true {
			t.Errorf("%s on %q: %v, %v; want true", c.assert, c.pass, got, err)
		}
		if got, err := pass(nil, c.fail); err != nil || got != false {
			t.Errorf("%s on %q: %v, %v; want false", c.assert, c.fail, got, err)
		}
	}
}

// A test without asserts passes, as in promptfoo; one whose asserts were
// all left unconverted has only checks that are not checked, each saying
// why, so that its item is unscored, never passed.
func TestChecksOfTestsWithNothingToCheck(t *testing.T) {
	res, p := loadConverted(t, "prompts: ['{{q}}']\ntests:\n  - vars: {q: a}\n  - vars: {q: b}\n    assert: [{type: python, value: 'len(output) > 3'}]\n")
	for i, item := range items(t, res) {
		v, err := p.Score.Metrics[0].Eval(&dsl.ScoreEnv{Outputs: map[string]any{"text": "long enough"}, Item: item})
		if err != nil {
			t.Fatal(err)
		}
		checks := v.(map[string]any)["checks"].([]any)
		c := checks[0].(map[string]any)
		switch {
		case len(checks) != 1:
			t.Errorf("item %d: checks %v", i, checks)
		case i == 0 && (c["pass"] != true || c["name"] != "no asserts"):
			t.Errorf("the test without asserts: %v", c)
		case i == 1 && (c["pass"] != nil || !strings.HasPrefix(c["reason"].(string), "assert type python: not converted")):
			t.Errorf("the python assert: %v", c)
		}
	}
}
