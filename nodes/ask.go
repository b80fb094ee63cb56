package nodes

import (
	"context"
	"fmt"

	"github.com/flowrun/flowrun/dsl"
	"github.com/flowrun/flowrun/errclass"
	"github.com/flowrun/flowrun/jsonvalue"
	"github.com/flowrun/flowrun/runtime"
)

// defaultAnswerSchema is what an ask without schema: accepts.
var defaultAnswerSchema = map[string]any{"type": "string"}

// askNode asks a person. On a terminal the CLI asks at the prompt;
// otherwise the run waits (status waiting) until resumed with the answer.
// --auto answers with the default. Output: the answer.
type askNode struct{}

func (askNode) Execute(ctx context.Context, s *runtime.Scope, n *dsl.Node) (runtime.Outcome, error) {
	a := n.Ask()
	text, err := s.Render(a.Question)
	if err != nil {
		return runtime.Outcome{}, fmt.Errorf("question: %w", err)
	}
	schema := a.Schema
	if schema == nil {
		schema = defaultAnswerSchema
	}
	q := runtime.Question{Path: s.Path(n.ID), Node: n.ID, Kind: runtime.QuestionAsk, Text: text, Schema: schema,
		Default: a.Default, HasDefault: a.Default != nil}
	answer, err := s.Ask(ctx, q)
	if err != nil {
		return runtime.Outcome{}, err
	}
	if err := jsonvalue.Validate(schema, answer); err != nil {
		return runtime.Outcome{}, runtime.Errorf(errclass.Critical, "the answer does not match the question's schema: %v", err)
	}
	return runtime.Outcome{Output: answer}, nil
}
