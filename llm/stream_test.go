package llm

import (
	"context"
	"fmt"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/flowrun/flowrun/errclass"
	"github.com/flowrun/flowrun/llm/llmtest"
	"github.com/flowrun/flowrun/llmconf"
)

// The model's stream: true and false send streamed and plain requests, and
// both give the same Response (text, tool calls, structured output) and
// the same error class.
func TestStreamSettingSameResponse(t *testing.T) {
	schema := map[string]any{"type": "object", "properties": map[string]any{"n": map[string]any{"type": "integer"}}, "required": []any{"n"}}
	ok := []struct {
		name   string
		reply  llmtest.Reply
		schema map[string]any
	}{
		{"text", llmtest.Reply{Text: "four, clearly", Usage: llmtest.Usage{Prompt: 9, Completion: 3}}, nil},
		{"tool calls", llmtest.Reply{ToolCalls: []llmtest.ToolCall{llmtest.Call("add", map[string]any{"a": 2, "b": 2}), llmtest.Call("finish", map[string]any{"answer": 4})}, Usage: llmtest.Usage{Prompt: 9, Completion: 12}}, nil},
		{"structured", llmtest.Reply{Text: `{"n": 4}`, Usage: llmtest.Usage{Prompt: 9, Completion: 4, Cached: 3}}, schema},
	}
	// Only the timeout case has a timeout, and its server answers only
	// after the client has given up: a loaded machine can make any reply
	// slower than a short timeout, but cannot make this one faster.
	fail := []struct {
		name    string
		reply   llmtest.Reply
		timeout time.Duration
		class   errclass.Class
	}{
		{"500", llmtest.Error(500, "boom"), 0, errclass.Server},
		{"429", llmtest.Error(429, "slow down"), 0, errclass.RateLimit},
		{"401", llmtest.Error(401, "bad key"), 0, errclass.Critical},
		{"in-band error", llmtest.InStream("server_error", "server_error", "broke"), 0, errclass.Server},
		{"reset", llmtest.Reply{Reset: true}, 0, errclass.Connection},
		{"timeout", llmtest.Reply{Delay: time.Hour, Text: "late"}, 50 * time.Millisecond, errclass.Timeout},
		{"invalid output", llmtest.Text("not json"), 0, errclass.InvalidOutput},
	}
	for _, api := range []string{APIChat, APIResponses} {
		got := map[string]map[string]*Response{}
		for _, mode := range []string{"true", "false"} {
			for _, tc := range ok {
				srv := llmtest.New(t)
				srv.Push(tc.reply)
				c, _ := testClient(t, srv)
				m := &llmconf.Model{Name: "default", Model: "gpt-4.1", API: api, Stream: mode}
				resp, err := c.Complete(context.Background(), Request{Model: m, Messages: userSays("q"), OutputSchema: tc.schema,
					Tools: []ToolSpec{{Name: "add"}, {Name: "finish"}}})
				if err != nil {
					t.Fatalf("%s stream=%s %s: %v", api, mode, tc.name, err)
				}
				if srv.Last().Stream != (mode == "true") {
					t.Fatalf("%s stream=%s %s: request streamed=%v", api, mode, tc.name, srv.Last().Stream)
				}
				if got[tc.name] == nil {
					got[tc.name] = map[string]*Response{}
				}
				got[tc.name][mode] = resp
			}
			for _, tc := range fail {
				srv := llmtest.New(t)
				srv.Push(tc.reply)
				c, _ := testClient(t, srv, func(o *Options) { o.MaxAttempts = 1 })
				m := &llmconf.Model{Name: "default", Model: "gpt-4.1", API: api, Stream: mode, Timeout: tc.timeout}
				req := Request{Model: m, Messages: userSays("q")}
				if tc.class == errclass.InvalidOutput {
					req.OutputSchema = schema
				}
				_, err := c.Complete(context.Background(), req)
				if errclass.Of(err) != tc.class {
					t.Errorf("%s stream=%s %s: class %q, want %q (%v)", api, mode, tc.name, errclass.Of(err), tc.class, err)
				}
			}
		}
		for name, by := range got {
			if !reflect.DeepEqual(by["true"], by["false"]) {
				t.Errorf("%s %s: streamed and plain responses differ\nstreamed %+v\nplain    %+v", api, name, by["true"], by["false"])
			}
			if len(by["true"].ToolCalls) == 0 && name == "tool calls" {
				t.Errorf("%s: tool calls lost", api)
			}
		}
	}
}

