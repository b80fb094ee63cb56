package nodes

import (
	"context"
	"fmt"

	"github.com/flowrun/flowrun/dsl"
	"github.com/flowrun/flowrun/runtime"
)

// Previews say what a node will do before it runs, for a person asked
// to confirm it (runtime.Previewer). They render templates and evaluate
// arguments only: nothing is sent, read or run. What cannot be rendered
// yet is said in its place.

func (k llmNode) Preview(_ context.Context, s *runtime.Scope, n *dsl.Node) runtime.QuestionContext {
	return k.svc.previewCall(s, n.LLM())
}

func (k agentNode) Preview(_ context.Context, s *runtime.Scope, n *dsl.Node) runtime.QuestionContext {
	a := n.Agent()
	qc := k.svc.previewCall(s, &a.LLM)
	qc.Tools = append(append(qc.Tools, a.Tools...), a.Finish...)
	return qc
}

func (codeNode) Preview(_ context.Context, s *runtime.Scope, n *dsl.Node) runtime.QuestionContext {
	c := n.Code()
	qc := runtime.QuestionContext{Language: c.Language, Code: rendered(s, c.Source)}
	if c.Module != "" {
		qc.Code = fmt.Sprintf("module %s, function %s", c.Module, c.Call)
	}
	return qc
}

func (toolNode) Preview(_ context.Context, s *runtime.Scope, n *dsl.Node) runtime.QuestionContext {
	t := n.Tool()
	qc := runtime.QuestionContext{Tool: t.Name}
	if t.Args != nil {
		args, err := s.EvalValue(t.Args)
		if err != nil {
			args = fmt.Sprintf("(cannot be evaluated yet: %v)", err)
		}
		qc.Args = args
	}
	return qc
}

// previewCall is a model call's model (after --model overrides), system
// prompt (the node's, else its memory's) and prompt, rendered.
func (svc *Services) previewCall(s *runtime.Scope, l *dsl.LLM) runtime.QuestionContext {
	p := s.Pipeline()
	qc := runtime.QuestionContext{Model: l.Model}
	if m, ok := p.Models[l.Model]; ok {
		qc.Model = m.Model
	}
	if id, ok := svc.Models[l.Model]; ok {
		qc.Model = id
	}
	system := l.System
	if system == nil && l.Memory != "" {
		system = p.Memories[l.Memory].System
	}
	qc.System, qc.Prompt = rendered(s, system), rendered(s, l.Prompt)
	return qc
}

// rendered is t rendered in s, or why it cannot be yet; "" for no t.
func rendered(s *runtime.Scope, t *dsl.Template) string {
	if t == nil {
		return ""
	}
	text, err := s.Render(t)
	if err != nil {
		return fmt.Sprintf("(cannot be rendered yet: %v)", err)
	}
	return text
}
