package llm

import (
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"

	"github.com/flowrun/flowrun/errclass"
	"github.com/flowrun/flowrun/llm/llmtest"
	"github.com/flowrun/flowrun/llmconf"
)

// wire re-encodes a decoded body fragment for comparison.
func wire(t *testing.T, v any) string {
	t.Helper()
	b, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

func TestChatRequestShape(t *testing.T) {
	srv := llmtest.New(t)
	c, _ := testClient(t, srv)
	dir := t.TempDir()
	png := []byte("\x89PNG\r\n\x1a\n fake image bytes")
	if err := os.WriteFile(filepath.Join(dir, "grid.png"), png, 0o644); err != nil {
		t.Fatal(err)
	}
	img, err := ImageURL("grid.png", readIn(dir))
	if err != nil {
		t.Fatal(err)
	}
	if !strings.HasPrefix(img, "data:image/png;base64,") {
		t.Fatalf("image URL %q is not a PNG data URL", img[:30])
	}
	srv.Push(llmtest.Reply{Text: "four", Usage: llmtest.Usage{Prompt: 1000, Completion: 200, Cached: 400, Reasoning: 50}, Model: "gpt-4.1-mini-2025-04-14"})

	m := &llmconf.Model{Name: "default", Model: "gpt-4.1-mini", Temperature: ptr(0.7), Seed: ptr(7), MaxTokens: 100}
	resp, err := c.Complete(context.Background(), Request{
		Key:         Key{Node: "ask", Iteration: 1, Attempt: 1},
		Model:       m,
		Temperature: ptr(0.0),
		Messages: []Message{
			{Role: RoleSystem, Text: "Be brief."},
			{Role: RoleUser, Text: "What is in the image?", Images: []string{img, "https://example.com/a.jpg"}},
			{Role: RoleAssistant, ToolCalls: []ToolCall{{ID: "call_1", Name: "ocr", Arguments: `{"region":"top"}`}}},
			{Role: RoleTool, ToolCallID: "call_1", Text: `"2+2"`},
		},
		Tools: []ToolSpec{{Name: "ocr", Description: "Read text.", Parameters: map[string]any{
			"type": "object", "properties": map[string]any{"region": map[string]any{"type": "string"}}, "required": []any{"region"},
		}}},
	})
	if err != nil {
		t.Fatal(err)
	}
	req := srv.Last()
	if req.Path != "/v1/chat/completions" {
		t.Errorf("path %s", req.Path)
	}
	if got := req.Header.Get("Authorization"); got != "Bearer "+fakeKey {
		t.Errorf("Authorization header %q", got)
	}
	b := req.Body
	if b["model"] != "gpt-4.1-mini" || b["temperature"] != 0.0 || b["seed"] != 7.0 || b["max_tokens"] != 100.0 {
		t.Errorf("model settings on the wire: model=%v temperature=%v seed=%v max_tokens=%v", b["model"], b["temperature"], b["seed"], b["max_tokens"])
	}
	if _, streamed := b["stream"]; streamed {
		t.Error("stream sent without OnDelta")
	}
	wantMessages := `[{"content":"Be brief.","role":"system"},` +
		`{"content":[{"text":"What is in the image?","type":"text"},{"image_url":{"url":"` + img + `"},"type":"image_url"},{"image_url":{"url":"https://example.com/a.jpg"},"type":"image_url"}],"role":"user"},` +
		`{"role":"assistant","tool_calls":[{"function":{"arguments":"{\"region\":\"top\"}","name":"ocr"},"id":"call_1","type":"function"}]},` +
		`{"content":"\"2+2\"","role":"tool","tool_call_id":"call_1"}]`
	if got := wire(t, b["messages"]); got != wantMessages {
		t.Errorf("messages on the wire:\n got %s\nwant %s", got, wantMessages)
	}
	wantTools := `[{"function":{"description":"Read text.","name":"ocr","parameters":{"properties":{"region":{"type":"string"}},"required":["region"],"type":"object"}},"type":"function"}]`
	if got := wire(t, b["tools"]); got != wantTools {
		t.Errorf("tools on the wire:\n got %s\nwant %s", got, wantTools)
	}

	want := &Response{
		Text: "four", FinishReason: "stop", Model: "gpt-4.1-mini-2025-04-14", Turns: 1,
		Usage: Usage{Prompt: 1000, Completion: 200, Cached: 400, Reasoning: 50, Total: 1200},
		// 600 input at $0.40, 400 cached at $0.10, 200 output at $1.60 per Mtok.
		CostUSD: (600*0.40 + 400*0.10 + 200*1.60) / 1e6,
	}
	if !reflect.DeepEqual(resp, want) {
		t.Errorf("response\n got %+v\nwant %+v", resp, want)
	}
}

func TestChatStructuredOutputShape(t *testing.T) {
	srv := llmtest.New(t)
	c, _ := testClient(t, srv)
	srv.Push(llmtest.JSON(map[string]any{"answer": "4", "confidence": 0.9}))
	schema := map[string]any{
		"type": "object",
		"properties": map[string]any{
			"answer":     map[string]any{"type": "string"},
			"confidence": map[string]any{"type": "number"},
		},
		"required": []any{"answer", "confidence"},
	}
	resp, err := c.Complete(context.Background(), Request{Model: model("gpt-4o"), Messages: userSays("2+2?"), OutputSchema: schema, SchemaName: "verdict"})
	if err != nil {
		t.Fatal(err)
	}
	want := `{"json_schema":{"name":"verdict","schema":{"additionalProperties":false,"properties":{"answer":{"type":"string"},"confidence":{"type":"number"}},"required":["answer","confidence"],"type":"object"},"strict":true},"type":"json_schema"}`
	if got := wire(t, srv.Last().Body["response_format"]); got != want {
		t.Errorf("response_format:\n got %s\nwant %s", got, want)
	}
	if !reflect.DeepEqual(resp.JSON, map[string]any{"answer": "4", "confidence": 0.9}) {
		t.Errorf("JSON = %#v", resp.JSON)
	}
	if _, set := schema["additionalProperties"]; set {
		t.Error("the caller's schema was modified")
	}
}

func TestChatToolCalls(t *testing.T) {
	srv := llmtest.New(t)
	c, _ := testClient(t, srv)
	srv.Push(llmtest.Calls(
		llmtest.Call("ocr", map[string]any{"region": "top", "scale": 2}),
		llmtest.ToolCall{ID: "call_x", Name: "read_table", Arguments: `{"rows": [1, 2`},
	))
	resp, err := c.Complete(context.Background(), Request{
		Model:      model("gpt-4.1"),
		Messages:   userSays("read it"),
		Tools:      []ToolSpec{{Name: "ocr"}, {Name: "read_table"}, {Name: "answer"}, {Name: "ask"}},
		ToolChoice: ToolChoice{Tools: []string{"answer", "ask"}},
	})
	if err != nil {
		t.Fatal(err)
	}
	if resp.FinishReason != "tool_calls" || len(resp.ToolCalls) != 2 {
		t.Fatalf("finish %q, %d tool calls", resp.FinishReason, len(resp.ToolCalls))
	}
	ok := resp.ToolCalls[0]
	if ok.Name != "ocr" || ok.ArgsError != "" || !reflect.DeepEqual(ok.Args, map[string]any{"region": "top", "scale": 2}) {
		t.Errorf("first call %+v", ok)
	}
	bad := resp.ToolCalls[1]
	if bad.ID != "call_x" || bad.Args != nil || !strings.Contains(bad.ArgsError, "read_table") {
		t.Errorf("truncated call %+v", bad)
	}
	wantChoice := `{"allowed_tools":{"mode":"required","tools":[{"function":{"name":"answer"},"type":"function"},{"function":{"name":"ask"},"type":"function"}]},"type":"allowed_tools"}`
	if got := wire(t, srv.Last().Body["tool_choice"]); got != wantChoice {
		t.Errorf("tool_choice:\n got %s\nwant %s", got, wantChoice)
	}
	msg := resp.Message()
	if msg.Role != RoleAssistant || len(msg.ToolCalls) != 2 {
		t.Errorf("memory turn %+v", msg)
	}
}

func TestToolChoiceShapes(t *testing.T) {
	cases := []struct {
		choice    ToolChoice
		chat, rsp string
	}{
		{ToolChoice{Mode: "required"}, `"required"`, `"required"`},
		{ToolChoice{Mode: "none"}, `"none"`, `"none"`},
		{ToolChoice{Tools: []string{"finish"}}, `{"function":{"name":"finish"},"type":"function"}`, `{"name":"finish","type":"function"}`},
	}
	srv := llmtest.New(t)
	srv.Handle(func(llmtest.Request) llmtest.Reply { return llmtest.Text("ok") })
	c, _ := testClient(t, srv)
	for _, tc := range cases {
		for _, api := range []string{APIChat, APIResponses} {
			m := model("gpt-4.1")
			m.API = api
			if _, err := c.Complete(context.Background(), Request{Model: m, Messages: userSays("x"), Tools: []ToolSpec{{Name: "finish"}}, ToolChoice: tc.choice}); err != nil {
				t.Fatal(err)
			}
			want := tc.chat
			if api == APIResponses {
				want = tc.rsp
			}
			if got := wire(t, srv.Last().Body["tool_choice"]); got != want {
				t.Errorf("%s %+v: tool_choice %s, want %s", api, tc.choice, got, want)
			}
		}
	}
}

func TestStructuredOutputRepair(t *testing.T) {
	schema := map[string]any{
		"type":       "object",
		"properties": map[string]any{"n": map[string]any{"type": "integer"}},
		"required":   []any{"n"},
	}
	usage := llmtest.Usage{Prompt: 100, Completion: 10}
	cases := []struct {
		name    string
		repairs int
		replies []llmtest.Reply
		wantErr bool
		want    any
		turns   int
	}{
		{"valid", 0, []llmtest.Reply{{Text: `{"n": 3}`, Usage: usage}}, false, map[string]any{"n": 3}, 1},
		{"invalid then repaired", 2, []llmtest.Reply{{Text: `{"n": "three"}`, Usage: usage}, {Text: `{"n": 3}`, Usage: usage}}, false, map[string]any{"n": 3}, 2},
		{"not JSON then repaired", 1, []llmtest.Reply{{Text: `n is 3`, Usage: usage}, {Text: `{"n": 3}`, Usage: usage}}, false, map[string]any{"n": 3}, 2},
		{"invalid and failed", 1, []llmtest.Reply{{Text: `{"n": "three"}`, Usage: usage}, {Text: `{"m": 3}`, Usage: usage}}, true, nil, 2},
		{"invalid with no repairs", 0, []llmtest.Reply{{Text: `{}`, Usage: usage}}, true, nil, 1},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			srv := llmtest.New(t)
			c, _ := testClient(t, srv)
			srv.Push(tc.replies...)
			resp, err := c.Complete(context.Background(), Request{
				Model: model("gpt-4.1-nano"), Messages: userSays("count"), OutputSchema: schema, RepairRetries: tc.repairs,
			})
			if (err != nil) != tc.wantErr {
				t.Fatalf("err = %v", err)
			}
			if err != nil && errclass.Of(err) != errclass.InvalidOutput {
				t.Errorf("class %q, want invalid_output: %v", errclass.Of(err), err)
			}
			if resp == nil {
				t.Fatal("no response")
			}
			if resp.Turns != tc.turns || srv.Calls() != tc.turns {
				t.Errorf("turns %d, server calls %d, want %d", resp.Turns, srv.Calls(), tc.turns)
			}
			if resp.Usage.Prompt != 100*tc.turns {
				t.Errorf("usage %+v does not add up %d turns", resp.Usage, tc.turns)
			}
			if !reflect.DeepEqual(resp.JSON, tc.want) {
				t.Errorf("JSON %#v, want %#v", resp.JSON, tc.want)
			}
			if tc.turns < 2 {
				return
			}
			// The repair turn carries the bad reply and the validation errors.
			msgs := srv.Requests()[1].Body["messages"].([]any)
			if len(msgs) != 3 {
				t.Fatalf("repair turn sent %d messages, want 3", len(msgs))
			}
			bad := msgs[1].(map[string]any)
			fix := msgs[2].(map[string]any)
			if bad["role"] != "assistant" || bad["content"] != tc.replies[0].Text {
				t.Errorf("repair turn does not replay the bad reply: %v", bad)
			}
			if fix["role"] != "user" || !strings.Contains(fix["content"].(string), "rejected") {
				t.Errorf("repair prompt %v", fix)
			}
		})
	}
}

