package dsl

import (
	"gopkg.in/yaml.v3"
)

// KindMap is the map node kind.
const KindMap Kind = "map"

func init() {
	registerKind(&KindSpec{
		Kind:    KindMap,
		Summary: "Run a body once per element of a list.",
		Doc:     "Runs `body` once per element of the list `over`, at most `max_concurrency` items at a time (8 by default). Each item runs in a scope of its own, with `item` and `index` defined; its state writes are kept only for variables that declare a `merge:`, joined in item order. An item's result is `result:` (an expression in the item's scope) or else the output of its last node. `on_item_error: skip` records a failed item and goes on.",
		Output:  "the items' results, in input order.",
		Example: `- id: per_word
  map:
    over: split(inputs.text, " ")
    max_concurrency: 4
    result: '{"word": item, "length": len(item)}'
    body:
      - id: shout
        llm: {prompt: "Shout ${{ item }}"}`,
		Schema: `{
  "description": "Run \u0060body\u0060 once per element of \u0060over\u0060; results keep input order.",
  "type": "object",
  "additionalProperties": false,
  "required": [
    "over",
    "body"
  ],
  "properties": {
    "over": {
      "$ref": "#/$defs/expr",
      "description": "Expression giving the list to iterate; each element is \u0060item\u0060, its position \u0060index\u0060."
    },
    "max_concurrency": {
      "description": "Most elements processed at once.",
      "type": "integer",
      "minimum": 1
    },
    "on_item_error": {
      "description": "What to do when an element fails: \u0060fail\u0060 the node or \u0060skip\u0060 the element.",
      "type": "string",
      "enum": [
        "fail",
        "skip"
      ]
    },
    "result": {
      "$ref": "#/$defs/expr",
      "description": "Expression computing each element's result from the body's node outputs."
    },
    "body": {
      "description": "Nodes run for each element.",
      "type": "array",
      "minItems": 1,
      "items": {
        "$ref": "#/$defs/node"
      }
    }
  }
}`,
		decode:     func(d *nodeDecoder) any { return d.f.mapNode(d.v, d.sc) },
		output:     mapOutput,
		bodies:     func(c any) []Body { return []Body{{Body: c.(*Map).Body}} },
		yamlBodies: func(v *yaml.Node) []*yaml.Node { return []*yaml.Node{valueOf(v, "body")} },
	})
}

// Map runs Body once per element of Over.
type Map struct {
	Over           *Expr
	MaxConcurrency int
	OnItemError    OnItemError
	Result         *Expr
	Body           Block
}

// OnItemError is what a map does when one of its items fails.
type OnItemError string

const (
	ItemErrorFail OnItemError = "fail" // fail the map node (the default)
	ItemErrorSkip OnItemError = "skip" // record a map_item_skipped event; the item's result is null
)

// Map is the configuration of a map node; nil for a node of another kind.
func (n *Node) Map() *Map { return Config[*Map](n) }

func mapOutput(r *resolver, n *Node) *Type {
	m := n.Map()
	if m.Result != nil {
		return ListOf(r.exprType(m.Result))
	}
	return ListOf(r.lastOutput(m.Body))
}

func (f *file) mapNode(v *yaml.Node, sc scope) *Map {
	m := &Map{OnItemError: ItemErrorFail}
	if o := valueOf(v, "over"); o != nil {
		m.Over = f.bare(o, sc, false, "over")
	}
	m.MaxConcurrency, _ = intValue(valueOf(v, "max_concurrency"))
	// The schema has rejected any other value.
	if s, _ := str(valueOf(v, "on_item_error")); OnItemError(s) == ItemErrorSkip {
		m.OnItemError = ItemErrorSkip
	}
	// A map item is its own scope: break and continue cannot leave it.
	inner := scope{inMap: true, loopVars: sc.loopVars, node: sc.node, mapNode: sc.node}
	if r := valueOf(v, "result"); r != nil {
		m.Result = f.bare(r, inner, false, "result")
	}
	m.Body = f.block(valueOf(v, "body"), inner)
	return m
}
