package arc

import (
	"fmt"
	"html/template"
	"strings"
)

// maxGridSide is the largest grid drawn as a picture: ARC grids are at
// most 30 by 30, and anything far larger is data, not a picture.
const maxGridSide = 60

// AsGrid reads v as an ARC grid: a non-empty list of equally long,
// non-empty rows of integers 0 to 9 (as JSON decodes them: float64 or
// int). Anything else is no grid, so that a page can draw exactly the
// values people would rather look at than read.
func AsGrid(v any) ([][]int, bool) {
	rows, ok := v.([]any)
	if !ok || len(rows) == 0 || len(rows) > maxGridSide {
		return nil, false
	}
	grid := make([][]int, len(rows))
	for i, r := range rows {
		cells, ok := r.([]any)
		if !ok || len(cells) == 0 || len(cells) > maxGridSide || len(cells) != len(rows[0].([]any)) {
			return nil, false
		}
		grid[i] = make([]int, len(cells))
		for j, c := range cells {
			var n int
			switch x := c.(type) {
			case float64:
				if x != float64(int(x)) {
					return nil, false
				}
				n = int(x)
			case int:
				n = x
			case int64:
				n = int(x)
			default:
				return nil, false
			}
			if n < 0 || n > 9 {
				return nil, false
			}
			grid[i][j] = n
		}
	}
	return grid, true
}

// GridSVG draws grid as an inline SVG picture in the ARC palette, cell
// pixels a side. With against (another grid of the same shape, such as
// the expected output), cells that differ from it are outlined; a grid of
// another shape than against says so in its title.
func GridSVG(grid, against [][]int, cell int) template.HTML {
	h, w := len(grid), len(grid[0])
	var b strings.Builder
	title := fmt.Sprintf("%dx%d grid", h, w) + AgainstNote(grid, against)
	var marks strings.Builder
	if sameShape(grid, against) {
		for i := range grid {
			for j := range grid[i] {
				if grid[i][j] != against[i][j] {
					fmt.Fprintf(&marks, `<rect x="%d" y="%d" width="%d" height="%d" fill="none" stroke="#fff" stroke-width="2" stroke-dasharray="2 1"/>`,
						j*cell+1, i*cell+1, cell-2, cell-2)
				}
			}
		}
	}
	fmt.Fprintf(&b, `<svg class="arc-grid" xmlns="http://www.w3.org/2000/svg" width="%d" height="%d" viewBox="0 0 %d %d" role="img" aria-label="%s"><title>%s</title>`,
		w*cell, h*cell, w*cell, h*cell, title, title)
	for i, row := range grid {
		for j, c := range row {
			r, g, bl, _ := cellColours[c].RGBA()
			fmt.Fprintf(&b, `<rect x="%d" y="%d" width="%d" height="%d" fill="#%02x%02x%02x" stroke="#555" stroke-width="0.5"/>`,
				j*cell, i*cell, cell, cell, r>>8, g>>8, bl>>8)
		}
	}
	b.WriteString(marks.String())
	b.WriteString(`</svg>`)
	// Only numbers and fixed text go into it.
	return template.HTML(b.String())
}

// AgainstNote says how grid compares with against (the expected grid),
// as a note after its size: ", expected 3x3" for another shape, ", 2
// cells differ from the expected", ", as expected"; "" without against.
func AgainstNote(grid, against [][]int) string {
	switch {
	case against == nil:
		return ""
	case !sameShape(grid, against):
		return fmt.Sprintf(", expected %dx%d", len(against), len(against[0]))
	}
	n := 0
	for i := range grid {
		for j := range grid[i] {
			if grid[i][j] != against[i][j] {
				n++
			}
		}
	}
	switch n {
	case 0:
		return ", as expected"
	case 1:
		return ", 1 cell differs from the expected"
	}
	return fmt.Sprintf(", %d cells differ from the expected", n)
}

// sameShape says whether grid and against, both grids, have the same
// number of rows and columns.
func sameShape(grid, against [][]int) bool {
	return against != nil && len(grid) == len(against) && len(grid[0]) == len(against[0])
}
