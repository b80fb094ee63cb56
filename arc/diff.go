package arc

import (
	"fmt"
	"strings"
)

// Diff is grid_diff(expected, actual): a text for a prompt that says
// where a produced grid differs from the expected one. Cells both grids
// have are drawn as a grid, "." where they agree and "expected/got" where
// they do not, so a model revising its program sees which cells it got
// wrong without comparing two grids digit by digit. Grids of different
// sizes are compared over the cells they share, after a line giving both
// sizes. A null actual (nothing was produced) is said in words.
func Diff(expected, actual any) (string, error) {
	want, err := intGrid(expected)
	if err != nil {
		return "", fmt.Errorf("grid_diff: expected grid: %w", err)
	}
	if actual == nil {
		return fmt.Sprintf("no grid was produced (expected %s)", sizeText(gridSize(want))), nil
	}
	got, err := intGrid(actual)
	if err != nil {
		return "", fmt.Errorf("grid_diff: actual grid: %w", err)
	}
	cells := make([][]string, min(len(want), len(got)))
	total, off, width := 0, 0, 1
	for i := range cells {
		n := min(len(want[i]), len(got[i]))
		cells[i] = make([]string, n)
		for j := range n {
			total++
			cells[i][j] = "."
			if want[i][j] != got[i][j] {
				off++
				cells[i][j] = fmt.Sprintf("%d/%d", want[i][j], got[i][j])
				width = max(width, len(cells[i][j]))
			}
		}
	}
	var b strings.Builder
	sameSize := len(want) == len(got)
	for i := 0; sameSize && i < len(want); i++ {
		sameSize = len(want[i]) == len(got[i])
	}
	if !sameSize {
		fmt.Fprintf(&b, "wrong size: expected %s, got %s; over the cells both have, ",
			sizeText(gridSize(want)), sizeText(gridSize(got)))
	}
	if off == 0 {
		if sameSize {
			return "the grids are equal", nil
		}
		fmt.Fprintf(&b, "all %d agree", total)
		return b.String(), nil
	}
	fmt.Fprintf(&b, "%d of %d cells differ (expected/got; . where they agree):", off, total)
	for _, row := range cells {
		b.WriteByte('\n')
		for j, c := range row {
			if j > 0 {
				b.WriteByte(' ')
			}
			b.WriteString(c)
			if j < len(row)-1 {
				b.WriteString(strings.Repeat(" ", width-len(c)))
			}
		}
	}
	return b.String(), nil
}
