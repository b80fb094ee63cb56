package arc

import (
	"bytes"
	"encoding/base64"
	"image/png"
	"strings"
	"testing"
)

func TestPNG(t *testing.T) {
	url, err := PNG([]any{[]any{0, 1}, []any{2, 9}})
	if err != nil {
		t.Fatal(err)
	}
	raw, err := base64.StdEncoding.DecodeString(strings.TrimPrefix(url, "data:image/png;base64,"))
	if err != nil || !strings.HasPrefix(url, "data:image/png;base64,") {
		t.Fatalf("not a PNG data URL: %.40s %v", url, err)
	}
	img, err := png.Decode(bytes.NewReader(raw))
	if err != nil {
		t.Fatal(err)
	}
	if b := img.Bounds(); b.Dx() != 2*cellPixels+1 || b.Dy() != 2*cellPixels+1 {
		t.Fatalf("size %v", b)
	}
	// The centre of each cell has its colour; cell borders are grid lines.
	for _, c := range []struct{ r, c, colour int }{{0, 0, 0}, {0, 1, 1}, {1, 0, 2}, {1, 1, 9}} {
		got := img.At(c.c*cellPixels+cellPixels/2, c.r*cellPixels+cellPixels/2)
		if got != cellColours[c.colour] {
			r, g, b, _ := got.RGBA()
			t.Errorf("cell [%d][%d] is %d,%d,%d, want colour %d", c.r, c.c, r>>8, g>>8, b>>8, c.colour)
		}
	}
	if img.At(0, 0) != gridLine {
		t.Error("no grid line at the border")
	}
	for _, bad := range []any{nil, []any{}, []any{[]any{10}}, []any{"row"}} {
		if _, err := PNG(bad); err == nil {
			t.Errorf("arc_png(%v) should fail", bad)
		}
	}
}