func TestStreamingMatchesPlain(t *testing.T) {
	replies := []llmtest.Reply{
		{Text: "The answer is\nfour, clearly.", Usage: llmtest.Usage{Prompt: 12, Completion: 6, Cached: 2}},
		{Text: "Calling.", ToolCalls: []llmtest.ToolCall{llmtest.Call("ocr", map[string]any{"region": "left half"}), llmtest.Call("finish", map[string]any{"answer": 4})}, Usage: llmtest.Usage{Prompt: 5, Completion: 9}},
		{Text: "cut short", FinishReason: "length", Usage: llmtest.Usage{Prompt: 5, Completion: 2, Reasoning: 1}},
	}
	for _, api := range []string{APIChat, APIResponses} {
		for i, rep := range replies {
			srv := llmtest.New(t)
			srv.Push(rep, rep)
			c, _ := testClient(t, srv)
			m := model("gpt-4.1")
			m.API = api
			req := Request{Model: m, Messages: userSays("q"), Tools: []ToolSpec{{Name: "ocr"}, {Name: "finish"}}}
			plain, err := c.Complete(context.Background(), req)
			if err != nil {
				t.Fatalf("%s reply %d plain: %v", api, i, err)
			}
			var deltas []string
			req.OnDelta = func(s string) { deltas = append(deltas, s) }
			streamed, err := c.Complete(context.Background(), req)
			if err != nil {
				t.Fatalf("%s reply %d streamed: %v", api, i, err)
			}
			if !srv.Requests()[1].Stream {
				t.Errorf("%s reply %d: OnDelta did not stream", api, i)
			}
			if !reflect.DeepEqual(plain, streamed) {
				t.Errorf("%s reply %d: streamed response differs\nplain    %+v\nstreamed %+v", api, i, plain, streamed)
			}
			if strings.Join(deltas, "") != rep.Text || (strings.Contains(rep.Text, " ") && len(deltas) < 2) {
				t.Errorf("%s reply %d: deltas %q", api, i, deltas)
			}
		}
	}
}

