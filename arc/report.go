package arc

import (
	"fmt"
	"sort"
	"strings"

	"github.com/flowrun/flowrun/jsonvalue"
)

// Report is arc_report(outputs, task): it scores what a transform
// produced for each input of an ARC task. outputs lists one entry per
// input, training inputs first, then test inputs, each {output: grid} or
// {error: "..."} (what the shipped refine pipeline's sandbox wrapper
// returns); a missing or null outputs (the code did not run) scores every
// pair as not produced. task is {train: [{input, output}], test: [...]}.
//
// Per pair: {index, split, match, size_ok, palette_ok, pixels_off,
// expected_size, got_size, expected_colors, got_colors, error, known,
// output} (output is the grid produced, or null).
// Colour counts map each colour (as text) to its number of cells.
// Totals: train_passed, train_total, test_passed, test_total,
// test_known (every test pair has an output), solved_train, solved_test
// (null when a test output is unknown), score (the fraction of training
// pairs passed) and text, a plain-language summary for a prompt: it shows
// each training pair's verdict (with both grids when it failed) and only
// the size or the error of each test pair, never a test output.
func Report(outputs, task any) (map[string]any, error) {
	t, ok := task.(map[string]any)
	if !ok {
		return nil, fmt.Errorf("arc_report: task must be a mapping with train and test, got %s", jsonvalue.Describe(task))
	}
	train, err := taskPairs(t["train"], "train")
	if err != nil {
		return nil, err
	}
	test, err := taskPairs(t["test"], "test")
	if err != nil {
		return nil, err
	}
	var outs []any
	switch o := outputs.(type) {
	case nil:
	case []any:
		outs = o
	default:
		return nil, fmt.Errorf("arc_report: outputs must be a list (one entry per train then test input), got %s", jsonvalue.Describe(outputs))
	}
	entry := func(i int) any {
		if i < len(outs) {
			return outs[i]
		}
		return nil
	}
	var text strings.Builder
	score := func(split string, pairs []map[string]any, offset int) ([]any, int, bool) {
		res := make([]any, len(pairs))
		passed, known := 0, true
		for i, p := range pairs {
			r := scorePair(entry(offset+i), p)
			r["index"], r["split"] = i, split
			res[i] = r
			if r["match"] == true {
				passed++
			}
			if r["known"] == false {
				known = false
			}
			if split == "test" {
				// The text goes back to the model: it never shows a test
				// output or whether a test pair passed.
				fmt.Fprintf(&text, "%s %d: %s\n", split, i+1, testLine(r))
				continue
			}
			fmt.Fprintf(&text, "%s %d: %s\n", split, i+1, pairLine(r))
			if r["match"] == false && r["output"] != nil && r["known"] == true {
				got, _ := GridText(r["output"])
				want, _ := GridText(p["output"])
				fmt.Fprintf(&text, "expected:\n%s\nproduced:\n%s\n", want, got)
			}
		}
		return res, passed, known
	}
	trainRes, trainPassed, _ := score("train", train, 0)
	testRes, testPassed, testKnown := score("test", test, len(train))
	out := map[string]any{
		"train": trainRes, "test": testRes,
		"train_passed": trainPassed, "train_total": len(train),
		"test_passed": testPassed, "test_total": len(test), "test_known": testKnown,
		"solved_train": len(train) > 0 && trainPassed == len(train),
		"solved_test":  nil,
		"score":        0.0,
	}
	if testKnown {
		out["solved_test"] = len(test) > 0 && testPassed == len(test)
	}
	if len(train) > 0 {
		out["score"] = float64(trainPassed) / float64(len(train))
	}
	fmt.Fprintf(&text, "training pairs passed: %d of %d", trainPassed, len(train))
	out["text"] = text.String()
	return out, nil
}

func taskPairs(v any, split string) ([]map[string]any, error) {
	if v == nil {
		return nil, nil
	}
	list, ok := v.([]any)
	if !ok {
		return nil, fmt.Errorf("arc_report: task.%s must be a list of {input, output}, got %s", split, jsonvalue.Describe(v))
	}
	out := make([]map[string]any, len(list))
	for i, p := range list {
		m, ok := p.(map[string]any)
		if !ok {
			return nil, fmt.Errorf("arc_report: task.%s[%d] must be {input, output}, got %s", split, i, jsonvalue.Describe(p))
		}
		out[i] = m
	}
	return out, nil
}

