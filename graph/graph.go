// Package graph draws a compiled pipeline as a Mermaid flowchart or a
// Graphviz dot graph. Loops, maps and parallel nodes become clusters,
// branches become decisions with one labelled edge per case, and next:
// jumps, break, continue and on_error routes become edges.
package graph

import (
	"fmt"
	"strings"

	"github.com/flowrun/flowrun/dsl"
)

type shape int

const (
	box shape = iota
	decision
	loopHead
	fork
	join
	terminal
)

type vertex struct {
	id, label string
	shape     shape
	// call: a call node, drawn with the nodes of the pipeline it calls
	// when open.
	call, open bool
}

type edge struct {
	from, to, label string
	dashed          bool
}

type cluster struct {
	id, label string
	vertices  []string
	children  []*cluster
}

// chart is the drawing-independent form both renderers read.
type chart struct {
	vertices []vertex
	edges    []edge
	root     cluster
	// open holds the ids of the call nodes drawn with the nodes of the
	// pipelines they call; prefix is the id of the one being drawn, with
	// a slash, and end where its pipeline's end leads.
	open   map[string]bool
	prefix string
	end    string
}

const (
	startID    = "__start"
	endID      = "__end"
	joinSuffix = "__join"
)

// StartID and EndID are the ids of a drawing's start and end boxes.
const (
	StartID = startID
	EndID   = endID
)

// ForkOf says which map or parallel node the box with id joins the
// bodies of; ok is false for any other box.
func ForkOf(id string) (node string, ok bool) { return strings.CutSuffix(id, joinSuffix) }

func build(p *dsl.Pipeline, open map[string]bool) *chart {
	c := &chart{open: open, end: endID}
	c.root.vertices = []string{startID, endID}
	c.vertices = append(c.vertices, vertex{id: startID, label: "start", shape: terminal}, vertex{id: endID, label: "end", shape: terminal})
	entry := c.block(&c.root, p.Nodes, endID, "", "")
	c.edges = append(c.edges, edge{from: startID, to: entry})
	return c
}

func (c *chart) add(cl *cluster, v vertex) {
	c.vertices = append(c.vertices, v)
	cl.vertices = append(cl.vertices, v.id)
}

func (c *chart) link(from, to, label string, dashed bool) {
	c.edges = append(c.edges, edge{from, to, label, dashed})
}

