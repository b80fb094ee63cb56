package flowtest

import (
	"fmt"
	"strings"

	"github.com/flowrun/flowrun/dsl"
	"github.com/flowrun/flowrun/errclass"
	"github.com/flowrun/flowrun/runtime"
)

// Coverage is which routes of one pipeline a suite exercised: every node,
// every branch case and default, and every way each loop can end.
type Coverage struct {
	Pipeline *dsl.Pipeline
	Items    []*Item
}

// Item is one route that can be covered.
type Item struct {
	Path    string // static node path
	Pos     dsl.Pos
	What    string // "node", "case 2 (when: ...)", "default", "loop exit: until held", ...
	Covered bool
	key     string
}

// Loop exits.
const (
	exitCondition = "condition held"
	exitExhausted = "exhausted"
	exitBreak     = "break"
	exitAll       = "ran max_iterations"
)

// CoverageByFile is each file's coverage by the results of its cases, in
// the order of files.
func CoverageByFile(files []*File, results []*Result) []*Coverage {
	out := make([]*Coverage, len(files))
	for i, f := range files {
		out[i] = NewCoverage(f.Pipeline)
		for _, r := range results {
			if r.File == f {
				out[i].Add(r.Events)
			}
		}
	}
	return out
}

// NewCoverage lists the routes of p.
func NewCoverage(p *dsl.Pipeline) *Coverage {
	c := &Coverage{Pipeline: p}
	add := func(path string, pos dsl.Pos, what, key string) {
		c.Items = append(c.Items, &Item{Path: path, Pos: pos, What: what, key: path + "\x00" + key})
	}
	for _, sn := range StaticNodes(p) {
		n := sn.Node
		add(sn.Path, n.Pos, "node", "node")
		if b := n.Branch(); b != nil {
			for i, cs := range b.Cases {
				pos := n.Pos
				what := fmt.Sprintf("case %d", i+1)
				if cs.When != nil {
					pos, what = cs.When.Pos, fmt.Sprintf("case %d (when: %s)", i+1, cs.When.Src)
				}
				add(sn.Path, pos, what, fmt.Sprintf("case %d", i))
			}
			if last := len(b.Cases) - 1; last < 0 || b.Cases[last].When == nil || strings.TrimSpace(b.Cases[last].When.Src) != "true" {
				what := "default (no case held: falls through)"
				if b.Default != "" {
					what = "default (no case held: " + b.Default + ")"
				}
				add(sn.Path, n.Pos, what, "case -1")
			}
		}
		if l := n.Loop(); l != nil {
			if l.Until != nil || l.While != nil {
				cond := "until"
				if l.Until == nil {
					cond = "while"
				}
				add(sn.Path, n.Pos, "loop exit: "+cond+" condition held", "exit "+exitCondition)
				add(sn.Path, n.Pos, "loop exit: exhausted (max_iterations)", "exit "+exitExhausted)
			} else {
				add(sn.Path, n.Pos, "loop exit: ran max_iterations", "exit "+exitAll)
			}
			for _, b := range l.Body {
				if br := b.Branch(); br != nil && breaks(br) {
					add(sn.Path, n.Pos, "loop exit: break", "exit "+exitBreak)
					break
				}
			}
		}
	}
	return c
}

func breaks(b *dsl.Branch) bool {
	if b.Default == dsl.NextBreak {
		return true
	}
	for _, c := range b.Cases {
		if c.Next == dsl.NextBreak {
			return true
		}
	}
	return false
}

// Add marks what one run's events exercised.
func (c *Coverage) Add(events []runtime.Event) {
	hit := map[string]bool{}
	exhausted, broke := map[string]bool{}, map[string]bool{}
	loops := map[string]*dsl.Loop{}
	for _, sn := range StaticNodes(c.Pipeline) {
		if l := sn.Node.Loop(); l != nil {
			loops[sn.Path] = l
		}
	}
	for _, e := range events {
		static := Strip(e.Path)
		switch e.Type {
		case runtime.EventNodeStarted:
			hit[static+"\x00node"] = true
		case runtime.EventLoopExhausted:
			exhausted[e.Path] = true
		case runtime.EventNodeFailed:
			if e.Class == errclass.LoopExhausted && loops[static] != nil {
				hit[static+"\x00exit "+exitExhausted] = true
			}
		case runtime.EventNodeFinished:
			if out, ok := e.Output.(map[string]any); ok && e.Kind == string(dsl.KindBranch) {
				if i, ok := out["case"].(int); ok {
					hit[fmt.Sprintf("%s\x00case %d", static, i)] = true
				}
				if out["next"] == dsl.NextBreak {
					broke[enclosingLoop(e.Path)] = true
				}
			}
			l := loops[static]
			if l == nil {
				continue
			}
			switch {
			case exhausted[e.Path]:
				hit[static+"\x00exit "+exitExhausted] = true
			case broke[e.Path]:
				hit[static+"\x00exit "+exitBreak] = true
			case l.Until != nil || l.While != nil:
				hit[static+"\x00exit "+exitCondition] = true
			default:
				hit[static+"\x00exit "+exitAll] = true
			}
			delete(exhausted, e.Path)
			delete(broke, e.Path)
		}
	}
	for _, it := range c.Items {
		if hit[it.key] {
			it.Covered = true
		}
	}
}

// enclosingLoop is the run path of the loop whose iteration a node ran
// in: "a/refine[2]/route" gives "a/refine".
func enclosingLoop(path string) string {
	i := strings.LastIndex(path, "/")
	if i < 0 {
		return ""
	}
	parent := path[:i]
	if j := strings.LastIndex(parent, "["); j >= 0 && strings.HasSuffix(parent, "]") {
		return parent[:j]
	}
	return parent
}

// Counts returns how many items are covered, of how many.
func (c *Coverage) Counts() (covered, total int) {
	for _, it := range c.Items {
		if it.Covered {
			covered++
		}
	}
	return covered, len(c.Items)
}

// String is the report: a summary line and each route no case took.
func (c *Coverage) String() string {
	covered, total := c.Counts()
	var b strings.Builder
	pct := 100.0
	if total > 0 {
		pct = 100 * float64(covered) / float64(total)
	}
	fmt.Fprintf(&b, "%s: %d/%d routes covered (%.1f%%)\n", c.Pipeline.Path, covered, total, pct)
	for _, it := range c.Items {
		if !it.Covered {
			fmt.Fprintf(&b, "  not covered: %s: %s %s\n", it.Pos, it.Path, it.What)
		}
	}
	return b.String()
}
