package dsl

import (
	"strings"
	"testing"
)

const scored = `
version: 1
name: scored
inputs:
  q: {type: string}
nodes:
  - id: a
    set: {}
outputs:
  answer: inputs.q + "!"
  n: len(inputs.q)
score:
  exact: outputs.answer == item.expected
  length: outputs.n
  cheap: run.cost_usd < 0.5 && run.status == "completed"
`

func TestScoreMetricsTypedAndEvaluated(t *testing.T) {
	p := loadString(t, scored)
	if got := strings.Join(p.Score.Names(), ","); got != "exact,length,cheap" {
		t.Fatalf("metrics %s", got)
	}
	env := &ScoreEnv{Outputs: map[string]any{"answer": "hi!", "n": 2}, Item: map[string]any{"expected": "hi!"},
		Run: ScoreRun{CostUSD: 0.1, Status: "completed"}}
	want := []any{true, 2, true}
	for i, m := range p.Score.Metrics {
		v, err := m.Eval(env)
		if err != nil || v != want[i] {
			t.Errorf("%s = %v, %v; want %v", m.Name, v, err, want[i])
		}
	}
	if p.Score.Metrics[0].Type.Kind != TypeBool || p.Score.Metrics[1].Type.Kind != TypeInt {
		t.Fatalf("types %s %s", p.Score.Metrics[0].Type, p.Score.Metrics[1].Type)
	}
}

func TestParseMetricChecksAgainstOutputs(t *testing.T) {
	p := loadString(t, scored)
	m, ds := ParseMetric(p, "long", "outputs.n > 3")
	if m == nil || len(ds) > 0 || m.Type.Kind != TypeBool {
		t.Fatalf("metric %v: %s", m, ds)
	}
	for src, want := range map[string]string{
		"outputs.nn > 3":  `--score bad:1:9: error: in ` + "`outputs.nn > 3`" + `: outputs has no field "nn" (did you mean "n"?)`,
		"outputs.answer":  `--score bad:1:1: error: score: metric "bad" is a string`,
		"state.x":         "unknown name state; a metric can use outputs, item, run",
		"":                "empty expression",
		"run.seconds > 1": `run has no field "seconds"`,
	} {
		m, ds := ParseMetric(p, "bad", src)
		if m != nil || !strings.Contains(ds.String(), want) {
			t.Errorf("%q: got %v\n%s\nwant %q", src, m, ds, want)
		}
	}
}

// TestTrajectoryMetricsTyped: run.iterations has a field per loop node
// and run.turns one per node, so a misspelt id is an error at load; the
// lists are typed too.
func TestTrajectoryMetricsTyped(t *testing.T) {
	p := loadString(t, `
version: 1
name: looped
nodes:
  - id: refine
    loop:
      max_iterations: 3
      body:
        - id: step
          set: {}
outputs:
  done: "true"
`)
	for src, kind := range map[string]TypeKind{
		"run.iterations.refine":                                          TypeInt,
		"run.turns.step + run.turns.refine":                              TypeInt,
		`any(run.tool_calls, .tool == "ask") && true`:                    TypeBool,
		`len(run.route) > 2`:                                             TypeBool,
		`any(run.tool_calls, .ok && any(run.questions, .kind == "ask"))`: TypeBool,
		`len(run.questions) == 0`:                                        TypeBool,
		`run.iterations.refine < 3 && run.status != "x"`:                 TypeBool,
	} {
		m, ds := ParseMetric(p, "m", src)
		if m == nil || m.Type == nil || m.Type.Kind != kind {
			t.Errorf("%q: %v %s", src, m, ds)
		}
	}
	for src, want := range map[string]string{
		"run.iterations.refin":             `run.iterations has no field "refin" (did you mean "refine"?)`,
		"run.iterations.step":              `run.iterations has no field "step"`,
		"run.turns.stpe":                   `run.turns has no field "stpe" (did you mean "step"?)`,
		"run.tool_call":                    `run has no field "tool_call" (did you mean "tool_calls"?)`,
		`any(run.tool_calls, .tol == "a")`: `--score bad:1:22: error: in ` + "`" + `any(run.tool_calls, .tol == "a")` + "`" + `: the elements of run.tool_calls have no field "tol" (did you mean "tool"?)`,
		`all(run.questions, .answer != nil && .kinds == "ask")`: `the elements of run.questions have no field "kinds" (did you mean "kind"?)`,
	} {
		m, ds := ParseMetric(p, "bad", src)
		if m != nil || !strings.Contains(ds.String(), want) {
			t.Errorf("%q: got %v\n%s\nwant %q", src, m, ds, want)
		}
	}
	env := &ScoreEnv{Run: ScoreRun{Iterations: map[string]int{"refine": 2}, ToolCalls: []ScoreToolCall{{Node: "a", Tool: "ask", OK: true}}}}
	m, _ := ParseMetric(p, "asked", `any(run.tool_calls, .tool == "ask" && .ok) && run.iterations.refine == 2`)
	if v, err := m.Eval(env); err != nil || v != true {
		t.Fatalf("asked = %v, %v", v, err)
	}
}

