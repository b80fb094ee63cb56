package dsl

import (
	"strconv"
	"strings"

	"gopkg.in/yaml.v3"
)

// KindCall is the call node kind.
const KindCall Kind = "call"

func init() {
	registerKind(&KindSpec{
		Kind:    KindCall,
		Summary: "Run another pipeline file.",
		Doc:     "Runs another pipeline file (relative to this one, inside the pipeline directory) with `inputs`, in the same run: its steps, cost and events count here, and its nodes checkpoint under this node's path. The inputs are checked against the called pipeline's declared inputs and their types when this file loads.",
		Output:  "the called pipeline's `outputs`, typed by them.",
		Example: `- id: solve
  call:
    pipeline: solve_task.yaml
    inputs: {task: state.task}`,
		Schema: `{
  "description": "Run another pipeline file; its outputs are this node's output.",
  "type": "object",
  "additionalProperties": false,
  "required": [
    "pipeline"
  ],
  "properties": {
    "pipeline": {
      "description": "Path of the pipeline file to run, relative to this file and inside the pipeline directory.",
      "type": "string"
    },
    "inputs": {
      "description": "Inputs passed to the called pipeline, each an expression (quote text: '\"x\"'); checked against its declared inputs and their types.",
      "type": "object"
    }
  }
}`,
		decode: func(d *nodeDecoder) any { return d.f.call(d.label, d.v, d.sc) },
		output: func(_ *resolver, n *Node) *Type { return pipelineOutputs(n.Call().Pipeline) },
	})
}

// Call runs another pipeline file.
type Call struct {
	Path     string
	Pipeline *Pipeline
	Inputs   []*Field
}

// Call is the configuration of a call node; nil for a node of another kind.
func (n *Node) Call() *Call { return Config[*Call](n) }

func (f *file) call(label string, v *yaml.Node, sc scope) *Call {
	c := &Call{}
	pn := valueOf(v, "pipeline")
	c.Path, _ = str(pn)
	if pn != nil {
		c.Pipeline = f.subPipeline(pn)
	}
	in := valueOf(v, "inputs")
	for _, kv := range pairs(in) {
		c.Inputs = append(c.Inputs, &Field{Name: kv[0].Value, Value: f.value(kv[1], sc)})
	}
	if c.Pipeline == nil {
		return c
	}
	declared := map[string]bool{}
	for _, ci := range c.Pipeline.Inputs {
		declared[ci.Name] = true
	}
	given := map[string]bool{}
	for _, kv := range pairs(in) {
		given[kv[0].Value] = true
		if !declared[kv[0].Value] {
			f.l.errorf(f.pos(kv[0]), "%s: %s has no input %q%s", label, c.Path, kv[0].Value, Suggest(kv[0].Value, keys(declared)))
		}
	}
	var missing []string
	for _, ci := range c.Pipeline.Inputs {
		if !ci.HasDefault && !given[ci.Name] {
			missing = append(missing, strconv.Quote(ci.Name))
		}
	}
	switch {
	case len(missing) == 1:
		f.l.errorf(f.pos(pn), "%s: %s needs input %s; pass it under inputs:", label, c.Path, missing[0])
	case len(missing) > 1:
		f.l.errorf(f.pos(pn), "%s: %s needs inputs %s; pass them under inputs:", label, c.Path, strings.Join(missing, ", "))
	}
	return c
}
