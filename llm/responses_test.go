package llm

import (
	"context"
	"reflect"
	"testing"

	"github.com/flowrun/flowrun/llm/llmtest"
	"github.com/flowrun/flowrun/llmconf"
)

func TestResponsesRequestShape(t *testing.T) {
	srv := llmtest.New(t)
	c, _ := testClient(t, srv)
	srv.Push(llmtest.Reply{
		Text:  "done",
		Usage: llmtest.Usage{Prompt: 2000, Completion: 500, Reasoning: 300, Cached: 1000},
	})
	m := &llmconf.Model{Name: "vision", Model: "o4-mini", API: "responses", ReasoningEffort: "low", Verbosity: "high", MaxTokens: 900}
	resp, err := c.Complete(context.Background(), Request{
		Model: m,
		Messages: []Message{
			{Role: RoleSystem, Text: "You translate images."},
			{Role: RoleUser, Text: "Describe.", Images: []string{"data:image/png;base64,iVBORw0KGgo="}},
			{Role: RoleAssistant, Text: "Looking.", ToolCalls: []ToolCall{{ID: "call_9", Name: "ocr", Arguments: `{"region":"all"}`}}},
			{Role: RoleTool, ToolCallID: "call_9", Text: `{"text":"3 apples"}`},
		},
		Tools: []ToolSpec{{Name: "ocr", Description: "Read text.", Parameters: map[string]any{"type": "object"}}},
	})
	if err != nil {
		t.Fatal(err)
	}
	req := srv.Last()
	if req.Path != "/v1/responses" {
		t.Fatalf("path %s", req.Path)
	}
	b := req.Body
	checks := map[string]string{
		"model":             `"o4-mini"`,
		"store":             `false`,
		"max_output_tokens": `900`,
		"reasoning":         `{"effort":"low"}`,
		"text":              `{"verbosity":"high"}`,
		"input": `[{"content":"You translate images.","role":"system"},` +
			`{"content":[{"text":"Describe.","type":"input_text"},{"detail":"auto","image_url":"data:image/png;base64,iVBORw0KGgo=","type":"input_image"}],"role":"user"},` +
			`{"content":"Looking.","role":"assistant"},` +
			`{"arguments":"{\"region\":\"all\"}","call_id":"call_9","name":"ocr","type":"function_call"},` +
			`{"call_id":"call_9","output":"{\"text\":\"3 apples\"}","type":"function_call_output"}]`,
		"tools": `[{"description":"Read text.","name":"ocr","parameters":{"type":"object"},"strict":false,"type":"function"}]`,
	}
	for field, want := range checks {
		if got := wire(t, b[field]); got != want {
			t.Errorf("%s:\n got %s\nwant %s", field, got, want)
		}
	}
	want := &Response{
		Text: "done", FinishReason: "stop", Model: "o4-mini", Turns: 1,
		Usage:   Usage{Prompt: 2000, Completion: 500, Reasoning: 300, Cached: 1000, Total: 2500},
		CostUSD: (1000*1.10 + 1000*0.275 + 500*4.40) / 1e6,
	}
	if !reflect.DeepEqual(resp, want) {
		t.Errorf("response\n got %+v\nwant %+v", resp, want)
	}
}

func TestResponsesStructuredOutput(t *testing.T) {
	srv := llmtest.New(t)
	c, _ := testClient(t, srv)
	srv.Push(llmtest.Text(`{"caption": "a red square"}`))
	m := &llmconf.Model{Name: "v", Model: "gpt-5-mini", API: "responses"}
	schema := map[string]any{"type": "object", "properties": map[string]any{"caption": map[string]any{"type": "string"}}, "required": []any{"caption"}}
	resp, err := c.Complete(context.Background(), Request{Model: m, Messages: userSays("caption"), OutputSchema: schema})
	if err != nil {
		t.Fatal(err)
	}
	wantFormat := `{"format":{"name":"output","schema":{"additionalProperties":false,"properties":{"caption":{"type":"string"}},"required":["caption"],"type":"object"},"strict":true,"type":"json_schema"}}`
	if got := wire(t, srv.Last().Body["text"]); got != wantFormat {
		t.Errorf("text format:\n got %s\nwant %s", got, wantFormat)
	}
	if !reflect.DeepEqual(resp.JSON, map[string]any{"caption": "a red square"}) {
		t.Errorf("JSON %#v", resp.JSON)
	}
}

func TestResponsesToolCallsAndFinishReasons(t *testing.T) {
	srv := llmtest.New(t)
	c, _ := testClient(t, srv)
	m := &llmconf.Model{Name: "r", Model: "gpt-5", API: "responses"}
	srv.Push(
		llmtest.Calls(llmtest.Call("finish", map[string]any{"answer": 42})),
		llmtest.Reply{Text: "partial", FinishReason: "length"},
	)
	resp, err := c.Complete(context.Background(), Request{Model: m, Messages: userSays("q"), Tools: []ToolSpec{{Name: "finish"}}})
	if err != nil {
		t.Fatal(err)
	}
	if resp.FinishReason != "tool_calls" || len(resp.ToolCalls) != 1 || !reflect.DeepEqual(resp.ToolCalls[0].Args, map[string]any{"answer": 42}) || resp.ToolCalls[0].ID == "" {
		t.Errorf("tool call response %+v", resp)
	}
	resp, err = c.Complete(context.Background(), Request{Model: m, Messages: userSays("q")})
	if err != nil {
		t.Fatal(err)
	}
	if resp.FinishReason != "length" || resp.Text != "partial" {
		t.Errorf("incomplete response %+v", resp)
	}
}
