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
			switch {
			case n.Loop != nil:
				walk(p, n.Loop.Body)
			case n.Map != nil:
				walk(p, n.Map.Body)
			case n.Parallel != nil:
				for _, br := range n.Parallel.Branches {
					walk(p, br.Body)
				}
			case n.Call != nil && n.Call.Pipeline != nil:
				walkP(n.Call.Pipeline)
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
