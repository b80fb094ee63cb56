package dsl

import (
	"fmt"
	"sort"
	"strings"

	"github.com/flowrun/flowrun/errclass"
	"gopkg.in/yaml.v3"
)

// The node decoder: ids, blocks, the fields every node has, and the hand-off
// to the node's kind (dsl/kind_*.go).

// collectIDs records every node id in the file, nested bodies included, so
// that expressions can refer to nodes defined later.
func (f *file) collectIDs(seq *yaml.Node) {
	for _, n := range items(seq) {
		if idn := valueOf(n, "id"); idn != nil {
			if id, ok := str(idn); ok && id != "" {
				if first, dup := f.ids[id]; dup {
					f.l.errorf(f.pos(idn), "duplicate node id %q (first defined at line %d): node ids must be unique in a file", id, first.Line)
				} else {
					f.ids[id] = idn
					f.idSet = append(f.idSet, id)
				}
			}
		}
		for _, kv := range pairs(n) {
			if spec := specs[Kind(kv[0].Value)]; spec != nil && spec.yamlBodies != nil && kv[1] != nil {
				for _, body := range spec.yamlBodies(kv[1]) {
					f.collectIDs(body)
				}
			}
		}
	}
}

// block decodes a list of sibling nodes and checks the flow between them.
func (f *file) block(seq *yaml.Node, sc scope) Block {
	var b Block
	var yn []*yaml.Node
	for _, n := range items(seq) {
		if node := f.node(n, sc); node != nil {
			b = append(b, node)
			yn = append(yn, n)
		}
	}
	f.checkFlow(b, yn, sc)
	return b
}

func (f *file) node(n *yaml.Node, sc scope) *Node {
	if n == nil || n.Kind != yaml.MappingNode {
		return nil
	}
	node := &Node{Pos: f.pos(n)}
	sc.node = node
	node.ID, _ = str(valueOf(n, "id"))
	node.Description, _ = str(valueOf(n, "description"))
	label := fmt.Sprintf("node %q", node.ID)

	var kindKey *yaml.Node
	for _, kv := range pairs(n) {
		key := kv[0]
		if k := Kind(key.Value); k == KindSet || specs[k] == nil {
			continue
		}
		if kindKey != nil {
			f.l.errorf(f.pos(key), "%s has two kinds, %s and %s: a node has one kind key; split it into two nodes", label, kindKey.Value, key.Value)
			continue
		}
		kindKey, node.Kind = key, Kind(key.Value)
	}
	if kindKey == nil {
		node.Kind = KindSet
		if valueOf(n, "set") == nil {
			f.l.errorf(f.pos(n), "%s has no kind: give it one of %s, or a set:", label, kindList())
		}
	}

	if w := valueOf(n, "when"); w != nil {
		node.When = f.condition(w, sc, "when")
	}
	after := sc
	after.afterRun = true
	node.Set = f.assigns(label, valueOf(n, "set"), after)
	node.Next, _ = str(valueOf(n, "next"))
	onError, _ := str(valueOf(n, "on_error"))
	node.OnError = OnError(onError)
	node.Timeout = f.duration(valueOf(n, "timeout"))
	node.Confirm = boolValue(valueOf(n, "confirm"))
	if r := valueOf(n, "retry"); r != nil {
		node.Retry = &Retry{MaxAttempts: 1}
		if a, ok := intValue(valueOf(r, "max_attempts")); ok {
			node.Retry.MaxAttempts = a
		}
		node.Retry.Backoff = f.duration(valueOf(r, "backoff"))
		for _, c := range items(valueOf(r, "retry_on")) {
			if s, ok := str(c); ok {
				node.Retry.RetryOn = append(node.Retry.RetryOn, errclass.Class(s))
			}
		}
	}
	if k, _ := get(n, "default"); k != nil && node.Kind != KindBranch {
		f.l.errorf(f.pos(k), "%s: default: belongs to branch nodes; use next: to say where to go after this node", label)
	}

	if spec := specs[node.Kind]; spec != nil {
		d := &nodeDecoder{f: f, node: node, n: n, v: valueOf(n, string(node.Kind)), sc: sc, label: label}
		node.Config = spec.decode(d)
	}
	return node
}

func kindList() string {
	var names []string
	for _, s := range Kinds() {
		names = append(names, string(s.Kind))
	}
	return strings.Join(names, ", ")
}

func mapOf(n *yaml.Node) map[string]any {
	m, _ := Plain(n).(map[string]any)
	return m
}

func (f *file) assigns(label string, n *yaml.Node, sc scope) []*Assign {
	var out []*Assign
	for _, kv := range pairs(n) {
		key := kv[0].Value
		if !f.state[key] {
			f.l.errorf(f.pos(kv[0]), "%s: set: no state variable %q%s; declare it under state:", label, key, Suggest(key, keys(f.state)))
		}
		out = append(out, &Assign{Key: key, Pos: f.pos(kv[0]), Value: f.value(kv[1], sc)})
	}
	return out
}

func keys(m map[string]bool) []string {
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	sort.Strings(out)
	return out
}
