package nodes

import (
	"context"

	"github.com/flowrun/flowrun/dsl"
	"github.com/flowrun/flowrun/llm"
	"github.com/flowrun/flowrun/runtime"
)

// llmNode makes one model call. With output_schema the reply must be JSON
// matching it (repair_retries turns send the problems back first).
// Output: {text, json, finish_reason, usage, cost_usd, model}.
type llmNode struct{ svc *Services }

func (k llmNode) Execute(ctx context.Context, s *runtime.Scope, n *dsl.Node) (runtime.Outcome, error) {
	l := n.LLM()
	c, err := k.svc.startConversation(ctx, s, l)
	if err != nil {
		return runtime.Outcome{}, err
	}
	resp, err := k.svc.call(ctx, s, n, c, llm.Request{Temperature: l.Temperature, MaxTokens: l.MaxTokens,
		OutputSchema: l.OutputSchema, SchemaName: n.ID, RepairRetries: l.RepairRetries})
	if err != nil {
		return runtime.Outcome{}, err
	}
	c.added = append(c.added, resp.Message())
	if err := c.remember(s); err != nil {
		return runtime.Outcome{}, err
	}
	return runtime.Outcome{Output: map[string]any{"text": resp.Text, "json": resp.JSON, "finish_reason": resp.FinishReason,
		"usage": usageMap(resp.Usage), "cost_usd": resp.CostUSD, "model": resp.Model}}, nil
}
