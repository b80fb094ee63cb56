package llm

import (
	"context"
	"errors"
	"net/http"
	"sort"

	"github.com/openai/openai-go/v3"
	"github.com/openai/openai-go/v3/option"
	"github.com/openai/openai-go/v3/packages/param"
	"github.com/openai/openai-go/v3/shared"
)

const chatPath = "/chat/completions"

func chatParams(c *call, ep *endpoint) openai.ChatCompletionNewParams {
	p := openai.ChatCompletionNewParams{Model: c.Model}
	for _, m := range c.Messages {
		p.Messages = append(p.Messages, chatMessage(m))
	}
	if c.Temperature != nil {
		p.Temperature = param.NewOpt(*c.Temperature)
	}
	if c.TopP != nil {
		p.TopP = param.NewOpt(*c.TopP)
	}
	if c.Seed != nil {
		p.Seed = param.NewOpt(int64(*c.Seed))
	}
	if c.MaxTokens > 0 {
		if ep.maxCompletionTokens {
			p.MaxCompletionTokens = param.NewOpt(int64(c.MaxTokens))
		} else {
			p.MaxTokens = param.NewOpt(int64(c.MaxTokens))
		}
	}
	if c.ReasoningEffort != "" {
		p.ReasoningEffort = shared.ReasoningEffort(c.ReasoningEffort)
	}
	if c.Verbosity != "" {
		p.Verbosity = openai.ChatCompletionNewParamsVerbosity(c.Verbosity)
	}
	for _, t := range c.Tools {
		fn := shared.FunctionDefinitionParam{Name: t.Name, Parameters: shared.FunctionParameters(t.Parameters)}
		if t.Description != "" {
			fn.Description = param.NewOpt(t.Description)
		}
		if t.Strict {
			fn.Strict = param.NewOpt(true)
		}
		p.Tools = append(p.Tools, openai.ChatCompletionFunctionTool(fn))
	}
	if tc := c.ToolChoice; tc != nil {
		switch {
		case len(tc.Tools) == 1:
			p.ToolChoice.OfFunctionToolChoice = &openai.ChatCompletionNamedToolChoiceParam{
				Function: openai.ChatCompletionNamedToolChoiceFunctionParam{Name: tc.Tools[0]},
			}
		case len(tc.Tools) > 1:
			allowed := make([]map[string]any, len(tc.Tools))
			for i, name := range tc.Tools {
				allowed[i] = map[string]any{"type": "function", "function": map[string]any{"name": name}}
			}
			p.ToolChoice.OfAllowedTools = &openai.ChatCompletionAllowedToolChoiceParam{
				AllowedTools: openai.ChatCompletionAllowedToolsParam{Mode: openai.ChatCompletionAllowedToolsModeRequired, Tools: allowed},
			}
		case tc.Mode != "":
			p.ToolChoice.OfAuto = param.NewOpt(tc.Mode)
		}
	}
	if c.OutputSchema != nil {
		p.ResponseFormat.OfJSONSchema = &shared.ResponseFormatJSONSchemaParam{
			JSONSchema: shared.ResponseFormatJSONSchemaJSONSchemaParam{
				Name:   c.SchemaName,
				Schema: c.OutputSchema,
				Strict: param.NewOpt(true),
			},
		}
	}
	return p
}

