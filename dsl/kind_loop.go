package dsl

import (
	"gopkg.in/yaml.v3"
)

// KindLoop is the loop node kind.
const KindLoop Kind = "loop"

func init() {
	registerKind(&KindSpec{
		Kind:    KindLoop,
		Summary: "Run a body repeatedly, at most `max_iterations` times.",
		Doc:     "Runs `body` again and again, at most `max_iterations` times: `until` is checked after each iteration, `while` before each. A loop with neither runs `max_iterations` times. When the bound is reached and the condition still asks for more, `on_exhausted` decides: `continue` (a `loop_exhausted` event is recorded) or `fail`. The body shares the enclosing scope: its nodes' outputs stay readable after the loop. Inside, `loop.iteration` (from 1), `loop.index` (from 0) and `loop.max` are defined.",
		Output:  "the outputs of the body's nodes in the last iteration, by id.",
		Example: `- id: refine
  loop:
    max_iterations: 3
    until: state.score >= 1.0
    body:
      - id: draft
        llm: {prompt: "Round ${{ loop.iteration }}: improve the draft."}
      - id: grade
        set: {score: 'len(nodes.draft.text) > 100 ? 1.0 : 0.5'}`,
		Schema: `{
  "description": "Run \u0060body\u0060 repeatedly until \u0060until\u0060 holds or while \u0060while\u0060 holds, at most \u0060max_iterations\u0060 times.",
  "type": "object",
  "additionalProperties": false,
  "required": [
    "max_iterations",
    "body"
  ],
  "properties": {
    "max_iterations": {
      "description": "Stop the loop after this many iterations even if \u0060until\u0060 never holds: a number, or an expression evaluated once when the loop starts (an integer of at least 1).",
      "type": [
        "integer",
        "string"
      ],
      "minimum": 1
    },
    "until": {
      "$ref": "#/$defs/expr",
      "description": "Stop after an iteration once this expression is true."
    },
    "while": {
      "$ref": "#/$defs/expr",
      "description": "Run an iteration only while this expression is true."
    },
    "on_exhausted": {
      "description": "What to do when \u0060until\u0060/\u0060while\u0060 still asks for more at \u0060max_iterations\u0060: \u0060continue\u0060 (default) or \u0060fail\u0060.",
      "type": "string",
      "enum": [
        "continue",
        "fail"
      ]
    },
    "body": {
      "description": "Nodes run in each iteration.",
      "type": "array",
      "minItems": 1,
      "items": {
        "$ref": "#/$defs/node"
      }
    }
  }
}`,
		decode:     func(d *nodeDecoder) any { return d.f.loop(d.v, d.sc) },
		output:     loopOutput,
		bodies:     func(c any) []Body { return []Body{{Body: c.(*Loop).Body}} },
		yamlBodies: func(v *yaml.Node) []*yaml.Node { return []*yaml.Node{valueOf(v, "body")} },
	})
}

// Loop runs Body until Until holds or while While holds, at most MaxIterations times.
type Loop struct {
	MaxIterations int   // the bound, when the file gives a number
	MaxExpr       *Expr // the bound, when the file gives an expression
	Until         *Expr
	While         *Expr
	OnExhausted   OnExhausted
	Body          Block
}

// OnExhausted is what a loop does when it reaches max_iterations while
// until or while still asks for more.
type OnExhausted string

const (
	ExhaustedContinue OnExhausted = "continue" // record a loop_exhausted event and go on (the default)
	ExhaustedFail     OnExhausted = "fail"     // fail the node with the class loop_exhausted
)

// Loop is the configuration of a loop node; nil for a node of another kind.
func (n *Node) Loop() *Loop { return Config[*Loop](n) }

func loopOutput(r *resolver, n *Node) *Type {
	fields := map[string]*Type{}
	for _, b := range n.Loop().Body {
		fields[b.ID] = r.output(b)
	}
	return Object(fields)
}

func (f *file) loop(v *yaml.Node, sc scope) *Loop {
	l := &Loop{OnExhausted: ExhaustedContinue}
	if mi := valueOf(v, "max_iterations"); mi != nil {
		if _, isText := str(mi); isText {
			l.MaxExpr = f.bare(mi, sc, false, "max_iterations")
		} else {
			l.MaxIterations, _ = intValue(mi)
		}
	}
	inner := scope{inLoop: true, loopVars: true, inMap: sc.inMap, node: sc.node, mapNode: sc.mapNode}
	if u := valueOf(v, "until"); u != nil {
		l.Until = f.condition(u, inner, "until")
	}
	if w := valueOf(v, "while"); w != nil {
		l.While = f.condition(w, inner, "while")
	}
	if l.Until != nil && l.While != nil {
		k, _ := get(v, "while")
		f.l.errorf(f.pos(k), "a loop has until or while, not both: keep one")
	}
	// The schema has rejected any other value.
	if s, _ := str(valueOf(v, "on_exhausted")); OnExhausted(s) == ExhaustedFail {
		l.OnExhausted = ExhaustedFail
	}
	l.Body = f.block(valueOf(v, "body"), inner)
	return l
}
