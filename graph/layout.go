package graph

import (
	"fmt"
	"strings"

	"github.com/flowrun/flowrun/dsl"
)

// Drawing is a pipeline laid out in layers from top to bottom, for a
// renderer that draws boxes and lines (the web UI's SVG). Box IDs are
// node ids, so that a box can show its node's state; the start, end and
// join boxes have ids no node can have (they contain "__").
type Drawing struct {
	Width, Height int
	Boxes         []Box
	Lines         []Line
}

// Box is one vertex: a node, a loop head, a fork or join, start or end.
type Box struct {
	ID    string
	Kind  string // box, decision, loop, fork, join, terminal
	Lines []string
	X, Y  int // top left
	W, H  int
}

// Line is one edge as an SVG path; Back says it returns to an earlier
// layer (a loop's iteration or a jump back).
type Line struct {
	Path         string
	Label        string
	LabelX       int
	LabelY       int
	Dashed, Back bool
}

// LineHeight is the spacing of a box's lines of text, in pixels.
const LineHeight = 16

const (
	boxW   = 280
	gapX   = 40
	gapY   = 56
	margin = 24
)

var kindNames = map[shape]string{box: "box", decision: "decision", loopHead: "loop", fork: "fork", join: "join", terminal: "terminal"}

// Layout lays p out: each vertex on the layer after the deepest vertex
// that leads to it by a forward edge, vertices of a layer in the order
// a depth-first walk from start meets them.
func Layout(p *dsl.Pipeline) *Drawing {
	c := build(p)
	out := map[string][]edge{}
	for _, e := range c.edges {
		out[e.from] = append(out[e.from], e)
	}
	// A depth-first walk finds the back edges (to a vertex on the walk's
	// stack) and an order in which every forward edge goes later.
	const (
		unseen = iota
		onStack
		finished
	)
	state := map[string]int{}
	back := map[[2]string]bool{}
	var seen []string
	var walk func(v string)
	walk = func(v string) {
		state[v] = onStack
		seen = append(seen, v)
		for _, e := range out[v] {
			switch state[e.to] {
			case onStack:
				back[[2]string{e.from, e.to}] = true
			case unseen:
				walk(e.to)
			}
		}
		state[v] = finished
	}
	walk(startID)
	for _, v := range c.vertices {
		if state[v.id] == unseen {
			walk(v.id)
		}
	}
	// Ranks are longest paths over the forward edges, plus one constraint:
	// where a loop goes when done comes after every node of its body (the
	// sources of the edges back to its head).
	type arc struct{ from, to string }
	var arcs []arc
	for _, e := range c.edges {
		if !back[[2]string{e.from, e.to}] {
			arcs = append(arcs, arc{e.from, e.to})
		}
	}
	for _, e := range c.edges {
		if !back[[2]string{e.from, e.to}] || vsShape(c, e.to) != loopHead {
			continue
		}
		for _, d := range out[e.to] {
			if d.label == "done" {
				arcs = append(arcs, arc{e.from, d.to})
			}
		}
	}
	rank := map[string]int{}
	for range c.vertices {
		moved := false
		for _, a := range arcs {
			if rank[a.to] < rank[a.from]+1 {
				rank[a.to] = rank[a.from] + 1
				moved = true
			}
		}
		if !moved {
			break
		}
	}
	// The end box goes last, below everything.
	deepest := 0
	for id, r := range rank {
		if id != endID && r > deepest {
			deepest = r
		}
	}
	rank[endID] = deepest + 1

	vs := map[string]vertex{}
	for _, v := range c.vertices {
		vs[v.id] = v
	}
	layers := make([][]string, deepest+2)
	for _, id := range seen {
		layers[rank[id]] = append(layers[rank[id]], id)
	}
	d := &Drawing{}
	boxes := map[string]*Box{}
	widest := 0
	for _, l := range layers {
		widest = max(widest, len(l))
	}
	d.Width = 2*margin + widest*boxW + (widest-1)*gapX + gapX // room for the edges back on the right
	y := margin
	for _, l := range layers {
		tallest := 0
		span := len(l)*boxW + (len(l)-1)*gapX
		x := (d.Width - span) / 2
		for _, id := range l {
			v := vs[id]
			lines := strings.Split(v.label, "\n")
			b := Box{ID: id, Kind: kindNames[v.shape], Lines: lines, X: x, Y: y, W: boxW, H: 12 + LineHeight*len(lines)}
			d.Boxes = append(d.Boxes, b)
			tallest = max(tallest, b.H)
			x += boxW + gapX
		}
		y += tallest + gapY
	}
	for i := range d.Boxes {
		boxes[d.Boxes[i].ID] = &d.Boxes[i]
	}
	d.Height = y - gapY + margin
	for _, e := range c.edges {
		a, b := boxes[e.from], boxes[e.to]
		if a == nil || b == nil {
			continue
		}
		ln := Line{Label: e.label, Dashed: e.dashed, Back: back[[2]string{e.from, e.to}]}
		if ln.Back {
			// Around the right of both boxes, from a's side to b's.
			x1, y1 := a.X+a.W, a.Y+a.H/2
			x2, y2 := b.X+b.W, b.Y+b.H/2
			out := max(x1, x2) + gapX/2 + 10
			ln.Path = fmt.Sprintf("M%d,%d C%d,%d %d,%d %d,%d", x1, y1, out, y1, out, y2, x2, y2)
			ln.LabelX, ln.LabelY = out-6, (y1+y2)/2
		} else {
			x1, y1 := a.X+a.W/2, a.Y+a.H
			x2, y2 := b.X+b.W/2, b.Y
			mid := (y1 + y2) / 2
			ln.Path = fmt.Sprintf("M%d,%d C%d,%d %d,%d %d,%d", x1, y1, x1, mid, x2, mid, x2, y2)
			ln.LabelX, ln.LabelY = (x1+x2)/2+4, mid
		}
		d.Lines = append(d.Lines, ln)
	}
	return d
}

func vsShape(c *chart, id string) shape {
	for _, v := range c.vertices {
		if v.id == id {
			return v.shape
		}
	}
	return box
}
