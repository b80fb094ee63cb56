package llm

import (
	"context"
	"errors"
	"net/http"

	"github.com/openai/openai-go/v3/option"
	"github.com/openai/openai-go/v3/packages/param"
	"github.com/openai/openai-go/v3/responses"
	"github.com/openai/openai-go/v3/shared"
)

const responsesPath = "/responses"

func responsesParams(c *call) responses.ResponseNewParams {
	p := responses.ResponseNewParams{
		Model: c.Model,
		// Nothing refers to earlier responses by id, so nothing needs storing.
		Store: param.NewOpt(false),
	}
	var items responses.ResponseInputParam
	for _, m := range c.Messages {
		items = append(items, responsesItems(m)...)
	}
	p.Input.OfInputItemList = items
	if c.Temperature != nil {
		p.Temperature = param.NewOpt(*c.Temperature)
	}
	if c.TopP != nil {
		p.TopP = param.NewOpt(*c.TopP)
	}
	if c.MaxTokens > 0 {
		p.MaxOutputTokens = param.NewOpt(int64(c.MaxTokens))
	}
	if c.ReasoningEffort != "" {
		p.Reasoning.Effort = shared.ReasoningEffort(c.ReasoningEffort)
	}
	if c.Verbosity != "" {
		p.Text.Verbosity = responses.ResponseTextConfigVerbosity(c.Verbosity)
	}
	if c.OutputSchema != nil {
		p.Text.Format.OfJSONSchema = &responses.ResponseFormatTextJSONSchemaConfigParam{
			Name:   c.SchemaName,
			Schema: c.OutputSchema,
			Strict: param.NewOpt(true),
		}
	}
	for _, t := range c.Tools {
		fn := &responses.FunctionToolParam{Name: t.Name, Parameters: t.Parameters, Strict: param.NewOpt(t.Strict)}
		if t.Description != "" {
			fn.Description = param.NewOpt(t.Description)
		}
		p.Tools = append(p.Tools, responses.ToolUnionParam{OfFunction: fn})
	}
	if tc := c.ToolChoice; tc != nil {
		switch {
		case len(tc.Tools) == 1:
			p.ToolChoice.OfFunctionTool = &responses.ToolChoiceFunctionParam{Name: tc.Tools[0]}
		case len(tc.Tools) > 1:
			allowed := make([]map[string]any, len(tc.Tools))
			for i, name := range tc.Tools {
				allowed[i] = map[string]any{"type": "function", "name": name}
			}
			p.ToolChoice.OfAllowedTools = &responses.ToolChoiceAllowedParam{Mode: responses.ToolChoiceAllowedModeRequired, Tools: allowed}
		case tc.Mode != "":
			p.ToolChoice.OfToolChoiceMode = param.NewOpt(responses.ToolChoiceOptions(tc.Mode))
		}
	}
	return p
}

func responsesItems(m Message) []responses.ResponseInputItemUnionParam {
	switch m.Role {
	case RoleTool:
		return []responses.ResponseInputItemUnionParam{{OfFunctionCallOutput: &responses.ResponseInputItemFunctionCallOutputParam{
			CallID: param.NewOpt(m.ToolCallID),
			Output: responses.ResponseInputItemFunctionCallOutputOutputUnionParam{OfString: param.NewOpt(m.Text)},
		}}}
	case RoleAssistant:
		var items []responses.ResponseInputItemUnionParam
		if m.Text != "" || len(m.ToolCalls) == 0 {
			items = append(items, easyMessage(responses.EasyInputMessageRoleAssistant, m.Text))
		}
		for _, tc := range m.ToolCalls {
			items = append(items, responses.ResponseInputItemUnionParam{OfFunctionCall: &responses.ResponseFunctionToolCallParam{
				CallID: tc.ID, Name: tc.Name, Arguments: tc.Arguments,
			}})
		}
		return items
	case RoleSystem:
		return []responses.ResponseInputItemUnionParam{easyMessage(responses.EasyInputMessageRoleSystem, m.Text)}
	default:
		if len(m.Images) == 0 {
			return []responses.ResponseInputItemUnionParam{easyMessage(responses.EasyInputMessageRoleUser, m.Text)}
		}
		var parts responses.ResponseInputMessageContentListParam
		if m.Text != "" {
			parts = append(parts, responses.ResponseInputContentUnionParam{OfInputText: &responses.ResponseInputTextParam{Text: m.Text}})
		}
		for _, img := range m.Images {
			parts = append(parts, responses.ResponseInputContentUnionParam{OfInputImage: &responses.ResponseInputImageParam{
				ImageURL: param.NewOpt(img), Detail: responses.ResponseInputImageDetailAuto,
			}})
		}
		return []responses.ResponseInputItemUnionParam{{OfMessage: &responses.EasyInputMessageParam{
			Role:    responses.EasyInputMessageRoleUser,
			Content: responses.EasyInputMessageContentUnionParam{OfInputItemContentList: parts},
		}}}
	}
}