func TestNoKeyForLocalServer(t *testing.T) {
	srv := llmtest.New(t)
	srv.Push(llmtest.Text("hi"))
	c := New(Options{Env: srv.Env("")})
	if _, err := c.Complete(context.Background(), Request{Model: model("llama3"), Messages: userSays("hi")}); err != nil {
		t.Fatal(err)
	}
	if h := srv.Last().Header.Get("Authorization"); h != "" {
		t.Errorf("Authorization %q sent with no key", h)
	}
}

func TestPerModelEndpoint(t *testing.T) {
	srv := llmtest.New(t)
	other := llmtest.New(t)
	other.Push(llmtest.Text("from the model's base_url"))
	env := func(name string) (string, bool) {
		switch name {
		case "OPENAI_BASE_URL":
			return srv.URL, true
		case "LOCAL_KEY":
			return "local-key", true
		}
		return "", false
	}
	c := New(Options{Env: env})
	m := &llmconf.Model{Name: "local", Model: "qwen", BaseURL: other.URL + "/", APIKeyEnv: "LOCAL_KEY"}
	resp, err := c.Complete(context.Background(), Request{Model: m, Messages: userSays("hi")})
	if err != nil {
		t.Fatal(err)
	}
	if resp.Text != "from the model's base_url" || srv.Calls() != 0 {
		t.Errorf("text %q, OPENAI_BASE_URL server got %d calls", resp.Text, srv.Calls())
	}
	if h := other.Last().Header.Get("Authorization"); h != "Bearer local-key" {
		t.Errorf("Authorization %q, want the api_key_env key", h)
	}
	if ep := ResolveEndpoint(m, env); ep.URL != other.URL || ep.URLFrom != "base_url" || ep.KeyEnv != "LOCAL_KEY" || !ep.HasKey {
		t.Errorf("ResolveEndpoint = %+v", ep)
	}
}

