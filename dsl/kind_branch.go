package dsl

import (
	"gopkg.in/yaml.v3"
)

// KindBranch is the branch node kind.
const KindBranch Kind = "branch"

func init() {
	registerKind(&KindSpec{
		Kind:    KindBranch,
		Summary: "Cases tried in order; the first whose `when` holds wins and jumps to its `next`.",
		Doc:     "Cases are tried in order; the first whose `when` holds wins: its `set:` is applied and the run goes to its `next` (a later sibling, `end`, `break` or `continue`). The node's own `default:` says where to go when no case holds; without one the run falls through to the next node.",
		Output:  "`{case, next}`: the index of the case that held (-1 for none) and where the run went.",
		Example: `- id: route
  branch:
    - when: state.score >= 1.0
      next: end
    - when: loop.iteration >= 3
      set: {note: '"gave up"'}
      next: break
  default: revise`,
		Schema: `{
  "type": "array",
  "minItems": 1,
  "items": {
    "description": "One branch case: if \u0060when\u0060 holds, apply \u0060set\u0060 and go to \u0060next\u0060.",
    "type": "object",
    "additionalProperties": false,
    "required": [
      "when",
      "next"
    ],
    "properties": {
      "when": {
        "$ref": "#/$defs/expr",
        "description": "Condition of this case; the first case that holds wins."
      },
      "set": {
        "$ref": "#/$defs/set",
        "description": "State updates applied when this case wins."
      },
      "next": {
        "description": "Where to go when this case wins: a later sibling id, \u0060end\u0060, \u0060break\u0060 or \u0060continue\u0060.",
        "type": "string"
      }
    }
  }
}`,
		decode: func(d *nodeDecoder) any { return d.f.branch(d.label, d.n, d.v, d.sc) },
		output: func(*resolver, *Node) *Type { return branchOutput },
	})
}

// Branch is a list of cases; the first whose When holds wins.
type Branch struct {
	Cases   []*Case
	Default string // where to go when no case holds; "" falls through
}

// Case is one branch case.
type Case struct {
	When *Expr
	Set  []*Assign
	Next string
}

// Branch is the configuration of a branch node; nil for a node of another kind.
func (n *Node) Branch() *Branch { return Config[*Branch](n) }

var branchOutput = Object(map[string]*Type{"case": IntType, "next": StringType})

func (f *file) branch(label string, n, v *yaml.Node, sc scope) *Branch {
	b := &Branch{}
	b.Default, _ = str(valueOf(n, "default"))
	for _, c := range items(v) {
		bc := &Case{}
		if w := valueOf(c, "when"); w != nil {
			bc.When = f.condition(w, sc, "when")
		}
		bc.Set = f.assigns(label, valueOf(c, "set"), sc)
		bc.Next, _ = str(valueOf(c, "next"))
		b.Cases = append(b.Cases, bc)
	}
	return b
}
