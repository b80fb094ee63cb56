// Package arc holds the expression functions for ARC (Abstraction and
// Reasoning Corpus) tasks: grid_text, grid_diff, arc_report, arc_augment
// and arc_png.
// A grid is a list of rows of integers, colours 0 to 9; a task is
// {train: [{input, output}], test: [...]}. The functions only read their
// arguments and return new values. arc sits below dsl, like jsonvalue: it
// knows nothing of pipelines, and dsl declares these functions in its
// default function set.
package arc

import (
	"fmt"
	"strings"

	"github.com/flowrun/flowrun/jsonvalue"
)

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
			b.WriteString(jsonvalue.Text(c))
		}
	}
	return b.String(), nil
}