// stream: auto streams for a live view (OnDelta) or a node timeout shorter
// than the expected reply, else sends plain requests.
func TestStreamAuto(t *testing.T) {
	cases := []struct {
		name    string
		onDelta bool
		timeout time.Duration
		max     int
		want    bool
	}{
		{"nobody watching, no timeout", false, 0, 0, false},
		{"live view", true, 0, 0, true},
		{"timeout shorter than 4096 tokens at 50/s", false, 30 * time.Second, 0, true},
		{"timeout longer than the reply", false, 30 * time.Second, 1000, false},
	}
	for _, tc := range cases {
		srv := llmtest.New(t)
		srv.Push(llmtest.Text("hello there"))
		c, _ := testClient(t, srv)
		var deltas string
		req := Request{Model: model("gpt-4.1"), Messages: userSays("q"), Timeout: tc.timeout, MaxTokens: tc.max}
		if tc.onDelta {
			req.OnDelta = func(s string) { deltas += s }
		}
		if _, err := c.Complete(context.Background(), req); err != nil {
			t.Fatal(err)
		}
		if srv.Last().Stream != tc.want {
			t.Errorf("%s: streamed=%v, want %v", tc.name, srv.Last().Stream, tc.want)
		}
		if tc.onDelta && deltas != "hello there" {
			t.Errorf("%s: deltas %q", tc.name, deltas)
		}
	}
	srv := llmtest.New(t)
	srv.Push(llmtest.Text("whole"))
	c, _ := testClient(t, srv)
	m := model("gpt-4.1")
	m.Stream = "false"
	var deltas []string
	if _, err := c.Complete(context.Background(), Request{Model: m, Messages: userSays("q"), OnDelta: func(s string) { deltas = append(deltas, s) }}); err != nil {
		t.Fatal(err)
	}
	if srv.Last().Stream || !reflect.DeepEqual(deltas, []string{"whole"}) {
		t.Errorf("stream: false with a live view: streamed=%v deltas %q, want a plain request and the text at once", srv.Last().Stream, deltas)
	}
}

// A server error on a streamed request that offered tools says how to
// turn streaming off, for servers that cannot stream tool calls; plain
// requests and requests without tools do not.
func TestStreamedToolsErrorSuggestsStreamFalse(t *testing.T) {
	const hint = `if this server cannot stream tool calls, set stream: false on model "default"`
	for _, tc := range []struct {
		stream string
		tools  []ToolSpec
		hint   bool
	}{
		{"true", []ToolSpec{{Name: "add"}}, true},
		{"false", []ToolSpec{{Name: "add"}}, false},
		{"true", nil, false},
	} {
		srv := llmtest.New(t)
		srv.Push(llmtest.Reply{Status: 500, Body: `{"error":"TypeError","message":"Cannot read properties of null (reading 'length')","status":500}`})
		c, _ := testClient(t, srv, func(o *Options) { o.MaxAttempts = 1 })
		m := &llmconf.Model{Name: "default", Model: "gpt-4.1", Stream: tc.stream}
		_, err := c.Complete(context.Background(), Request{Model: m, Messages: userSays("q"), Tools: tc.tools})
		if errclass.Of(err) != errclass.Server || strings.Contains(fmt.Sprint(err), hint) != tc.hint {
			t.Errorf("stream=%s tools=%d: %v\nwant class server, hint %v", tc.stream, len(tc.tools), err, tc.hint)
		}
	}
}
