package arc

import (
	"fmt"
	"strings"
	"testing"
)

func TestAugmentAddsRotationsAndFlips(t *testing.T) {
	g := func(rows ...any) []any { return rows }
	r := func(c ...any) []any { return c }
	test := []any{map[string]any{"input": g(r(5))}}
	task := map[string]any{
		"train": []any{
			// Asymmetric: all five copies are new.
			map[string]any{"input": g(r(1, 2, 3), r(4, 5, 6)), "output": g(r(1, 2, 3), r(4, 5, 6.0))},
			// Symmetric under every rotation and flip: no copy is new.
			map[string]any{"input": g(r(7, 7), r(7, 7)), "output": g(r(0))},
		},
		"test": test,
		"name": "kept",
	}
	aug, err := Augment(task)
	if err != nil {
		t.Fatal(err)
	}
	train := aug["train"].([]any)
	var got []string
	for _, p := range train {
		m := p.(map[string]any)
		got = append(got, fmt.Sprint(m["input"])+"->"+fmt.Sprint(m["output"]))
	}
	want := []string{
		"[[1 2 3] [4 5 6]]->[[1 2 3] [4 5 6]]",     // original 1
		"[[7 7] [7 7]]->[[0]]",                     // original 2
		"[[4 1] [5 2] [6 3]]->[[4 1] [5 2] [6 3]]", // rot90 clockwise
		"[[6 5 4] [3 2 1]]->[[6 5 4] [3 2 1]]",     // rot180
		"[[3 6] [2 5] [1 4]]->[[3 6] [2 5] [1 4]]", // rot270
		"[[3 2 1] [6 5 4]]->[[3 2 1] [6 5 4]]",     // mirrored left-right
		"[[4 5 6] [1 2 3]]->[[4 5 6] [1 2 3]]",     // upside down
	}
	if strings.Join(got, "\n") != strings.Join(want, "\n") {
		t.Fatalf("train:\n%s\nwant:\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
	if fmt.Sprint(aug["test"]) != fmt.Sprint(test) || aug["name"] != "kept" {
		t.Fatalf("other keys changed: %v", aug)
	}
	if len(task["train"].([]any)) != 2 {
		t.Fatal("the task given was changed")
	}
	// Cells come back as int, whatever number type they came in as.
	if _, ok := train[0].(map[string]any)["output"].([]any)[1].([]any)[2].(int); !ok {
		t.Fatalf("cells are not int: %#v", train[0])
	}
}

func TestAugmentErrors(t *testing.T) {
	for _, c := range []struct {
		task any
		want string
	}{
		{"not a task", "arc_augment: task must be a mapping"},
		{map[string]any{"train": "x"}, "train must be a list"},
		{map[string]any{"train": []any{map[string]any{"input": []any{[]any{1, 2}, []any{3}}, "output": []any{}}}}, "train[0].input: row 1 has 1 cells and row 0 has 2"},
		{map[string]any{"train": []any{map[string]any{"input": []any{[]any{1}}, "output": "x"}}}, "train[0].output: expected a grid"},
	} {
		if _, err := Augment(c.task); err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%v: error %v, want %q", c.task, err, c.want)
		}
	}
}
