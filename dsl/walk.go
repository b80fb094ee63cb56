package dsl

// Walk calls fn for every node of p and of every pipeline it reaches
// through call nodes and pipeline tools, each pipeline once, with the
// pipeline the node belongs to.
func Walk(p *Pipeline, fn func(*Pipeline, *Node)) {
	seen := map[*Pipeline]bool{}
	var walkP func(*Pipeline)
	var walk func(*Pipeline, Block)
	walk = func(p *Pipeline, b Block) {
		for _, n := range b {
			fn(p, n)
			for _, body := range Bodies(n) {
				walk(p, body.Body)
			}
			if c := n.Call(); c != nil {
				walkP(c.Pipeline)
			}
		}
	}
	walkP = func(p *Pipeline) {
		if p == nil || seen[p] {
			return
		}
		seen[p] = true
		for _, t := range p.Tools {
			walkP(t.Pipeline)
		}
		walk(p, p.Nodes)
	}
	walkP(p)
}
