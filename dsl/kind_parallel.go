package dsl

import (
	"gopkg.in/yaml.v3"
)

// KindParallel is the parallel node kind.
const KindParallel Kind = "parallel"

func init() {
	registerKind(&KindSpec{
		Kind:    KindParallel,
		Summary: "Run named branches concurrently and join them.",
		Doc:     "Runs its named `branches` concurrently and waits for all of them. Each branch runs in a scope of its own that starts from the state as it was; after the join, the branches' state writes apply in declaration order (a variable written by two branches must declare a `merge:`). A branch's result is `result:` (an expression in the branch's scope) or else the output of its last node. Branches cannot read each other's nodes.",
		Output:  "`{branch name: result}`.",
		Example: `- id: both
  parallel:
    branches:
      transform:
        - id: write_transform
          llm: {prompt: "Write transform()."}
      validate:
        - id: write_validate
          llm: {prompt: "Write validate()."}`,
		Schema: `{
  "description": "Run named branches concurrently and wait for all of them.",
  "type": "object",
  "additionalProperties": false,
  "required": [
    "branches"
  ],
  "properties": {
    "branches": {
      "description": "Branch name -> nodes run in that branch.",
      "type": "object",
      "minProperties": 1,
      "additionalProperties": {
        "type": "array",
        "minItems": 1,
        "items": {
          "$ref": "#/$defs/node"
        }
      }
    },
    "result": {
      "$ref": "#/$defs/expr",
      "description": "Expression computing each branch's result from its node outputs."
    },
    "max_concurrency": {
      "description": "Most branches running at once.",
      "type": "integer",
      "minimum": 1
    }
  }
}`,
		decode: func(d *nodeDecoder) any { return d.f.parallel(d.v, d.sc) },
		output: parallelOutput,
		bodies: func(c any) []Body {
			p := c.(*Parallel)
			out := make([]Body, len(p.Branches))
			for i, br := range p.Branches {
				out[i] = Body{Name: br.Name, Body: br.Body}
			}
			return out
		},
		yamlBodies: func(v *yaml.Node) []*yaml.Node {
			var out []*yaml.Node
			for _, kv := range pairs(valueOf(v, "branches")) {
				out = append(out, kv[1])
			}
			return out
		},
	})
}

// Parallel runs named branches concurrently and joins them.
type Parallel struct {
	Branches       []*ParallelBranch // in declaration order
	Result         *Expr
	MaxConcurrency int
}

// ParallelBranch is one named branch of a parallel node.
type ParallelBranch struct {
	Name string
	Body Block
}

// Parallel is the configuration of a parallel node; nil for a node of another kind.
func (n *Node) Parallel() *Parallel { return Config[*Parallel](n) }

func parallelOutput(r *resolver, n *Node) *Type {
	p := n.Parallel()
	fields := map[string]*Type{}
	for _, br := range p.Branches {
		if p.Result != nil {
			fields[br.Name] = r.exprType(p.Result)
		} else {
			fields[br.Name] = r.lastOutput(br.Body)
		}
	}
	return Object(fields)
}

func (f *file) parallel(v *yaml.Node, sc scope) *Parallel {
	p := &Parallel{}
	p.MaxConcurrency, _ = intValue(valueOf(v, "max_concurrency"))
	inner := scope{inMap: sc.inMap, loopVars: sc.loopVars, node: sc.node, mapNode: sc.mapNode}
	if r := valueOf(v, "result"); r != nil {
		p.Result = f.bare(r, inner, false, "result")
	}
	for _, kv := range pairs(valueOf(v, "branches")) {
		p.Branches = append(p.Branches, &ParallelBranch{Name: kv[0].Value, Body: f.block(kv[1], inner)})
	}
	return p
}
