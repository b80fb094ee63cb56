package graph

import (
	"fmt"
	"sort"
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
	// Call: the box is a call node's; Open: drawn with the nodes of the
	// pipeline it calls (see LayoutOpen).
	Call, Open bool
}

// Line is one edge as an SVG path of straight segments, from the box
// with ID From to the box with ID To; Back says it returns to an earlier
// layer (a loop's iteration or a jump back).
type Line struct {
	From, To     string
	Path         string
	Label        string
	LabelX       int
	LabelY       int
	Dashed, Back bool
}

// LineHeight is the spacing of a box's lines of text, in pixels.
const LineHeight = 16

// lineChars is the most characters a line of a box holds: 260 pixels of
// text (10 of padding a side) at up to 6.2 a character of the UI's 12 px
// font. A longer line is wrapped at a space; a word too long is cut.
const lineChars = 40

const (
	boxW   = 280
	gapX   = 40
	gapY   = 56
	margin = 24
)

var kindNames = map[shape]string{box: "box", decision: "decision", loopHead: "loop", fork: "fork", join: "join", terminal: "terminal"}

// wrap breaks a line of a box's label into lines of at most lineChars,
// at spaces: a map's "map ID over EXPR" outgrew its box.
func wrap(line string) []string {
	var out []string
	cur := ""
	for _, w := range strings.Fields(line) {
		if r := []rune(w); len(r) > lineChars {
			w = string(r[:lineChars-3]) + "..."
		}
		switch {
		case cur == "":
			cur = w
		case len(cur)+1+len(w) <= lineChars:
			cur += " " + w
		default:
			out = append(out, cur)
			cur = w
		}
	}
	return append(out, cur)
}

// Layout lays p out: each vertex on the layer after the deepest vertex
// that leads to it by a forward edge, vertices of a layer in the order
// a depth-first walk from start meets them.
func Layout(p *dsl.Pipeline) *Drawing { return LayoutOpen(p, nil) }

// LayoutOpen lays p out as Layout does, with the call nodes whose ids
// open holds drawn with the nodes of the pipelines they call, whose box
// ids are the call node's id, a slash and their own (their paths in a
// run, loop iterations aside).
func LayoutOpen(p *dsl.Pipeline, open map[string]bool) *Drawing {
	c := build(p, open)
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
	return place(c, layers, vs, rank, back)
}

// A route is one edge on its way: out of its source's bottom, along a
// horizontal track in the gap below the source's layer; an edge to the
// next layer goes straight down from there into its target's top, and
// any other edge runs down a lane of its own (on the left going down, on
// the right going back up) to a track in the gap above its target's
// layer. Tracks lie between layers and lanes beside every box, so that
// no line crosses a box it does not connect. A loop's done edge is the
// exception: going down from its head it would run beside the iterate
// edge and read as entering the body, so it leaves the head's left side
// for its lane, its label in the room left between the lanes and the boxes.
type route struct {
	e             edge
	back          bool
	side          bool // a loop's done edge, out of its head's left side
	fromR, toR    int  // the layers of its source and target
	sx, tx        int  // where it leaves its source and enters its target
	track, track2 int  // its track in the gap below fromR, and above toR
	lane          int  // its lane (-1: none)
	labelRow      int  // the row of its label in the gap below fromR
}

const (
	laneGap  = 12 // between lanes
	trackGap = 7  // between tracks in a gap
	labelRow = 14 // between rows of labels in a gap: a 10px label's box is 12 to 13 high
	// labelChar is the width of a character of an edge label, a little
	// over that of the 10px sans-serif the web UI draws them in.
	labelChar = 6
)