// block draws sibling nodes; succ is where the block goes when it ends,
// head and exit are the enclosing loop's head and successor.
func (c *chart) block(cl *cluster, b dsl.Block, succ, head, exit string) string {
	if len(b) == 0 {
		return succ
	}
	id := func(node string) string { return c.prefix + node }
	after := func(i int) string {
		if i+1 < len(b) {
			return id(b[i+1].ID)
		}
		return succ
	}
	for i, n := range b {
		resolve := func(t string) string {
			switch t {
			case "":
				return after(i)
			case dsl.NextEnd:
				return c.end
			case dsl.NextBreak:
				return exit
			case dsl.NextContinue:
				return head
			}
			return id(t)
		}
		switch {
		case n.Branch() != nil:
			c.add(cl, vertex{id: id(n.ID), label: n.ID, shape: decision})
			for _, k := range n.Branch().Cases {
				label := ""
				if k.When != nil {
					label = short(k.When.Src)
				}
				c.link(id(n.ID), resolve(k.Next), label, false)
			}
			c.link(id(n.ID), resolve(n.Branch().Default), "default", false)
		case n.Loop() != nil:
			sub := &cluster{id: "cluster_" + id(n.ID), label: "loop " + n.ID}
			cl.children = append(cl.children, sub)
			c.add(sub, vertex{id: id(n.ID), label: loopLabel(n), shape: loopHead})
			entry := c.block(sub, n.Loop().Body, n.ID, n.ID, resolve(n.Next))
			c.link(id(n.ID), entry, "iterate", false)
			c.link(id(n.ID), resolve(n.Next), "done", false)
		case len(dsl.Bodies(n)) > 0:
			// Any other node that runs bodies (map, parallel) fans out to
			// them and joins.
			sub := &cluster{id: "cluster_" + id(n.ID), label: string(n.Kind) + " " + n.ID}
			cl.children = append(cl.children, sub)
			c.add(sub, vertex{id: id(n.ID), label: forkLabel(n), shape: fork})
			joinID := id(n.ID) + joinSuffix
			c.add(sub, vertex{id: joinID, label: "join", shape: join})
			for _, body := range dsl.Bodies(n) {
				bc, label := sub, "each item"
				if body.Name != "" {
					bc, label = &cluster{id: "cluster_" + id(n.ID) + "_" + body.Name, label: body.Name}, body.Name
					sub.children = append(sub.children, bc)
				}
				c.link(id(n.ID), c.block(bc, body.Body, joinID, "", ""), label, false)
			}
			c.link(joinID, resolve(n.Next), "", false)
		case n.Call() != nil && n.Call().Pipeline != nil && c.open[id(n.ID)]:
			sub := &cluster{id: "cluster_" + id(n.ID), label: "call " + n.Call().Path}
			cl.children = append(cl.children, sub)
			c.add(sub, vertex{id: id(n.ID), label: nodeLabel(n), shape: box, call: true, open: true})
			next := resolve(n.Next)
			prefix, end := c.prefix, c.end
			c.prefix, c.end = id(n.ID)+"/", next
			entry := c.block(sub, n.Call().Pipeline.Nodes, next, "", "")
			c.prefix, c.end = prefix, end
			c.link(id(n.ID), entry, "calls", false)
		default:
			c.add(cl, vertex{id: id(n.ID), label: nodeLabel(n), shape: box, call: n.Call() != nil})
			c.link(id(n.ID), resolve(n.Next), "", false)
			if n.When != nil && n.Next != "" {
				c.link(id(n.ID), after(i), "skipped", true)
			}
		}
		if n.OnError.Handled() {
			t := resolve(n.OnError.Target())
			if n.OnError == dsl.OnErrorContinue {
				t = after(i)
			}
			c.link(id(n.ID), t, "on_error", true)
		}
	}
	return id(b[0].ID)
}

func nodeLabel(n *dsl.Node) string {
	label := fmt.Sprintf("%s (%s)", n.ID, n.Kind)
	if n.Call() != nil {
		label = fmt.Sprintf("%s (call %s)", n.ID, n.Call().Path)
	}
	if a := n.Agent(); a != nil {
		// What an agent can do is its tools, as much as its prompt.
		if len(a.Tools) > 0 {
			label += "\ntools: " + strings.Join(a.Tools, ", ")
		}
		if len(a.Finish) > 0 {
			label += "\nfinish: " + strings.Join(a.Finish, ", ")
		}
	}
	if n.When != nil {
		label += "\nwhen " + short(n.When.Src)
	}
	return label
}

func forkLabel(n *dsl.Node) string {
	if m := n.Map(); m != nil {
		return fmt.Sprintf("map %s over %s", n.ID, short(m.Over.Src))
	}
	return string(n.Kind) + " " + n.ID
}

func loopLabel(n *dsl.Node) string {
	l := n.Loop()
	most := fmt.Sprint(l.MaxIterations)
	if l.MaxExpr != nil {
		most = short(l.MaxExpr.Src)
	}
	label := fmt.Sprintf("loop %s, at most %s", n.ID, most)
	switch {
	case l.Until != nil:
		label += "\nuntil " + short(l.Until.Src)
	case l.While != nil:
		label += "\nwhile " + short(l.While.Src)
	}
	return label
}

func short(s string) string {
	s = strings.Join(strings.Fields(s), " ")
	if len(s) > 40 {
		s = s[:37] + "..."
	}
	return s
}

