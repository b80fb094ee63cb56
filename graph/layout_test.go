package graph

import (
	"os"
	"path/filepath"
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