// A pipeline file that sends a model to another host must not receive the
// user's OPENAI_API_KEY unless it asks for it by name.
func TestOpenAIKeyStaysWithOpenAI(t *testing.T) {
	elsewhere := llmtest.New(t)
	elsewhere.Push(llmtest.Text("hi"), llmtest.Error(401, "key please"))
	env := func(name string) (string, bool) {
		if name == "OPENAI_API_KEY" {
			return fakeKey, true
		}
		return "", false
	}
	c := New(Options{Env: env, MaxAttempts: 1})
	m := &llmconf.Model{Name: "remote", Model: "x", BaseURL: elsewhere.URL}
	if _, err := c.Complete(context.Background(), Request{Model: m, Messages: userSays("hi")}); err != nil {
		t.Fatal(err)
	}
	if h := elsewhere.Last().Header.Get("Authorization"); h != "" {
		t.Errorf("OPENAI_API_KEY sent to the model's base_url: %q", h)
	}
	_, err := c.Complete(context.Background(), Request{Model: m, Messages: userSays("hi")})
	if err == nil || !strings.Contains(err.Error(), "check the model's api_key_env") {
		t.Errorf("401 without a key should point at api_key_env: %v", err)
	}
	if ep := ResolveEndpoint(&llmconf.Model{Model: "x", BaseURL: "https://api.openai.com/v1"}, env); ep.KeyEnv != "OPENAI_API_KEY" || !ep.HasKey {
		t.Errorf("OpenAI's own base_url should get OPENAI_API_KEY: %+v", ep)
	}
}

