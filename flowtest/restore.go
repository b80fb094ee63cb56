package flowtest

import (
	"bytes"
	"encoding/json"
	"fmt"
	"slices"
	"strings"

	"gopkg.in/yaml.v3"

	"github.com/flowrun/flowrun/dsl"
	"github.com/flowrun/flowrun/engine"
	"github.com/flowrun/flowrun/jsonvalue"
	"github.com/flowrun/flowrun/runtime"
)

// Restore is where a case's run goes on from instead of its start, as a
// fork or a resume goes on: the checkpoints of the run the case was made
// from, whose nodes are restored rather than run.
type Restore struct {
	Pos dsl.Pos
	// Run and Checkpoint say where the checkpoints come from (a fork's
	// parent, or the run itself) and the last of them, for people.
	Run         string
	Checkpoint  int64
	Checkpoints []*runtime.Checkpoint
}

// start is what the case's run starts from: its inputs and the
// checkpoints it goes on from, with its edits made on them, as a fork or
// a resume makes them.
func (c *Case) start(p *dsl.Pipeline) (map[string]any, []*runtime.Checkpoint, []runtime.Edit, error) {
	if c.Restore == nil && len(c.Edits) == 0 {
		return c.Inputs, nil, nil, nil
	}
	var points []*runtime.Checkpoint
	if c.Restore != nil {
		points = c.Restore.Checkpoints
	}
	edits := slices.Clone(c.Edits) // Edited fills in their old values
	inputs, points, err := engine.Edited(p, c.Inputs, points, edits)
	return inputs, points, edits, err
}

var restoreKeys = []string{"run", "checkpoint", "checkpoints"}

// restore reads restore:, the checkpoints the case goes on from, each
// naming a node of the pipeline, in order and none after checkpoint:.
func (l *loader) restore(tc *Case, v *yaml.Node) {
	if v.Kind != yaml.MappingNode {
		l.errorf(v, "restore: a mapping with run:, checkpoint: and checkpoints:")
		return
	}
	r := &Restore{Pos: l.pos(v)}
	var last *yaml.Node
	for i := 0; i+1 < len(v.Content); i += 2 {
		k, x := v.Content[i], v.Content[i+1]
		switch k.Value {
		case "run":
			r.Run = x.Value
		case "checkpoint":
			last = x
			if n, ok := l.number(x, "restore: checkpoint"); ok {
				r.Checkpoint = int64(n)
			}
		case "checkpoints":
			if x.Kind != yaml.SequenceNode {
				l.errorf(x, "restore: checkpoints: a list of checkpoints")
				continue
			}
			for _, item := range x.Content {
				if cp := l.checkpoint(item); cp != nil {
					if n := len(r.Checkpoints); n > 0 && cp.Seq <= r.Checkpoints[n-1].Seq {
						l.errorf(item, "restore: checkpoint %d comes after checkpoint %d: list them in order", cp.Seq, r.Checkpoints[n-1].Seq)
					}
					r.Checkpoints = append(r.Checkpoints, cp)
				}
			}
		default:
			l.errorf(k, "unknown key %q in restore:%s", k.Value, dsl.Suggest(k.Value, restoreKeys))
		}
	}
	if n := len(r.Checkpoints); last != nil && n > 0 && r.Checkpoints[n-1].Seq > r.Checkpoint {
		l.errorf(last, "restore: checkpoint is %d, but the checkpoints go on to %d", r.Checkpoint, r.Checkpoints[n-1].Seq)
	}
	tc.Restore = r
}

// checkpoint reads one checkpoint as the store keeps it (its JSON fields,
// values decoded as a resume decodes them).
func (l *loader) checkpoint(v *yaml.Node) *runtime.Checkpoint {
	b, err := json.Marshal(dsl.Plain(v))
	if err != nil {
		l.errorf(v, "restore: a checkpoint: %v", err)
		return nil
	}
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.DisallowUnknownFields()
	var cp runtime.Checkpoint
	if err := dec.Decode(&cp); err != nil {
		l.errorf(v, "restore: a checkpoint (seq:, path:, output:, state:, nodes:, memories:, steps:, cost_usd:, tokens:, in_flight:): %v", err)
		return nil
	}
	values, err := jsonvalue.Decode(b)
	if err != nil {
		l.errorf(v, "restore: a checkpoint: %v", err)
		return nil
	}
	m, _ := values.(map[string]any)
	cp.Output = m["output"]
	cp.State, _ = m["state"].(map[string]any)
	cp.Nodes, _ = m["nodes"].(map[string]any)
	at := v
	if p := valueOf(v, "path"); p != nil {
		at = p
	}
	if cp.Seq <= 0 {
		l.errorf(v, "restore: a checkpoint needs its seq: (1 or more)")
		return nil
	}
	if path := Strip(strings.TrimSuffix(cp.Path, runtime.InFlightSuffix)); l.nodes[path] == nil {
		l.errorf(at, "restore: checkpoint %d: the pipeline has no node %q%s", cp.Seq, cp.Path, dsl.Suggest(path, l.paths))
		return nil
	}
	return &cp
}

// edits reads edits:, the values changed before the run goes on
// (state.NAME, inputs.NAME), each checked against what the pipeline
// declares.
func (l *loader) edits(tc *Case, v *yaml.Node) bool {
	if v.Kind != yaml.MappingNode {
		l.errorf(v, "edits: a mapping of state.NAME or inputs.NAME to the value it was changed to")
		return false
	}
	ok := true
	for i := 0; i+1 < len(v.Content); i += 2 {
		k, x := v.Content[i], v.Content[i+1]
		b, err := json.Marshal(dsl.Plain(x))
		var value any
		if err == nil {
			value, err = jsonvalue.Decode(b)
		}
		if err != nil {
			l.errorf(x, "edits: %s: %v", k.Value, err)
			ok = false
			continue
		}
		e := runtime.Edit{Key: k.Value, New: value}
		if err := engine.CheckEdits(l.p, []runtime.Edit{e}); err != nil {
			l.errorf(k, "edits: %v", err)
			ok = false
			continue
		}
		tc.Edits = append(tc.Edits, e)
	}
	return ok
}

// checkStart says, at edits:, why the case's edits cannot be made on
// what it restores (a state edit with no checkpoint to go into, say).
func (l *loader) checkStart(tc *Case, at *yaml.Node) {
	if _, _, _, err := tc.start(l.p); err != nil {
		l.errorf(at, "edits: %v", err)
	}
}

// restoreDoc is restore: as FromRun writes it.
type restoreDoc struct {
	Run         string `yaml:"run"`
	Checkpoint  int64  `yaml:"checkpoint"`
	Checkpoints []any  `yaml:"checkpoints"`
}

// restoreOf writes the checkpoints a run went on from as restore: holds
// them: their JSON fields, so that the loader reads them back as the store
// does.
func restoreOf(r *Restore) (*restoreDoc, error) {
	doc := &restoreDoc{Run: r.Run, Checkpoint: r.Checkpoint}
	for _, cp := range r.Checkpoints {
		b, err := json.Marshal(cp)
		if err != nil {
			return nil, fmt.Errorf("checkpoint %d: %w", cp.Seq, err)
		}
		v, err := jsonvalue.Decode(b)
		if err != nil {
			return nil, fmt.Errorf("checkpoint %d: %w", cp.Seq, err)
		}
		doc.Checkpoints = append(doc.Checkpoints, v)
	}
	return doc, nil
}
