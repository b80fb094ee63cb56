package graph

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/flowrun/flowrun/dsl"
)

// Every node gets a box; a loop's body is laid out below its head and
// the node after the loop below the whole body; the edge from the end of
// the body back to the head is the only edge going up; no two boxes
// overlap.
func TestLayoutLoop(t *testing.T) {
	path := filepath.Join(t.TempDir(), "p.yaml")
	src := `
version: 1
name: p
nodes:
  - id: first
    set: {}
  - id: rounds
    loop:
      max_iterations: 3
      until: "true"
      body:
        - id: a
          set: {}
        - id: b
          set: {}
  - id: after
    set: {}
`
	if err := os.WriteFile(path, []byte(src), 0o644); err != nil {
		t.Fatal(err)
	}
	p, ds := dsl.Load(path)
	if p == nil {
		t.Fatal(ds)
	}
	d := Layout(p)
	at := map[string]Box{}
	for _, b := range d.Boxes {
		at[b.ID] = b
	}
	for _, id := range []string{"__start", "first", "rounds", "a", "b", "after", "__end"} {
		if _, ok := at[id]; !ok {
			t.Fatalf("no box for %s: %+v", id, d.Boxes)
		}
	}
	below := func(x, y string) bool { return at[x].Y > at[y].Y }
	if !below("a", "rounds") || !below("b", "a") || !below("after", "b") || !below("__end", "after") {
		t.Fatalf("layers: %+v", d.Boxes)
	}
	back := 0
	for _, l := range d.Lines {
		if l.Back {
			back++
		}
	}
	if back != 1 {
		t.Fatalf("%d edges back, want 1 (b -> rounds)", back)
	}
	for i, x := range d.Boxes {
		for _, y := range d.Boxes[i+1:] {
			if x.X < y.X+y.W && y.X < x.X+x.W && x.Y < y.Y+y.H && y.Y < x.Y+x.H {
				t.Fatalf("%s and %s overlap", x.ID, y.ID)
			}
		}
		if x.X+x.W > d.Width || x.Y+x.H > d.Height {
			t.Fatalf("%s is outside the drawing", x.ID)
		}
	}
}

// TestShippedPipelinesReadRight lays out every shipped pipeline and
// checks what a reader relies on: no line crosses a box it does not
// connect (which would read as an edge to or through that node), and
// every label is inside the drawing.
func TestShippedPipelinesReadRight(t *testing.T) {
	files, err := filepath.Glob("../pipelines/*.yaml")
	if err != nil {
		t.Fatal(err)
	}
	tools, _ := filepath.Glob("../pipelines/tools/*.yaml")
	files = append(files, tools...)
	laid := 0
	for _, f := range files {
		if strings.HasSuffix(f, ".cassette.yaml") || strings.HasSuffix(f, ".test.yaml") {
			continue
		}
		p, ds := dsl.Load(f)
		if p == nil {
			t.Errorf("%s: %s", f, ds)
			continue
		}
		laid++
		readsRight(t, filepath.Base(f), Layout(p))
		open := map[string]bool{}
		dsl.Walk(p, func(_ *dsl.Pipeline, n *dsl.Node) {
			if n.Call() != nil {
				open[n.ID] = true
			}
		})
		if len(open) > 0 {
			readsRight(t, filepath.Base(f)+" with its calls open", LayoutOpen(p, open))
		}
	}
	if laid < 8 {
		t.Fatalf("laid out %d shipped pipelines; the glob finds too few", laid)
	}
}