const judged = `
version: 1
name: judged
models:
  default: {model: gpt-4.1-mini}
  grader: {model: gpt-4.1, temperature: 0}
inputs:
  q: {type: string}
nodes:
  - id: a
    llm: {prompt: "${{ inputs.q }}"}
outputs:
  answer: nodes.a.text
score:
  helpful: {judge: {rubric: "The answer is polite.\nAnd short.", model: grader}}
  stars: {judge: {rubric: Rate it 1-5., model: grader, type: number}}
`

// TestJudgeMetric: a judge metric becomes a one-node judge pipeline on a
// copy of the named model, typed by its verdict; an unknown model is an
// error at its place with a did-you-mean.
func TestJudgeMetric(t *testing.T) {
	p := loadString(t, judged)
	h, s := p.Score.Metrics[0], p.Score.Metrics[1]
	if h.Judge == nil || h.Type.Kind != TypeBool || s.Type.Kind != TypeFloat {
		t.Fatalf("metrics %+v %+v", h, s)
	}
	j := h.Judge
	if m := j.Models["grader"]; m == nil || m.Model != "gpt-4.1" || len(j.Outputs) != 2 || j.Outputs[0].Name != JudgeVerdict {
		t.Fatalf("judge pipeline: models %v outputs %v", j.Models, j.Outputs)
	}
	_, ds := LoadSource("bad.yaml", []byte(strings.Replace(judged, "model: grader, type", "model: grder, type", 1)))
	if !strings.Contains(ds.String(), `bad.yaml:16:48: error: score: judge of metric "stars": no model "grder" under models: (did you mean "grader"?)`) {
		t.Fatalf("an unknown model:\n%s", ds)
	}
	_, ds = LoadSource("bad.yaml", []byte(strings.Replace(judged, "type: number", "type: text", 1)))
	if !strings.Contains(ds.String(), "bad.yaml:16") {
		t.Fatalf("a bad verdict type:\n%s", ds)
	}
}

// TestMetricItemFields checks that a metric names the dataset fields it
// reads, however it reads them, once each and in order.
func TestMetricItemFields(t *testing.T) {
	p := loadString(t, scored)
	for src, want := range map[string]string{
		"outputs.answer == item.expected":                                "expected",
		`outputs.answer == item["target"] || outputs.n == item.expected`: "target,expected",
		"item.a == item.a && outputs.n > 3":                              "a",
		"outputs.n > 3":                                                  "",
	} {
		m, ds := ParseMetric(p, "m", src)
		if m == nil {
			t.Fatalf("%s: %s", src, ds)
		}
		if got := strings.Join(m.ItemFields(), ","); got != want {
			t.Errorf("%s: item fields %q, want %q", src, got, want)
		}
	}
}

// TestMetricExpectations: a metric names the outputs it compares with a
// dataset field when each comparison must hold for it to pass, and none
// it may pass without.
func TestMetricExpectations(t *testing.T) {
	p := loadString(t, scored)
	for src, want := range map[string]string{
		"outputs.answer == item.expected":                                         "answer=expected",
		`item["target"] == outputs["answer"]`:                                     "answer=target",
		"outputs.answer == item.expected && outputs.n == item.n && outputs.n > 0": "answer=expected n=n",
		"outputs.answer == item.expected || outputs.n == item.n":                  "",
		"!(outputs.answer == item.expected)":                                      "",
		"outputs.answer != item.expected":                                         "",
		"outputs.answer == lower(item.expected)":                                  "",
		"item.a == item.b":                                                        "",
	} {
		m, ds := ParseMetric(p, "m", src)
		if m == nil {
			t.Fatalf("%s: %s", src, ds)
		}
		var got []string
		for _, e := range m.Expectations() {
			got = append(got, e.Output+"="+e.Item)
		}
		if strings.Join(got, " ") != want {
			t.Errorf("%s: expectations %q, want %q", src, got, want)
		}
	}
}

// TestMetricReadsTrajectory: a metric that reads the run's route, loop
// iterations, tool calls, questions or turns, or the run as a whole,
// needs the run's events; one that reads only its figures does not.
func TestMetricReadsTrajectory(t *testing.T) {
	p := loadString(t, scored)
	for src, want := range map[string]bool{
		"outputs.answer == item.expected":                     false,
		`run.cost_usd < 0.1 && run.status == "completed"`:     false,
		"run.tokens < 100 && run.duration_ms < 2000":          false,
		`len(run.route) < 10`:                                 true,
		`run.cost_usd < 0.1 && len(run.tool_calls) == 0`:      true,
		`len(run.questions) == 0 && len(keys(run.turns)) > 0`: true,
		`len(run.iterations) >= 0`:                            true,
		`toJSON(run) != ""`:                                   true,
	} {
		m, ds := ParseMetric(p, "m", src)
		if m == nil {
			t.Fatalf("%s: %s", src, ds)
		}
		if got := m.ReadsTrajectory(); got != want {
			t.Errorf("%s: reads the trajectory %v, want %v", src, got, want)
		}
	}
}