// scorePair scores one produced entry against one pair.
func scorePair(entry any, pair map[string]any) map[string]any {
	r := map[string]any{"match": false, "size_ok": false, "palette_ok": false, "pixels_off": nil,
		"expected_size": nil, "got_size": nil, "expected_colors": nil, "got_colors": nil, "error": nil, "known": true, "output": nil}
	want, wantErr := intGrid(pair["output"])
	if pair["output"] == nil || wantErr != nil {
		r["known"] = false
	} else {
		r["expected_size"] = gridSize(want)
		r["expected_colors"] = colorCounts(want)
	}
	e, _ := entry.(map[string]any)
	switch {
	case entry == nil:
		r["error"] = "no output: the code did not run"
		return r
	case e == nil:
		r["error"] = fmt.Sprintf("unexpected result entry %s", jsonvalue.Describe(entry))
		return r
	case e["error"] != nil:
		r["error"] = jsonvalue.Text(e["error"])
		return r
	}
	got, err := intGrid(e["output"])
	if err != nil {
		r["error"] = "transform returned " + err.Error()
		return r
	}
	r["output"] = e["output"]
	r["got_size"] = gridSize(got)
	r["got_colors"] = colorCounts(got)
	if r["known"] == false {
		return r
	}
	sizeOK := len(got) == len(want)
	for i := 0; sizeOK && i < len(got); i++ {
		sizeOK = len(got[i]) == len(want[i])
	}
	r["size_ok"] = sizeOK
	r["palette_ok"] = samePalette(got, want)
	if sizeOK {
		off := 0
		for i := range got {
			for j := range got[i] {
				if got[i][j] != want[i][j] {
					off++
				}
			}
		}
		r["pixels_off"] = off
		r["match"] = off == 0
	}
	return r
}

// intGrid checks that v is a rectangular-or-ragged list of rows of
// integers and returns it as ints.
func intGrid(v any) ([][]int, error) {
	rows, ok := v.([]any)
	if !ok {
		return nil, fmt.Errorf("%s, not a list of rows", jsonvalue.Describe(v))
	}
	g := make([][]int, len(rows))
	for i, row := range rows {
		cells, ok := row.([]any)
		if !ok {
			return nil, fmt.Errorf("row %d as %s, not a list", i, jsonvalue.Describe(row))
		}
		g[i] = make([]int, len(cells))
		for j, c := range cells {
			switch n := c.(type) {
			case int:
				g[i][j] = n
			case int64:
				g[i][j] = int(n)
			case float64:
				if n != float64(int(n)) {
					return nil, fmt.Errorf("cell [%d][%d] = %v, not an integer", i, j, n)
				}
				g[i][j] = int(n)
			default:
				return nil, fmt.Errorf("cell [%d][%d] as %s, not an integer", i, j, jsonvalue.Describe(c))
			}
		}
	}
	return g, nil
}

func gridSize(g [][]int) []any {
	w := 0
	if len(g) > 0 {
		w = len(g[0])
	}
	return []any{len(g), w}
}

func colorCounts(g [][]int) map[string]any {
	m := map[string]any{}
	for _, row := range g {
		for _, c := range row {
			k := fmt.Sprint(c)
			n, _ := m[k].(int)
			m[k] = n + 1
		}
	}
	return m
}

func samePalette(a, b [][]int) bool {
	set := func(g [][]int) string {
		seen := map[int]bool{}
		for _, row := range g {
			for _, c := range row {
				seen[c] = true
			}
		}
		keys := make([]int, 0, len(seen))
		for k := range seen {
			keys = append(keys, k)
		}
		sort.Ints(keys)
		return fmt.Sprint(keys)
	}
	return set(a) == set(b)
}

func pairLine(r map[string]any) string {
	switch {
	case r["error"] != nil:
		return "ERROR " + jsonvalue.Text(r["error"])
	case r["known"] == false:
		return fmt.Sprintf("produced a %v grid (expected output unknown)", sizeText(r["got_size"]))
	case r["match"] == true:
		return "PASS"
	case r["size_ok"] == false:
		return fmt.Sprintf("FAIL wrong size: got %s, expected %s", sizeText(r["got_size"]), sizeText(r["expected_size"]))
	}
	palette := "palette correct"
	if r["palette_ok"] == false {
		palette = fmt.Sprintf("wrong palette: got colours %s, expected %s", jsonvalue.Text(r["got_colors"]), jsonvalue.Text(r["expected_colors"]))
	}
	return fmt.Sprintf("FAIL %v pixels off (size correct, %s)", r["pixels_off"], palette)
}

// testLine describes a test pair without its expected output.
func testLine(r map[string]any) string {
	if r["error"] != nil {
		return "ERROR " + jsonvalue.Text(r["error"])
	}
	return fmt.Sprintf("produced a %s grid", sizeText(r["got_size"]))
}

func sizeText(v any) string {
	s, ok := v.([]any)
	if !ok || len(s) != 2 {
		return "?"
	}
	return fmt.Sprintf("%vx%v", s[0], s[1])
}