// readsRight checks drawing d of the pipeline named name: no line
// crosses a box it does not connect, every label is inside it and clear
// of every other (a 10 px label is 13 high), a loop's done edge leaves
// its box by the left side, and every line of a box's text is inside
// the box (at 6.2 pixels a character of its 12 px font, as Chromium
// draws it, after 10 of padding).
func readsRight(t *testing.T, name string, d *Drawing) {
	t.Helper()
	kinds := map[string]Box{}
	for _, b := range d.Boxes {
		kinds[b.ID] = b
	}
	var labels []Box
	for _, ln := range d.Lines {
		if ln.Label == "" {
			continue
		}
		r := Box{ID: ln.Label, X: ln.LabelX, Y: ln.LabelY - 10, W: labelChar * len(ln.Label), H: 13}
		for _, o := range labels {
			if r.X < o.X+o.W && o.X < r.X+r.W && r.Y < o.Y+o.H && o.Y < r.Y+r.H {
				t.Errorf("%s: the labels %q and %q overlap", name, o.ID, r.ID)
			}
		}
		labels = append(labels, r)
		if from := kinds[ln.From]; from.Kind == "loop" && ln.Label == "done" {
			if s := segments(t, ln.Path)[0]; s[0] != from.X || s[2] > from.X {
				t.Errorf("%s: the done edge of %s (%s) does not leave its box's left side", name, ln.From, ln.Path)
			}
		}
	}
	for _, b := range d.Boxes {
		for _, l := range b.Lines {
			if w := 10 + len([]rune(l))*62/10; w > b.W {
				t.Errorf("%s: the line %q of %s is %d px wide in a box of %d", name, l, b.ID, w, b.W)
			}
		}
	}
	for _, ln := range d.Lines {
		for _, seg := range segments(t, ln.Path) {
			for _, b := range d.Boxes {
				if b.ID != ln.From && b.ID != ln.To && crosses(seg, b) {
					t.Errorf("%s: the line %s -> %s (%s) crosses the box of %s", name, ln.From, ln.To, ln.Label, b.ID)
				}
			}
		}
		if ln.Label != "" {
			w := labelChar * len(ln.Label)
			if ln.LabelX < 0 || ln.LabelX+w > d.Width || ln.LabelY-10 < 0 || ln.LabelY > d.Height {
				t.Errorf("%s: the label %q at %d,%d leaves the %dx%d drawing", name, ln.Label, ln.LabelX, ln.LabelY, d.Width, d.Height)
			}
		}
	}
}

// segments reads the straight segments of an SVG path of M and L commands.
func segments(t *testing.T, path string) [][4]int {
	t.Helper()
	var pts [][2]int
	for _, f := range strings.Fields(path) {
		var x, y int
		if _, err := fmt.Sscanf(f[1:], "%d,%d", &x, &y); err != nil || (f[0] != 'M' && f[0] != 'L') {
			t.Fatalf("path %q: %q is not M or L x,y", path, f)
		}
		pts = append(pts, [2]int{x, y})
	}
	var segs [][4]int
	for i := 1; i < len(pts); i++ {
		segs = append(segs, [4]int{pts[i-1][0], pts[i-1][1], pts[i][0], pts[i][1]})
	}
	return segs
}

// crosses says whether an axis-parallel segment enters box b's interior.
func crosses(s [4]int, b Box) bool {
	x1, x2 := min(s[0], s[2]), max(s[0], s[2])
	y1, y2 := min(s[1], s[3]), max(s[1], s[3])
	return x1 < b.X+b.W && x2 > b.X && y1 < b.Y+b.H && y2 > b.Y
}

// TestCallNodesFoldAndOpen: a call node is one box, folded, until it is
// opened: then the nodes of the pipeline it calls are drawn after it,
// with ids under its own, and the called pipeline's end leads on.
func TestCallNodesFoldAndOpen(t *testing.T) {
	p, ds := dsl.Load("../pipelines/augmented.yaml")
	if p == nil {
		t.Fatal(ds)
	}
	ids := func(d *Drawing) (inner []string, solve Box) {
		for _, b := range d.Boxes {
			if strings.HasPrefix(b.ID, "solve/") {
				inner = append(inner, b.ID)
			}
			if b.ID == "solve" {
				solve = b
			}
		}
		return inner, solve
	}
	inner, solve := ids(Layout(p))
	if len(inner) != 0 || !solve.Call || solve.Open {
		t.Fatalf("folded: inner boxes %v, the call's box %+v", inner, solve)
	}
	d := LayoutOpen(p, map[string]bool{"solve": true})
	inner, solve = ids(d)
	if len(inner) < 2 || !solve.Call || !solve.Open {
		t.Fatalf("open: inner boxes %v, the call's box %+v", inner, solve)
	}
	calls := false
	for _, ln := range d.Lines {
		calls = calls || ln.From == "solve" && ln.Label == "calls" && strings.HasPrefix(ln.To, "solve/")
	}
	if !calls {
		t.Errorf("no line from the call to the first node it calls: %+v", d.Lines)
	}
}