func TestImageURL(t *testing.T) {
	dir := t.TempDir()
	os.WriteFile(filepath.Join(dir, "a.jpg"), []byte("\xff\xd8\xff\xe0 jpeg"), 0o644)
	os.WriteFile(filepath.Join(dir, "noext"), []byte("GIF89a...."), 0o644)
	os.WriteFile(filepath.Join(dir, "notes.txt"), []byte("hello"), 0o644)
	cases := []struct{ ref, prefix, err string }{
		{"a.jpg", "data:image/jpeg;base64,", ""},
		{"noext", "data:image/gif;base64,", ""},
		{"https://example.com/x.png", "https://example.com/x.png", ""},
		{"data:image/png;base64,AAAA", "data:image/png;base64,AAAA", ""},
		{"notes.txt", "", "not an image"},
		{"missing.png", "", "no such file"},
	}
	for _, tc := range cases {
		got, err := ImageURL(tc.ref, readIn(dir))
		if tc.err != "" {
			if err == nil || !strings.Contains(err.Error(), tc.err) {
				t.Errorf("%s: err %v, want %q", tc.ref, err, tc.err)
			}
			continue
		}
		if err != nil || !strings.HasPrefix(got, tc.prefix) {
			t.Errorf("%s: %q, %v", tc.ref, got, err)
		}
	}
}

func readIn(dir string) func(string) ([]byte, error) {
	return func(name string) ([]byte, error) { return os.ReadFile(filepath.Join(dir, name)) }
}

func TestMaxTokensParameter(t *testing.T) {
	c := &call{API: APIChat, Model: "gpt-5", MaxTokens: 64, Messages: userSays("x")}
	for _, openaiHost := range []bool{true, false} {
		b, err := json.Marshal(chatParams(c, &endpoint{maxCompletionTokens: openaiHost}))
		if err != nil {
			t.Fatal(err)
		}
		want := `"max_tokens":64`
		if openaiHost {
			want = `"max_completion_tokens":64`
		}
		if !strings.Contains(string(b), want) {
			t.Errorf("openai host %v: %s lacks %s", openaiHost, b, want)
		}
	}
}
