package arc

import (
	"encoding/json"
	"testing"
)

func decode(t *testing.T, s string) any {
	t.Helper()
	var v any
	if err := json.Unmarshal([]byte(s), &v); err != nil {
		t.Fatal(err)
	}
	return v
}

// TestGridsOfThePipelinesShapes: the output shapes the shipped ARC
// pipelines give (one grid, test_predictions, attempts per test input)
// and ARC's own test pairs are drawn grid by grid, each against its test
// input's expected output; anything else is no grids.
func TestGridsOfThePipelinesShapes(t *testing.T) {
	expected := map[string]any{"test": decode(t, `[{"input": [[1]], "output": [[2, 2]]}, {"input": [[3]], "output": [[4]]}]`)}
	wants := TestOutputs(expected)
	if len(wants) != 2 || wants[0][0][1] != 2 || wants[1][0][0] != 4 {
		t.Fatalf("test outputs %v, want [[2 2]] and [[4]]", wants)
	}
	type drawn struct {
		label, note string
	}
	for _, c := range []struct {
		name, value string
		want        []drawn
	}{
		{"test_predictions", `[[[2, 0]], [[4]]]`, []drawn{{"test 1", ", 1 cell differs from the expected"}, {"test 2", ", as expected"}}},
		{"attempts", `[{"attempt_1": [[2, 2]], "attempt_2": [[0]]}, {"attempt_1": [[4]], "attempt_2": [[4]]}]`,
			[]drawn{{"test 1 attempt_1", ", as expected"}, {"test 1 attempt_2", ", expected 1x2"}, {"test 2 attempt_1", ", as expected"}, {"test 2 attempt_2", ", as expected"}}},
		{"the task's test pairs", `[{"input": [[1]], "output": [[2, 2]]}]`, []drawn{{"test 1 input", ""}, {"test 1 output", ", as expected"}}},
	} {
		got, ok := Grids(decode(t, c.value), wants)
		if !ok || len(got) != len(c.want) {
			t.Errorf("%s: %d grids (%v), want %d", c.name, len(got), ok, len(c.want))
			continue
		}
		for i, d := range got {
			if d.Label != c.want[i].label || AgainstNote(d.Grid, d.Want) != c.want[i].note {
				t.Errorf("%s: grid %d is %q%s, want %q%s", c.name, i, d.Label, AgainstNote(d.Grid, d.Want), c.want[i].label, c.want[i].note)
			}
		}
	}
	if got, ok := Grids(decode(t, `[[2, 0]]`), [][][]int{{{2, 2}}}); !ok || len(got) != 1 || AgainstNote(got[0].Grid, got[0].Want) != ", 1 cell differs from the expected" {
		t.Errorf("one grid against a task with one test input: %v %v", got, ok)
	}
	for _, v := range []string{`"text"`, `[]`, `[[[1]], "x"]`, `[{"a": [[1]], "b": 3}]`, `{"attempt_1": [[1]]}`} {
		if got, ok := Grids(decode(t, v), wants); ok {
			t.Errorf("%s drawn as grids: %v", v, got)
		}
	}
	if w := TestOutputs(map[string]any{"test": decode(t, `[{"input": [[1]]}]`)}); w != nil {
		t.Errorf("a hidden test output gave expected grids %v", w)
	}
	if w := TestOutputs(map[string]any{"a": decode(t, `[[1]]`), "b": decode(t, `[[2]]`)}); w != nil {
		t.Errorf("two grid fields gave expected grids %v: which one is meant is not known", w)
	}
}

// TestTaskTestOutputs: a run's expected grids are its ARC task's test
// outputs, whether the task is one input or the inputs are its fields;
// the train pairs never are, and two tasks leave it unknown.
func TestTaskTestOutputs(t *testing.T) {
	task := decode(t, `{"train": [{"input": [[1]], "output": [[9]]}], "test": [{"input": [[1]], "output": [[2]]}, {"input": [[3]], "output": [[4]]}]}`).(map[string]any)
	for name, inputs := range map[string]map[string]any{
		"a task input":      {"task": task, "population": 4.0},
		"the task's fields": task,
	} {
		if w := TaskTestOutputs(inputs); len(w) != 2 || w[0][0][0] != 2 || w[1][0][0] != 4 {
			t.Errorf("%s: expected grids %v, want [[2]] and [[4]]", name, w)
		}
	}
	if w := TaskTestOutputs(map[string]any{"a": task, "b": task}); w != nil {
		t.Errorf("two tasks gave expected grids %v: which one is meant is not known", w)
	}
	if w := TaskTestOutputs(map[string]any{"ticket": "hello"}); w != nil {
		t.Errorf("a run with no task has expected grids %v", w)
	}
}
