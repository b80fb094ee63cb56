package arc

import (
	"encoding/json"
	"fmt"

	"github.com/flowrun/flowrun/jsonvalue"
)

// augmentations are the copies arc_augment adds of each training pair,
// in order: the same geometric transformation applied to the input and to
// the output grid.
var augmentations = []struct {
	name string
	f    func([][]int) [][]int
}{
	{"rot90", rot90},
	{"rot180", func(g [][]int) [][]int { return rot90(rot90(g)) }},
	{"rot270", func(g [][]int) [][]int { return rot90(rot90(rot90(g))) }},
	{"flip_horizontal", flipH},
	{"flip_vertical", flipV},
}

// Augment is arc_augment(task): a copy of the ARC task whose train list
// holds the original pairs, in order, then each pair rotated by 90, 180 and
// 270 degrees clockwise, mirrored left-right (flip_horizontal) and flipped
// upside down (flip_vertical), input and output alike. A pair equal to one
// already in the list (a symmetric grid's rotation, say) is left out. The
// test list and any other key are kept as they are. Grids must be
// rectangular lists of rows of integers.
//
// The copies are only valid examples when the task's rule commutes with
// rotations and flips (a recolouring, a border, ...): a rule like "flip
// upside down" becomes "mirror left-right" once rotated by 90 degrees.
func Augment(task any) (map[string]any, error) {
	t, ok := task.(map[string]any)
	if !ok {
		return nil, fmt.Errorf("arc_augment: task must be a mapping with train and test, got %s", jsonvalue.Describe(task))
	}
	pairs, err := taskPairs(t["train"], "train")
	if err != nil {
		return nil, fmt.Errorf("arc_augment: %w", err)
	}
	type pair struct{ in, out [][]int }
	originals := make([]pair, len(pairs))
	for i, p := range pairs {
		in, err := rectGrid(p["input"])
		if err != nil {
			return nil, fmt.Errorf("arc_augment: train[%d].input: %w", i, err)
		}
		out, err := rectGrid(p["output"])
		if err != nil {
			return nil, fmt.Errorf("arc_augment: train[%d].output: %w", i, err)
		}
		originals[i] = pair{in, out}
	}
	seen := map[string]bool{}
	train := []any{}
	add := func(p pair) {
		key, _ := json.Marshal([2][][]int{p.in, p.out})
		if seen[string(key)] {
			return
		}
		seen[string(key)] = true
		train = append(train, map[string]any{"input": gridValue(p.in), "output": gridValue(p.out)})
	}
	for _, p := range originals {
		add(p)
	}
	for _, p := range originals {
		for _, a := range augmentations {
			add(pair{a.f(p.in), a.f(p.out)})
		}
	}
	out := make(map[string]any, len(t))
	for k, v := range t {
		out[k] = v
	}
	out["train"] = train
	return out, nil
}

// rectGrid parses a grid and checks that every row has the same length.
func rectGrid(v any) ([][]int, error) {
	g, err := intGrid(v)
	if err != nil {
		return nil, fmt.Errorf("expected a grid, got %w", err)
	}
	for i := range g {
		if len(g[i]) != len(g[0]) {
			return nil, fmt.Errorf("row %d has %d cells and row 0 has %d: rotations need a rectangular grid", i, len(g[i]), len(g[0]))
		}
	}
	return g, nil
}

// rot90 rotates a rectangular grid by 90 degrees clockwise.
func rot90(g [][]int) [][]int {
	h := len(g)
	if h == 0 {
		return [][]int{}
	}
	w := len(g[0])
	out := make([][]int, w)
	for i := range out {
		out[i] = make([]int, h)
		for j := range out[i] {
			out[i][j] = g[h-1-j][i]
		}
	}
	return out
}

// flipH mirrors each row left-right.
func flipH(g [][]int) [][]int {
	out := make([][]int, len(g))
	for i, row := range g {
		out[i] = make([]int, len(row))
		for j := range row {
			out[i][j] = row[len(row)-1-j]
		}
	}
	return out
}

// flipV reverses the order of the rows.
func flipV(g [][]int) [][]int {
	out := make([][]int, len(g))
	for i, row := range g {
		out[len(g)-1-i] = append([]int(nil), row...)
	}
	return out
}

// gridValue turns a grid back into the value expressions see.
func gridValue(g [][]int) []any {
	rows := make([]any, len(g))
	for i, row := range g {
		cells := make([]any, len(row))
		for j, c := range row {
			cells[j] = c
		}
		rows[i] = cells
	}
	return rows
}
