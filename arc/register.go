// Package arc holds the expression functions for ARC (Abstraction and
// Reasoning Corpus) tasks: grid_text, grid_diff, arc_report, arc_augment
// and arc_png.
// A grid is a list of rows of integers, colours 0 to 9; a task is
// {train: [{input, output}], test: [...]}. The functions only read their
// arguments and return new values. Register makes them callable from
// pipelines; the DSL core knows nothing of them.
package arc

import (
	"fmt"
	"strings"
	"sync"

	"github.com/flowrun/flowrun/dsl"
	"github.com/flowrun/flowrun/jsonvalue"
)

var registerOnce sync.Once

// Register adds the ARC functions to dsl's expression function registry,
// for every pipeline loaded after it. Calling it again does nothing.
func Register() {
	registerOnce.Do(func() {
		for _, fn := range functions {
			dsl.RegisterFunction(fn)
		}
	})
}

var functions = []dsl.Function{
	{Name: "grid_text", Signature: "grid_text(grid) string", Doc: "An ARC grid as rows of digits, one row per line.",
		Types: []any{new(func(any) string)},
		Bind: func(dsl.FunctionEnv) func(...any) (any, error) {
			return func(args ...any) (any, error) { return GridText(args[0]) }
		}},
	{Name: "grid_diff", Signature: "grid_diff(expected, actual) string",
		Doc:   "Where a produced ARC grid differs from the expected one, for a prompt: the cells both have as a grid, . where they agree and expected/got where not; a size mismatch or a null actual said in words.",
		Types: []any{new(func(any, any) string)},
		Bind: func(dsl.FunctionEnv) func(...any) (any, error) {
			return func(args ...any) (any, error) { return Diff(args[0], args[1]) }
		}},
	{Name: "arc_report", Signature: "arc_report(outputs, task) object",
		Doc:   "Scores what a transform produced for each input of an ARC task: per pair match, size, palette and pixels off; totals, solved flags and a text report.",
		Types: []any{new(func(any, any) map[string]any)},
		Bind: func(dsl.FunctionEnv) func(...any) (any, error) {
			return func(args ...any) (any, error) { return Report(args[0], args[1]) }
		}},
	{Name: "arc_augment", Signature: "arc_augment(task) object",
		Doc:   "An ARC task with rotated and flipped copies of its training pairs added.",
		Types: []any{new(func(any) map[string]any)},
		Bind: func(dsl.FunctionEnv) func(...any) (any, error) {
			return func(args ...any) (any, error) { return Augment(args[0]) }
		}},
	{Name: "arc_png", Signature: "arc_png(grid) string",
		Doc:   "An ARC grid drawn in the ARC palette, as a PNG data URL for images:.",
		Types: []any{new(func(any) string)},
		Bind: func(dsl.FunctionEnv) func(...any) (any, error) {
			return func(args ...any) (any, error) { return PNG(args[0]) }
		}},
}

// GridText is grid_text(grid): the grid one row per line, cells separated
// by spaces.
func GridText(grid any) (string, error) {
	rows, ok := grid.([]any)
	if !ok {
		return "", fmt.Errorf("grid_text: expected a list of rows, got %s", jsonvalue.Describe(grid))
	}
	var b strings.Builder
	for i, row := range rows {
		cells, ok := row.([]any)
		if !ok {
			return "", fmt.Errorf("grid_text: row %d is %s, not a list", i, jsonvalue.Describe(row))
		}
		if i > 0 {
			b.WriteByte('\n')
		}
		for j, c := range cells {
			if j > 0 {
				b.WriteByte(' ')
			}
			b.WriteString(dsl.Stringify(c))
		}
	}
	return b.String(), nil
}