func easyMessage(role responses.EasyInputMessageRole, text string) responses.ResponseInputItemUnionParam {
	return responses.ResponseInputItemUnionParam{OfMessage: &responses.EasyInputMessageParam{
		Role:    role,
		Content: responses.EasyInputMessageContentUnionParam{OfString: param.NewOpt(text)},
	}}
}

// sendResponses makes one Responses API request.
func sendResponses(ctx context.Context, ep *endpoint, c *call, onDelta func(string), res **http.Response) (*reply, error) {
	p := responsesParams(c)
	if onDelta == nil {
		out, err := ep.responses.New(ctx, p, option.WithResponseInto(res))
		if err != nil {
			return nil, err
		}
		return responsesReply(out)
	}
	stream := ep.responses.NewStreaming(ctx, p, option.WithResponseInto(res))
	defer stream.Close()
	for stream.Next() {
		ev := stream.Current()
		switch ev.Type {
		case "response.output_text.delta":
			onDelta(ev.Delta)
		case "response.completed", "response.incomplete":
			r := ev.Response
			return responsesReply(&r)
		case "response.failed":
			return nil, &replyError{serverError: serverError{code: string(ev.Response.Error.Code), message: ev.Response.Error.Message}, streamed: true}
		case "error":
			return nil, &replyError{serverError: serverError{code: ev.Code, message: ev.Message}, streamed: true}
		}
	}
	if err := stream.Err(); err != nil {
		return nil, err
	}
	return nil, errStreamCut
}

func responsesReply(out *responses.Response) (*reply, error) {
	if out.Status == "failed" {
		return nil, &replyError{serverError: serverError{code: string(out.Error.Code), message: out.Error.Message}}
	}
	r := &reply{
		Model: out.Model,
		Usage: Usage{
			Prompt:     int(out.Usage.InputTokens),
			Completion: int(out.Usage.OutputTokens),
			Reasoning:  int(out.Usage.OutputTokensDetails.ReasoningTokens),
			Cached:     int(out.Usage.InputTokensDetails.CachedTokens),
			Total:      int(out.Usage.TotalTokens),
		},
	}
	var text []byte
	for _, item := range out.Output {
		switch item.Type {
		case "message":
			for _, part := range item.Content {
				if part.Type == "output_text" {
					text = append(text, part.Text...)
				}
			}
		case "function_call":
			fc := item.AsFunctionCall()
			r.ToolCalls = append(r.ToolCalls, ToolCall{ID: fc.CallID, Name: fc.Name, Arguments: fc.Arguments})
		}
	}
	r.Text = string(text)
	switch {
	case out.Status == "incomplete" && out.IncompleteDetails.Reason == "max_output_tokens":
		r.FinishReason = "length"
	case out.Status == "incomplete" && out.IncompleteDetails.Reason != "":
		r.FinishReason = out.IncompleteDetails.Reason
	case len(r.ToolCalls) > 0:
		r.FinishReason = "tool_calls"
	default:
		r.FinishReason = "stop"
	}
	if out.ID == "" && len(out.Output) == 0 {
		if err := bodyError(out.RawJSON()); err != nil {
			return nil, err
		}
		return nil, errors.New("the reply has no output")
	}
	return r, nil
}