func chatMessage(m Message) openai.ChatCompletionMessageParamUnion {
	switch m.Role {
	case RoleSystem:
		return openai.SystemMessage(m.Text)
	case RoleTool:
		return openai.ToolMessage(m.Text, m.ToolCallID)
	case RoleAssistant:
		a := openai.ChatCompletionAssistantMessageParam{}
		if m.Text != "" || len(m.ToolCalls) == 0 {
			a.Content.OfString = param.NewOpt(m.Text)
		}
		for _, tc := range m.ToolCalls {
			a.ToolCalls = append(a.ToolCalls, openai.ChatCompletionMessageToolCallUnionParam{
				OfFunction: &openai.ChatCompletionMessageFunctionToolCallParam{
					ID:       tc.ID,
					Function: openai.ChatCompletionMessageFunctionToolCallFunctionParam{Name: tc.Name, Arguments: tc.Arguments},
				},
			})
		}
		return openai.ChatCompletionMessageParamUnion{OfAssistant: &a}
	default:
		if len(m.Images) == 0 {
			return openai.UserMessage(m.Text)
		}
		var parts []openai.ChatCompletionContentPartUnionParam
		if m.Text != "" {
			parts = append(parts, openai.TextContentPart(m.Text))
		}
		for _, img := range m.Images {
			parts = append(parts, openai.ImageContentPart(openai.ChatCompletionContentPartImageImageURLParam{URL: img}))
		}
		return openai.UserMessage(parts)
	}
}

// sendChat makes one Chat Completions request. res receives the HTTP
// response, when one arrived, for error classification.
func sendChat(ctx context.Context, ep *endpoint, c *call, onDelta func(string), res **http.Response) (*reply, error) {
	p := chatParams(c, ep)
	if onDelta == nil {
		out, err := ep.chat.New(ctx, p, option.WithResponseInto(res))
		if err != nil {
			return nil, err
		}
		if len(out.Choices) == 0 {
			if err := bodyError(out.RawJSON()); err != nil {
				return nil, err
			}
			return nil, errors.New("the reply has no choices")
		}
		ch := out.Choices[0]
		r := &reply{
			Model:        out.Model,
			Text:         ch.Message.Content,
			FinishReason: ch.FinishReason,
			Usage:        chatUsage(out.Usage),
		}
		for _, tc := range ch.Message.ToolCalls {
			r.ToolCalls = append(r.ToolCalls, ToolCall{ID: tc.ID, Name: tc.Function.Name, Arguments: tc.Function.Arguments})
		}
		return r, nil
	}

	p.StreamOptions.IncludeUsage = param.NewOpt(true)
	stream := ep.chat.NewStreaming(ctx, p, option.WithResponseInto(res))
	defer stream.Close()
	r := &reply{}
	calls := map[int64]*ToolCall{}
	var text []byte
	for stream.Next() {
		chunk := stream.Current()
		if chunk.Model != "" {
			r.Model = chunk.Model
		}
		if chunk.JSON.Usage.Valid() {
			r.Usage = chatUsage(chunk.Usage)
		}
		for _, ch := range chunk.Choices {
			if ch.Index != 0 {
				continue
			}
			if d := ch.Delta.Content; d != "" {
				text = append(text, d...)
				onDelta(d)
			}
			for _, d := range ch.Delta.ToolCalls {
				tc := calls[d.Index]
				if tc == nil {
					tc = &ToolCall{}
					calls[d.Index] = tc
				}
				if d.ID != "" {
					tc.ID = d.ID
				}
				tc.Name += d.Function.Name
				tc.Arguments += d.Function.Arguments
			}
			if ch.FinishReason != "" {
				r.FinishReason = ch.FinishReason
			}
		}
	}
	if err := stream.Err(); err != nil {
		return nil, err
	}
	if r.FinishReason == "" {
		return nil, errStreamCut
	}
	r.Text = string(text)
	idx := make([]int64, 0, len(calls))
	for i := range calls {
		idx = append(idx, i)
	}
	sort.Slice(idx, func(a, b int) bool { return idx[a] < idx[b] })
	for _, i := range idx {
		r.ToolCalls = append(r.ToolCalls, *calls[i])
	}
	return r, nil
}

// errStreamCut: the stream ended before the reply said it was finished.
var errStreamCut = errors.New("the stream ended before the reply was complete")

func chatUsage(u openai.CompletionUsage) Usage {
	return Usage{
		Prompt:     int(u.PromptTokens),
		Completion: int(u.CompletionTokens),
		Reasoning:  int(u.CompletionTokensDetails.ReasoningTokens),
		Cached:     int(u.PromptTokensDetails.CachedTokens),
		Total:      int(u.TotalTokens),
	}
}