// Mermaid renders p as a Mermaid flowchart.
func Mermaid(p *dsl.Pipeline) string {
	c := build(p, nil)
	var b strings.Builder
	b.WriteString("flowchart TD\n")
	shapes := map[string]vertex{}
	for _, v := range c.vertices {
		shapes[v.id] = v
	}
	var walk func(cl *cluster, indent string)
	walk = func(cl *cluster, indent string) {
		for _, id := range cl.vertices {
			v := shapes[id]
			fmt.Fprintf(&b, "%s%s%s\n", indent, mermaidID(id), mermaidShape(v))
		}
		for _, ch := range cl.children {
			fmt.Fprintf(&b, "%ssubgraph %s[%q]\n", indent, mermaidID(ch.id), ch.label)
			walk(ch, indent+"  ")
			fmt.Fprintf(&b, "%send\n", indent)
		}
	}
	walk(&c.root, "  ")
	for _, e := range c.edges {
		arrow := "-->"
		if e.dashed {
			arrow = "-.->"
		}
		if e.label != "" {
			fmt.Fprintf(&b, "  %s %s|%s| %s\n", mermaidID(e.from), arrow, mermaidText(e.label), mermaidID(e.to))
		} else {
			fmt.Fprintf(&b, "  %s %s %s\n", mermaidID(e.from), arrow, mermaidID(e.to))
		}
	}
	return b.String()
}

func mermaidID(id string) string { return "n_" + id }

// mermaidText quotes a label; Mermaid has no escape for '"', so it
// becomes an HTML entity.
func mermaidText(s string) string {
	return `"` + strings.ReplaceAll(strings.ReplaceAll(s, `"`, "#quot;"), "\n", "<br/>") + `"`
}

func mermaidShape(v vertex) string {
	t := mermaidText(v.label)
	switch v.shape {
	case decision:
		return "{" + t + "}"
	case loopHead:
		return "{{" + t + "}}"
	case fork:
		return "[/" + t + "/]"
	case join:
		return "((" + t + "))"
	case terminal:
		return "([" + t + "])"
	}
	return "[" + t + "]"
}

// Dot renders p as a Graphviz digraph.
func Dot(p *dsl.Pipeline) string {
	c := build(p, nil)
	var b strings.Builder
	fmt.Fprintf(&b, "digraph %q {\n  rankdir=TB;\n  node [fontname=\"Helvetica\"];\n", p.Name)
	shapes := map[string]vertex{}
	for _, v := range c.vertices {
		shapes[v.id] = v
	}
	var walk func(cl *cluster, indent string)
	walk = func(cl *cluster, indent string) {
		for _, id := range cl.vertices {
			v := shapes[id]
			fmt.Fprintf(&b, "%s%q [label=%q, shape=%s];\n", indent, id, v.label, dotShape(v.shape))
		}
		for _, ch := range cl.children {
			fmt.Fprintf(&b, "%ssubgraph %q {\n%s  label=%q;\n", indent, ch.id, indent, ch.label)
			walk(ch, indent+"  ")
			fmt.Fprintf(&b, "%s}\n", indent)
		}
	}
	walk(&c.root, "  ")
	for _, e := range c.edges {
		var attrs []string
		if e.label != "" {
			attrs = append(attrs, fmt.Sprintf("label=%q", e.label))
		}
		if e.dashed {
			attrs = append(attrs, "style=dashed")
		}
		if len(attrs) > 0 {
			fmt.Fprintf(&b, "  %q -> %q [%s];\n", e.from, e.to, strings.Join(attrs, ", "))
		} else {
			fmt.Fprintf(&b, "  %q -> %q;\n", e.from, e.to)
		}
	}
	b.WriteString("}\n")
	return b.String()
}

func dotShape(s shape) string {
	switch s {
	case decision:
		return "diamond"
	case loopHead:
		return "hexagon"
	case fork:
		return "trapezium"
	case join:
		return "circle"
	case terminal:
		return "oval"
	}
	return "box"
}
