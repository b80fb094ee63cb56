package arc

import (
	"bytes"
	"encoding/base64"
	"fmt"
	"image"
	"image/color"
	"image/png"

	"github.com/flowrun/flowrun/jsonvalue"
)

// cellColours is the ARC colour palette, colours 0 to 9 as the ARC viewer
// draws them.
var cellColours = color.Palette{
	color.RGBA{0x00, 0x00, 0x00, 0xff}, // 0 black
	color.RGBA{0x00, 0x74, 0xd9, 0xff}, // 1 blue
	color.RGBA{0xff, 0x41, 0x36, 0xff}, // 2 red
	color.RGBA{0x2e, 0xcc, 0x40, 0xff}, // 3 green
	color.RGBA{0xff, 0xdc, 0x00, 0xff}, // 4 yellow
	color.RGBA{0xaa, 0xaa, 0xaa, 0xff}, // 5 grey
	color.RGBA{0xf0, 0x12, 0xbe, 0xff}, // 6 magenta
	color.RGBA{0xff, 0x85, 0x1b, 0xff}, // 7 orange
	color.RGBA{0x7f, 0xdb, 0xff, 0xff}, // 8 sky
	color.RGBA{0x87, 0x0c, 0x25, 0xff}, // 9 maroon
}

// gridLine separates cells so that a model can count them.
var gridLine = color.RGBA{0x55, 0x55, 0x55, 0xff}

const cellPixels = 16 // pixels per cell, grid lines included

// PNG is arc_png(grid): the grid drawn with the ARC palette, as a PNG
// data URL that an llm node's images: can send.
func PNG(grid any) (string, error) {
	rows, ok := grid.([]any)
	if !ok || len(rows) == 0 {
		return "", fmt.Errorf("arc_png: expected a grid (a list of rows), got %s", jsonvalue.Describe(grid))
	}
	width := 0
	cells := make([][]int, len(rows))
	for r, row := range rows {
		list, ok := row.([]any)
		if !ok {
			return "", fmt.Errorf("arc_png: row %d is %s, not a list", r, jsonvalue.Describe(row))
		}
		width = max(width, len(list))
		for c, v := range list {
			n, ok := v.(int)
			if !ok || n < 0 || n > 9 {
				return "", fmt.Errorf("arc_png: cell [%d][%d] is %s, not a colour 0-9", r, c, jsonvalue.Describe(v))
			}
			cells[r] = append(cells[r], n)
		}
	}
	pal := append(color.Palette{}, cellColours...)
	pal = append(pal, gridLine)
	img := image.NewPaletted(image.Rect(0, 0, width*cellPixels+1, len(rows)*cellPixels+1), pal)
	for y := range img.Rect.Dy() {
		for x := range img.Rect.Dx() {
			r, c := y/cellPixels, x/cellPixels
			switch {
			case x%cellPixels == 0 || y%cellPixels == 0:
				img.SetColorIndex(x, y, uint8(len(cellColours)))
			case r < len(cells) && c < len(cells[r]):
				img.SetColorIndex(x, y, uint8(cells[r][c]))
			}
		}
	}
	var b bytes.Buffer
	if err := png.Encode(&b, img); err != nil {
		return "", fmt.Errorf("arc_png: %w", err)
	}
	return "data:image/png;base64," + base64.StdEncoding.EncodeToString(b.Bytes()), nil
}
