package arc

import (
	"strings"
	"testing"
)

func sampleTask() map[string]any {
	g := func(rows ...any) []any { return rows }
	r := func(c ...any) []any { return c }
	return map[string]any{
		"train": []any{
			map[string]any{"input": g(r(1, 0), r(0, 1)), "output": g(r(0, 1), r(1, 0))},
			map[string]any{"input": g(r(1, 1), r(0, 0)), "output": g(r(0, 0), r(1, 1))},
			map[string]any{"input": g(r(2, 0), r(0, 0)), "output": g(r(0, 0), r(2, 0))},
		},
		"test": []any{
			map[string]any{"input": g(r(3, 0), r(0, 0)), "output": g(r(0, 0), r(3, 0))},
		},
	}
}

func TestReportScoresEachPair(t *testing.T) {
	g := func(rows ...any) []any { return rows }
	r := func(c ...any) []any { return c }
	outputs := []any{
		map[string]any{"output": g(r(0, 1), r(1, 0))},         // match
		map[string]any{"output": g(r(1, 1), r(0, 0))},         // 4 pixels off, palette right
		map[string]any{"error": "ZeroDivisionError: boom"},    // raised
		map[string]any{"output": g(r(0, 0, 0), r(3, 0, 0.0))}, // wrong size
	}
	rep, err := Report(outputs, sampleTask())
	if err != nil {
		t.Fatal(err)
	}
	if rep["train_passed"] != 1 || rep["train_total"] != 3 || rep["solved_train"] != false {
		t.Fatalf("totals: %v", rep)
	}
	if rep["test_passed"] != 0 || rep["test_total"] != 1 || rep["test_known"] != true || rep["solved_test"] != false {
		t.Fatalf("test totals: %v", rep)
	}
	train := rep["train"].([]any)
	p0, p1, p2 := train[0].(map[string]any), train[1].(map[string]any), train[2].(map[string]any)
	if p0["match"] != true || p0["pixels_off"] != 0 || p0["size_ok"] != true || p0["palette_ok"] != true {
		t.Fatalf("pair 0: %v", p0)
	}
	if p1["match"] != false || p1["pixels_off"] != 4 || p1["size_ok"] != true || p1["palette_ok"] != true {
		t.Fatalf("pair 1: %v", p1)
	}
	if c := p1["got_colors"].(map[string]any); c["1"] != 2 || c["0"] != 2 {
		t.Fatalf("pair 1 colours: %v", c)
	}
	if p2["error"] != "ZeroDivisionError: boom" || p2["match"] != false {
		t.Fatalf("pair 2: %v", p2)
	}
	t0 := rep["test"].([]any)[0].(map[string]any)
	if t0["size_ok"] != false || t0["pixels_off"] != nil || t0["palette_ok"] != true {
		t.Fatalf("test 0: %v", t0)
	}
	for _, want := range []string{"train 1: PASS", "train 2: FAIL 4 pixels off (size correct, palette correct)",
		"train 3: ERROR ZeroDivisionError: boom", "test 1: produced a 2x3 grid", "training pairs passed: 1 of 3"} {
		if !strings.Contains(rep["text"].(string), want) {
			t.Errorf("text lacks %q:\n%s", want, rep["text"])
		}
	}
	if strings.Contains(rep["text"].(string), "3 0\n") {
		t.Errorf("the text shows a test output:\n%s", rep["text"])
	}
	if s := rep["score"].(float64); s < 0.33 || s > 0.34 {
		t.Fatalf("score %v", s)
	}
}

func TestReportNoOutputsAndUnknownTest(t *testing.T) {
	task := sampleTask()
	delete(task["test"].([]any)[0].(map[string]any), "output")
	rep, err := Report(nil, task)
	if err != nil {
		t.Fatal(err)
	}
	if rep["train_passed"] != 0 || rep["solved_test"] != nil || rep["test_known"] != false {
		t.Fatalf("%v", rep)
	}
	if e := rep["train"].([]any)[0].(map[string]any)["error"]; e != "no output: the code did not run" {
		t.Fatalf("error %v", e)
	}
	// A bad grid from the transform is that pair's error, not a failure.
	rep, err = Report([]any{map[string]any{"output": "nope"}}, sampleTask())
	if err != nil {
		t.Fatal(err)
	}
	if e, _ := rep["train"].([]any)[0].(map[string]any)["error"].(string); !strings.HasPrefix(e, "transform returned") {
		t.Fatalf("error %q", e)
	}
	if _, err := Report(nil, "task"); err == nil {
		t.Fatal("a task that is not a mapping is accepted")
	}
}
