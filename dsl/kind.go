package dsl

import (
	"encoding/json"
	"fmt"
	"sort"

	"gopkg.in/yaml.v3"
)

// KindSpec is everything the front end knows about one node kind, in one
// place: the YAML it accepts (its JSON-schema fragment and its decoder),
// the type of its output, the bodies it runs and its reference entry. The
// pipeline schema, docs/reference.md, the type checker, Walk and the graph
// drawing all read the specs; a test checks each spec against itself.
//
// A kind's executor lives in package nodes, one file per kind.
type KindSpec struct {
	Kind    Kind
	Summary string // one line: what the kind does (the schema's description of its key)
	Doc     string // the reference entry's text, Markdown
	Output  string // the output's shape, in words, for the reference
	Example string // one node of this kind, YAML, for the reference and the spec test
	// Schema is the JSON schema of the kind key's value; it may refer to
	// the shared definitions (#/$defs/expr, value, prompt, node, ...).
	Schema string

	// decode reads the kind key's value into the kind's configuration.
	decode func(d *nodeDecoder) any
	// output is the type of nodes.<id> once the node has run.
	output func(r *resolver, n *Node) *Type
	// bodies lists the blocks the node runs as part of itself, and
	// yamlBodies the same blocks before decoding (for collecting ids).
	bodies     func(cfg any) []Body
	yamlBodies func(v *yaml.Node) []*yaml.Node
}

// nodeDecoder is what a kind's decoder works with.
type nodeDecoder struct {
	f     *file
	node  *Node
	n     *yaml.Node // the node's mapping
	v     *yaml.Node // the value of its kind key
	sc    scope
	label string // `node "id"`, for messages
}

var specs = map[Kind]*KindSpec{}

// registerKind adds a kind; each kind file calls it from init.
func registerKind(s *KindSpec) {
	if _, dup := specs[s.Kind]; dup {
		panic("node kind registered twice: " + s.Kind)
	}
	var fragment map[string]any
	if err := json.Unmarshal([]byte(s.Schema), &fragment); err != nil {
		panic(fmt.Sprintf("node kind %s: schema: %v", s.Kind, err))
	}
	specs[s.Kind] = s
}

// Kinds lists every node kind with a kind key, sorted by name.
func Kinds() []*KindSpec {
	out := make([]*KindSpec, 0, len(specs))
	for _, s := range specs {
		if s.Kind != KindSet {
			out = append(out, s)
		}
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Kind < out[j].Kind })
	return out
}

// Bodies lists the blocks node n runs as part of itself: a loop or map
// body, a parallel node's branches.
func Bodies(n *Node) []Body {
	if s := specs[n.Kind]; s != nil && s.bodies != nil && n.Config != nil {
		return s.bodies(n.Config)
	}
	return nil
}

// Config is node n's configuration as its kind decoded it, or the zero
// value when n is of another kind.
func Config[T any](n *Node) T {
	c, _ := n.Config.(T)
	return c
}
