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
