package arc

import (
	"fmt"
	"maps"
	"slices"
)

// Drawn is one grid of a value, with the expected grid it is compared
// with (nil when none is known) and where in the value it is ("test 1",
// "test 1 attempt_2"; "" for a value that is one grid).
type Drawn struct {
	Label      string
	Grid, Want [][]int
}

// Grids reads v as the shapes ARC pipelines give their grids in: one
// grid; a list of grids, one per test input (test_predictions); or a
// list of maps of grids, one map per test input (attempts, or ARC's own
// test pairs of input and output). wants are the expected grids per test
// input (TestOutputs): each grid is compared with its test input's. ok
// is false when v is none of these shapes.
//
// This is the rule the report, the web UI's run, batch and compare pages
// and batch show --item draw grids by, so that a failing ARC item shows
// the same pictures in each.
func Grids(v any, wants [][][]int) (drawn []Drawn, ok bool) {
	want := func(i int) [][]int {
		if i < len(wants) {
			return wants[i]
		}
		return nil
	}
	if g, ok := AsGrid(v); ok {
		d := Drawn{Grid: g}
		if len(wants) == 1 {
			d.Want = wants[0]
		}
		return []Drawn{d}, true
	}
	list, isList := v.([]any)
	if !isList || len(list) == 0 {
		return nil, false
	}
	for i, el := range list {
		label := fmt.Sprintf("test %d", i+1)
		if g, ok := AsGrid(el); ok {
			drawn = append(drawn, Drawn{Label: label, Grid: g, Want: want(i)})
			continue
		}
		m, isMap := el.(map[string]any)
		if !isMap || len(m) == 0 {
			return nil, false
		}
		for _, k := range slices.Sorted(maps.Keys(m)) {
			g, ok := AsGrid(m[k])
			if !ok {
				return nil, false
			}
			d := Drawn{Label: label + " " + k, Grid: g, Want: want(i)}
			if k == "input" {
				d.Want = nil // a task's input is not compared with its output
			}
			drawn = append(drawn, d)
		}
	}
	return drawn, true
}

// TestOutputs is the expected grid of each test input among a dataset
// item's fields: ARC's test list of {input, output} pairs, a list of
// grids, or one grid (a task with one test input). It is nil when no
// field holds them, or more than one could.
func TestOutputs(expected map[string]any) [][][]int {
	var found [][][]int
	for _, v := range expected {
		var wants [][][]int
		switch {
		case isGrid(v):
			g, _ := AsGrid(v)
			wants = [][][]int{g}
		default:
			wants = testList(v)
		}
		if wants == nil {
			continue
		}
		if found != nil {
			return nil
		}
		found = wants
	}
	return found
}

// TaskTestOutputs is the expected grid of each test input of the ARC
// task a run was given: the test pairs of the input that is a task
// ({train, test}), or of the inputs themselves when they are its fields.
// It is nil when no input is a task with its test outputs, or more than
// one is.
func TaskTestOutputs(inputs map[string]any) [][][]int {
	found := testList(inputs["test"])
	for _, v := range inputs {
		task, ok := v.(map[string]any)
		if !ok {
			continue
		}
		if wants := testList(task["test"]); wants != nil {
			if found != nil {
				return nil
			}
			found = wants
		}
	}
	return found
}

func isGrid(v any) bool {
	_, ok := AsGrid(v)
	return ok
}

// testList reads v as a list of grids or of {output: grid} pairs; nil
// when it is neither, or an output is missing (a hidden test output).
func testList(v any) [][][]int {
	list, ok := v.([]any)
	if !ok || len(list) == 0 {
		return nil
	}
	out := make([][][]int, len(list))
	for i, el := range list {
		if m, isMap := el.(map[string]any); isMap {
			el = m["output"]
		}
		g, ok := AsGrid(el)
		if !ok {
			return nil
		}
		out[i] = g
	}
	return out
}
