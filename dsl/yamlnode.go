package dsl

import (
	"fmt"
	"net/url"
	"strconv"
	"strings"

	"gopkg.in/yaml.v3"
)

// Reading yaml.v3 nodes: the plain values the JSON-schema check sees, with
// the node each JSON pointer came from, and the helpers the decode phase
// reads mappings, lists and scalars with (following aliases).

// maxValues bounds how many values a document may expand to, so that
// nested YAML aliases ("billion laughs") cannot exhaust memory. A pipeline
// is configuration, a few thousand values at most; at this bound a hostile
// file costs tens of milliseconds, not half a second.
const maxValues = 100_000

// pointers maps JSON pointers into the document back to YAML nodes.
type pointers struct {
	value  map[string]*yaml.Node
	key    map[string]*yaml.Node
	count  int
	tooBig bool
	// bigAlias is the outermost alias being expanded when tooBig was set:
	// the one to point at.
	bigAlias *yaml.Node
}

// toDocument converts YAML to plain Go values for the JSON-schema check,
// recording where each value came from.
func toDocument(root *yaml.Node) (any, *pointers) {
	ps := &pointers{value: map[string]*yaml.Node{}, key: map[string]*yaml.Node{}}
	v := ps.convert(root, "", 0)
	return v, ps
}

func (ps *pointers) convert(n *yaml.Node, ptr string, depth int) any {
	ps.count++
	if ps.count > maxValues || depth > 10_000 {
		ps.tooBig = true
		return nil
	}
	if _, ok := ps.value[ptr]; !ok {
		ps.value[ptr] = n
	}
	switch n.Kind {
	case yaml.AliasNode:
		if n.Alias == nil {
			return nil
		}
		v := ps.convert(n.Alias, ptr, depth+1)
		if ps.tooBig {
			ps.bigAlias = n
		}
		return v
	case yaml.DocumentNode:
		if len(n.Content) == 0 {
			return nil
		}
		return ps.convert(n.Content[0], ptr, depth+1)
	case yaml.SequenceNode:
		out := make([]any, 0, len(n.Content))
		for i, c := range n.Content {
			out = append(out, ps.convert(c, ptr+"/"+strconv.Itoa(i), depth+1))
			if ps.tooBig {
				return nil
			}
		}
		return out
	case yaml.MappingNode:
		out := make(map[string]any, len(n.Content)/2)
		for i := 0; i+1 < len(n.Content); i += 2 {
			k := n.Content[i]
			key := k.Value
			if k.Kind != yaml.ScalarNode {
				key = fmt.Sprintf("<%s key at line %d>", kindName(k), k.Line)
			}
			child := ptr + "/" + escapePointer(key)
			ps.key[child] = k
			out[key] = ps.convert(n.Content[i+1], child, depth+1)
			if ps.tooBig {
				return nil
			}
		}
		return out
	case yaml.ScalarNode:
		return scalarValue(n)
	}
	return nil
}

func kindName(n *yaml.Node) string {
	switch n.Kind {
	case yaml.MappingNode:
		return "mapping"
	case yaml.SequenceNode:
		return "list"
	}
	return "scalar"
}

// scalarValue resolves a scalar the way YAML 1.2's core schema does.
func scalarValue(n *yaml.Node) any {
	switch n.ShortTag() {
	case "!!null":
		return nil
	case "!!bool":
		var b bool
		if n.Decode(&b) == nil {
			return b
		}
	case "!!int":
		var i int
		if n.Decode(&i) == nil {
			return i
		}
		var fl float64
		if n.Decode(&fl) == nil {
			return fl
		}
	case "!!float":
		var fl float64
		if n.Decode(&fl) == nil {
			return fl
		}
	}
	return n.Value
}

// escapePointer escapes a JSON-pointer segment the way the schema
// validator writes instance locations, percent-encoding included, so that
// its locations can be looked up in pointers.
func escapePointer(s string) string {
	return url.PathEscape(strings.ReplaceAll(strings.ReplaceAll(s, "~", "~0"), "/", "~1"))
}

// get returns the key and value nodes for key in a mapping node, following
// aliases; nil when absent or when n is not a mapping.
func get(n *yaml.Node, key string) (k, v *yaml.Node) {
	n = deref(n)
	if n == nil || n.Kind != yaml.MappingNode {
		return nil, nil
	}
	for i := 0; i+1 < len(n.Content); i += 2 {
		if n.Content[i].Value == key {
			return n.Content[i], deref(n.Content[i+1])
		}
	}
	return nil, nil
}

func deref(n *yaml.Node) *yaml.Node {
	for i := 0; n != nil && n.Kind == yaml.AliasNode && i < 100; i++ {
		n = n.Alias
	}
	if n != nil && n.Kind == yaml.AliasNode {
		return nil
	}
	return n
}

// pairs returns a mapping's key/value node pairs in file order.
func pairs(n *yaml.Node) [][2]*yaml.Node {
	n = deref(n)
	if n == nil || n.Kind != yaml.MappingNode {
		return nil
	}
	out := make([][2]*yaml.Node, 0, len(n.Content)/2)
	for i := 0; i+1 < len(n.Content); i += 2 {
		out = append(out, [2]*yaml.Node{n.Content[i], deref(n.Content[i+1])})
	}
	return out
}

func items(n *yaml.Node) []*yaml.Node {
	n = deref(n)
	if n == nil || n.Kind != yaml.SequenceNode {
		return nil
	}
	out := make([]*yaml.Node, 0, len(n.Content))
	for _, c := range n.Content {
		out = append(out, deref(c))
	}
	return out
}

func str(n *yaml.Node) (string, bool) {
	if n == nil || n.Kind != yaml.ScalarNode || n.ShortTag() != "!!str" {
		return "", false
	}
	return n.Value, true
}

func intValue(n *yaml.Node) (int, bool) {
	if n == nil || n.Kind != yaml.ScalarNode || n.ShortTag() != "!!int" {
		return 0, false
	}
	var i int
	return i, n.Decode(&i) == nil
}

func floatValue(n *yaml.Node) (float64, bool) {
	if n == nil || n.Kind != yaml.ScalarNode || (n.ShortTag() != "!!int" && n.ShortTag() != "!!float") {
		return 0, false
	}
	var x float64
	return x, n.Decode(&x) == nil
}

func boolValue(n *yaml.Node) bool {
	var b bool
	if n == nil || n.Kind != yaml.ScalarNode || n.ShortTag() != "!!bool" {
		return false
	}
	return n.Decode(&b) == nil && b
}

// Plain converts a YAML subtree to plain Go values (maps, lists, strings,
// int, float64, bool, nil).
func Plain(n *yaml.Node) any {
	if n == nil {
		return nil
	}
	v, ps := toDocument(n)
	if ps.tooBig {
		return nil
	}
	return v
}