// place gives the boxes their positions and routes the edges.
func place(c *chart, layers [][]string, vs map[string]vertex, rank map[string]int, back map[[2]string]bool) *Drawing {
	var routes []*route
	outs, ins := map[string][]*route{}, map[string][]*route{}
	left, right := 0, 0
	labels := make([]int, len(layers)) // labelled edges leaving each layer
	tracks := make([]int, len(layers)) // tracks in the gap below each layer
	sideLabel := 0                     // the widest label of an edge out of a side
	for _, e := range c.edges {
		if _, ok := vs[e.from]; !ok {
			continue
		}
		if _, ok := vs[e.to]; !ok {
			continue
		}
		r := &route{e: e, back: back[[2]string{e.from, e.to}], fromR: rank[e.from], toR: rank[e.to], lane: -1}
		// Only the leftmost box of its layer can leave by its left side
		// without crossing another box.
		r.side = e.label == "done" && vs[e.from].shape == loopHead && !r.back && r.toR > r.fromR+1 && layers[r.fromR][0] == e.from
		switch {
		case r.back || r.toR <= r.fromR:
			r.back, r.lane = true, right
			right++
		case r.toR > r.fromR+1:
			r.lane = left
			left++
		}
		switch {
		case r.side:
			sideLabel = max(sideLabel, labelChar*len(e.label)+6)
		case e.label != "":
			r.labelRow = labels[r.fromR]
			labels[r.fromR]++
		}
		if !r.side {
			r.track = tracks[r.fromR]
			tracks[r.fromR]++
			outs[e.from] = append(outs[e.from], r)
		}
		if r.lane >= 0 && r.toR > 0 {
			r.track2 = tracks[r.toR-1]
			tracks[r.toR-1]++
		}
		routes = append(routes, r)
		ins[e.to] = append(ins[e.to], r)
	}

	d := &Drawing{}
	widest := 0
	for _, l := range layers {
		widest = max(widest, len(l))
	}
	boxesLeft := margin + left*laneGap + sideLabel
	span := widest*boxW + (widest-1)*gapX
	boxesRight := boxesLeft + span
	gapBelow := make([]int, len(layers))
	for i := range layers {
		gapBelow[i] = max(gapY, 10+labels[i]*labelRow+tracks[i]*trackGap+10)
	}
	top := make([]int, len(layers))
	bottom := make([]int, len(layers))
	y := margin
	for i, l := range layers {
		top[i] = y
		tallest := 0
		x := boxesLeft + (span-(len(l)*boxW+(len(l)-1)*gapX))/2
		for _, id := range l {
			v := vs[id]
			var lines []string
			for _, l := range strings.Split(v.label, "\n") {
				lines = append(lines, wrap(l)...)
			}
			b := Box{ID: id, Kind: kindNames[v.shape], Lines: lines, X: x, Y: y, W: boxW, H: 12 + LineHeight*len(lines), Call: v.call, Open: v.open}
			d.Boxes = append(d.Boxes, b)
			tallest = max(tallest, b.H)
			x += boxW + gapX
		}
		bottom[i] = y + tallest
		y = bottom[i] + gapBelow[i]
	}
	d.Height = y - gapBelow[len(layers)-1] + margin
	boxes := map[string]*Box{}
	for i := range d.Boxes {
		boxes[d.Boxes[i].ID] = &d.Boxes[i]
	}
	// Several edges out of (or into) one box leave (enter) it at points
	// spread along its side, in the order of the boxes at their other ends.
	spread := func(b *Box, rs []*route, at func(*route) *int, other func(*route) string) {
		sort.SliceStable(rs, func(i, j int) bool { return boxes[other(rs[i])].X < boxes[other(rs[j])].X })
		for i, r := range rs {
			*at(r) = b.X + b.W*(i+1)/(len(rs)+1)
		}
	}
	for id, rs := range outs {
		spread(boxes[id], rs, func(r *route) *int { return &r.sx }, func(r *route) string { return r.e.to })
	}
	for id, rs := range ins {
		spread(boxes[id], rs, func(r *route) *int { return &r.tx }, func(r *route) string { return r.e.from })
	}
	trackY := func(layer, track int) int {
		return bottom[layer] + 10 + labels[layer]*labelRow + track*trackGap
	}
	d.Width = boxesRight + margin
	if right > 0 {
		d.Width = boxesRight + gapX/2 + right*laneGap + margin
	}
	for _, r := range routes {
		a, b := boxes[r.e.from], boxes[r.e.to]
		ln := Line{From: r.e.from, To: r.e.to, Label: r.e.label, Dashed: r.e.dashed, Back: r.back}
		y1 := trackY(r.fromR, r.track)
		pts := [][2]int{{r.sx, a.Y + a.H}, {r.sx, y1}}
		if r.side {
			y1 = a.Y + a.H/2
			pts = [][2]int{{a.X, y1}}
		}
		if r.lane >= 0 {
			laneX := margin + (left-1-r.lane)*laneGap
			if r.back {
				laneX = boxesRight + gapX/2 + r.lane*laneGap
			}
			y2 := margin / 2 // above the first layer
			if r.toR > 0 {
				y2 = trackY(r.toR-1, r.track2)
			}
			pts = append(pts, [2]int{laneX, y1}, [2]int{laneX, y2}, [2]int{r.tx, y2})
		} else {
			pts = append(pts, [2]int{r.tx, y1})
		}
		pts = append(pts, [2]int{r.tx, b.Y})
		var path strings.Builder
		for i, p := range pts {
			cmd := "L"
			if i == 0 {
				cmd = "M"
			}
			fmt.Fprintf(&path, "%s%d,%d ", cmd, p[0], p[1])
		}
		ln.Path = strings.TrimSpace(path.String())
		switch {
		case r.side:
			ln.LabelX, ln.LabelY = boxesLeft-sideLabel+3, y1-3
		case ln.Label != "":
			ln.LabelX, ln.LabelY = r.sx+3, bottom[r.fromR]+10+r.labelRow*labelRow
			// A label runs right from its edge: keep it inside the drawing.
			d.Width = max(d.Width, ln.LabelX+labelChar*len(ln.Label)+margin)
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
