package llm

import (
	"context"
	"os"
	"path/filepath"
	"reflect"
	"regexp"
	"strings"
	"testing"

	"github.com/flowrun/flowrun/errclass"
	"github.com/flowrun/flowrun/llm/llmtest"
	"github.com/flowrun/flowrun/llmconf"

	"github.com/flowrun/flowrun/redact"
)

type outcome struct {
	Resp  *Response
	Class errclass.Class
	Err   string
}

var judgeSchema = map[string]any{
	"type":       "object",
	"properties": map[string]any{"verdict": map[string]any{"enum": []any{"yes", "no"}}},
	"required":   []any{"verdict"},
}

// scriptedRun makes the calls of a small pipeline run and returns what
// each gave.
func scriptedRun(t *testing.T, c *Client) []outcome {
	t.Helper()
	ctx := context.Background()
	chat := model("gpt-4.1-mini")
	vision := &llmconf.Model{Name: "vision", Model: "gpt-4.1", API: "responses", ReasoningEffort: "low"}
	tools := []ToolSpec{
		{Name: "ocr", Parameters: map[string]any{"type": "object", "properties": map[string]any{"region": map[string]any{"type": "string"}}}},
		{Name: "finish", Parameters: map[string]any{"type": "object", "properties": map[string]any{"answer": map[string]any{"type": "string"}}}},
	}
	step1 := []Message{{Role: RoleSystem, Text: "Solve it.\nUse tools."}, {Role: RoleUser, Text: "What does the sign say?"}}
	var out []outcome
	add := func(resp *Response, err error) {
		o := outcome{Resp: resp}
		if err != nil {
			o.Class, o.Err = errclass.Of(err), strings.TrimSuffix(err.Error(), " (replayed)")
		}
		out = append(out, o)
	}
	var streamed strings.Builder
	add(c.Complete(ctx, Request{Key: Key{Node: "describe", Iteration: 1, Attempt: 1}, Model: chat,
		Messages: []Message{{Role: RoleUser, Text: "Describe.", Images: []string{"data:image/png;base64,iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mNk"}}},
		OnDelta:  func(s string) { streamed.WriteString(s) }}))
	add(c.Complete(ctx, Request{Key: Key{Node: "judge", Iteration: 1, Attempt: 1}, Model: chat,
		Messages: userSays("Is it red?"), OutputSchema: judgeSchema, RepairRetries: 1}))
	// An agent: a malformed call, the same request again, then a tool turn.
	add(c.Complete(ctx, Request{Key: Key{Node: "refine/agent", Iteration: 1, Attempt: 1}, Model: chat, Messages: step1, Tools: tools}))
	second, err := c.Complete(ctx, Request{Key: Key{Node: "refine/agent", Iteration: 1, Attempt: 1}, Model: chat, Messages: step1, Tools: tools})
	add(second, err)
	if err == nil {
		step2 := append(append([]Message(nil), step1...), second.Message(),
			Message{Role: RoleTool, ToolCallID: second.ToolCalls[0].ID, Text: `{"text":"STOP"}`})
		add(c.Complete(ctx, Request{Key: Key{Node: "refine/agent", Iteration: 1, Attempt: 1}, Model: chat, Messages: step2, Tools: tools,
			ToolChoice: ToolChoice{Tools: []string{"finish"}}}))
	}
	add(c.Complete(ctx, Request{Key: Key{Node: "refine/vision", Iteration: 2, Attempt: 1}, Model: vision,
		Messages: userSays("Caption it."), Temperature: ptr(0.2)}))
	add(c.Complete(ctx, Request{Key: Key{Node: "broken", Iteration: 1, Attempt: 1}, Model: chat, Messages: userSays("fail")}))
	out = append(out, outcome{Err: "streamed: " + streamed.String()})
	return out
}

func scriptServer(srv *llmtest.Server) {
	u := llmtest.Usage{Prompt: 120, Completion: 30, Cached: 20}
	srv.Push(
		llmtest.Reply{Text: "A red sign with white letters.", Usage: u},
		llmtest.Reply{Text: `{"verdict": "maybe"}`, Usage: u},
		llmtest.Reply{Text: `{"verdict": "yes"}`, Usage: u},
		llmtest.Reply{ToolCalls: []llmtest.ToolCall{{Name: "ocr", Arguments: `{"region": "to`}}, FinishReason: "length", Usage: u},
		llmtest.Reply{ToolCalls: []llmtest.ToolCall{llmtest.Call("ocr", map[string]any{"region": "top"})}, Usage: u},
		llmtest.Reply{ToolCalls: []llmtest.ToolCall{llmtest.Call("finish", map[string]any{"answer": "STOP"})}, Usage: u},
		llmtest.Reply{Text: "A stop sign.", Usage: llmtest.Usage{Prompt: 300, Completion: 40, Reasoning: 12}},
		llmtest.Error(400, "Unsupported parameter."),
	)
}

func TestRecordThenReplay(t *testing.T) {
	srv := llmtest.New(t)
	scriptServer(srv)
	rec := NewCassette()
	live, _ := testClient(t, srv, func(o *Options) { o.Record = rec })
	recorded := scriptedRun(t, live)
	if srv.Calls() != 8 {
		t.Fatalf("recording made %d calls, want 8", srv.Calls())
	}
	if recorded[1].Resp.Turns != 2 || recorded[3].Resp.ToolCalls[0].ArgsError != "" || recorded[2].Resp.ToolCalls[0].ArgsError == "" || recorded[6].Class != errclass.Critical {
		t.Fatalf("the scripted run did not go as planned: %+v", recorded)
	}
	path := filepath.Join(t.TempDir(), "run.cassette.yaml")
	if err := rec.WriteFile(path); err != nil {
		t.Fatal(err)
	}
	srv.Close()

	file, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	text := string(file)
	for _, want := range []string{
		"version: 1", "node: describe", "node: refine/agent", "iteration: 2", "repeat: 1",
		"api: responses", "reasoning_effort: low", "temperature: 0.2",
		"data:image/png;base64,… (", "sha256 ", // images abbreviated
		"Solve it.\n", // multi-line text as a block
		"finish_reason: tool_calls", "prompt: 120", "class: critical",
	} {
		if !strings.Contains(text, want) {
			t.Errorf("cassette lacks %q", want)
		}
	}
	for _, never := range []string{fakeKey, "Bearer", "Authorization", "iVBORw0KGgoAAAANSUhEUg"} {
		if strings.Contains(text, never) {
			t.Errorf("cassette contains %q", never)
		}
	}

	cas, err := LoadCassette(path)
	if err != nil {
		t.Fatal(err)
	}
	none := func(string) (string, bool) { return "", false }
	replayer := New(Options{Env: none, Replay: cas})
	replayed := scriptedRun(t, replayer)
	if !reflect.DeepEqual(recorded, replayed) {
		for i := range max(len(recorded), len(replayed)) {
			var a, b outcome
			if i < len(recorded) {
				a = recorded[i]
			}
			if i < len(replayed) {
				b = replayed[i]
			}
			if !reflect.DeepEqual(a, b) {
				t.Errorf("call %d differs on replay:\nrecorded %+v %+v\nreplayed %+v %+v", i, a, a.Resp, b, b.Resp)
			}
		}
	}
}

func TestReplayMiss(t *testing.T) {
	srv := llmtest.New(t)
	scriptServer(srv)
	rec := NewCassette()
	live, _ := testClient(t, srv, func(o *Options) { o.Record = rec })
	scriptedRun(t, live)
	path := filepath.Join(t.TempDir(), "sir.cassette.yaml")
	if err := rec.WriteFile(path); err != nil {
		t.Fatal(err)
	}
	cas, err := LoadCassette(path)
	if err != nil {
		t.Fatal(err)
	}
	c := New(Options{Env: func(string) (string, bool) { return "", false }, Replay: cas})
	chat := model("gpt-4.1-mini")
	cases := []struct {
		name string
		req  Request
		want []string
	}{
		{"prompt changed", Request{Key: Key{Node: "judge", Iteration: 1, Attempt: 1}, Model: chat, Messages: userSays("Is it blue?"), OutputSchema: judgeSchema, RepairRetries: 1},
			[]string{`cassette ` + path, `node "judge" (iteration 1, attempt 1)`, `messages[0].text: recorded "Is it red?", now "Is it blue?"`}},
		{"model changed", Request{Key: Key{Node: "broken", Iteration: 1, Attempt: 1}, Model: model("gpt-4o"), Messages: userSays("fail")},
			[]string{`node "broken"`, `model: recorded "gpt-4.1-mini", now "gpt-4o"`}},
		{"unknown node", Request{Key: Key{Node: "nowhere", Iteration: 1, Attempt: 1}, Model: chat, Messages: userSays("x")},
			[]string{`node "nowhere"`, `no entries for this node, only for "broken", "describe", "judge"`}},
		{"other iteration", Request{Key: Key{Node: "broken", Iteration: 3, Attempt: 1}, Model: chat, Messages: userSays("fail")},
			[]string{`(iteration 3, attempt 1)`, `the same request was recorded at iteration 1, attempt 1`}},
		{"called more often than recorded", Request{Key: Key{Node: "broken", Iteration: 1, Attempt: 1}, Model: chat, Messages: userSays("fail")},
			nil}, // first call replays the recorded 400; see below
	}
	for _, tc := range cases {
		_, err := c.Complete(context.Background(), tc.req)
		if tc.want == nil {
			if errclass.Of(err) != errclass.Critical || !strings.Contains(err.Error(), "400 Bad Request") {
				t.Errorf("%s: replayed error %v", tc.name, err)
			}
			_, err = c.Complete(context.Background(), tc.req)
			tc.want = []string{"this request was recorded 1 time(s) here and this is call 2"}
		}
		if errclass.Of(err) != errclass.Critical {
			t.Errorf("%s: class %q: %v", tc.name, errclass.Of(err), err)
			continue
		}
		for _, w := range tc.want {
			if !strings.Contains(err.Error(), w) {
				t.Errorf("%s: %q\ndoes not contain %q", tc.name, err, w)
			}
		}
	}
}

func TestRequestHash(t *testing.T) {
	base := func() *Request {
		return &Request{
			Key:   Key{Node: "n", Iteration: 1, Attempt: 1},
			Model: &llmconf.Model{Name: "default", Model: "gpt-4.1", Temperature: ptr(0.0)},
			Messages: []Message{
				{Role: RoleUser, Text: "hi"},
				{Role: RoleAssistant, ToolCalls: []ToolCall{{ID: "c1", Name: "f", Arguments: `{"a":1}`, Args: map[string]any{"a": 1}}}},
			},
			Tools:        []ToolSpec{{Name: "f", Parameters: map[string]any{"type": "object", "properties": map[string]any{"a": map[string]any{}, "b": map[string]any{}}}}},
			OutputSchema: map[string]any{"type": "object", "required": []any{"x"}},
		}
	}
	hash := func(r *Request) string {
		cl, err := newCall(r, r.Messages, r.OutputSchema)
		if err != nil {
			t.Fatal(err)
		}
		return cl.hash()
	}
	h := hash(base())
	same := []func(*Request){
		func(r *Request) { r.Key = Key{Node: "other", Iteration: 9, Attempt: 3} },
		func(r *Request) { r.OnDelta = func(string) {}; r.Observe = func(Exchange) {} },
		func(r *Request) { r.Messages[1].ToolCalls[0].Args = map[string]any{"a": 1.0} }, // after a JSON round trip
		func(r *Request) {
			r.Model.Name, r.Model.BaseURL, r.Model.APIKeyEnv, r.Model.RPM = "renamed", "http://x", "K", 5
		},
	}
	for i, f := range same {
		r := base()
		f(r)
		if got := hash(r); got != h {
			t.Errorf("change %d altered the hash", i)
		}
	}
	differ := []func(*Request){
		func(r *Request) { r.Messages[0].Text = "hi!" },
		func(r *Request) { r.Temperature = ptr(0.5) },
		func(r *Request) { r.Model.Model = "gpt-4o" },
		func(r *Request) { r.Tools[0].Description = "d" },
		func(r *Request) { r.OutputSchema = map[string]any{"type": "object"} },
		func(r *Request) { r.ToolChoice.Mode = "required" },
	}
	for i, f := range differ {
		r := base()
		f(r)
		if got := hash(r); got == h {
			t.Errorf("change %d kept the hash", i)
		}
	}
}

func TestLoadCassetteErrors(t *testing.T) {
	dir := t.TempDir()
	cases := map[string]string{
		"version.yaml": "version: 2\nentries: []\n",
		"broken.yaml":  "version: 1\nentries: [\n",
		"entry.yaml":   "version: 1\nentries:\n  - node: a\n    request: {api: chat, model: m, messages: []}\n",
	}
	for name, body := range cases {
		p := filepath.Join(dir, name)
		os.WriteFile(p, []byte(body), 0o644)
		if _, err := LoadCassette(p); err == nil || !strings.Contains(err.Error(), p) {
			t.Errorf("%s: err %v", name, err)
		}
	}
	if _, err := LoadCassette(filepath.Join(dir, "missing.yaml")); err == nil {
		t.Error("missing file loaded")
	}
}

const handWritten = `version: 1
entries:
  - node: judge
    iteration: 1
    attempt: 1
    response: {text: '{"verdict": "no"}'}
  - node: judge
    iteration: 1
    attempt: 1
    response: {text: '{"verdict": "yes"}', usage: {prompt: 10, completion: 2}}
  - node: refine/agent
    iteration: 2
    attempt: 1
    response:
      tool_calls: [{id: c1, name: finish, arguments: '{"answer": "STOP"}'}]
      finish_reason: tool_calls
  - node: broken
    iteration: 1
    attempt: 1
    error: {class: rate_limit, status: 429, message: slow down}
`

func TestHandWrittenCassetteReplaysWithoutHashes(t *testing.T) {
	path := filepath.Join(t.TempDir(), "hand.cassette.yaml")
	if err := os.WriteFile(path, []byte(handWritten), 0o644); err != nil {
		t.Fatal(err)
	}
	cas, err := LoadCassette(path)
	if err != nil {
		t.Fatal(err)
	}
	c := New(Options{Env: func(string) (string, bool) { return "", false }, Replay: cas})
	ctx := context.Background()
	chat := model("gpt-4.1-mini")
	judge := Key{Node: "judge", Iteration: 1, Attempt: 1}
	// Two different requests under one key get the entries in file order.
	first, err := c.Complete(ctx, Request{Key: judge, Model: chat, Messages: userSays("Is it red?"), OutputSchema: judgeSchema})
	if err != nil || first.JSON.(map[string]any)["verdict"] != "no" {
		t.Fatalf("first judge call: %+v, %v", first, err)
	}
	second, err := c.Complete(ctx, Request{Key: judge, Model: chat, Messages: userSays("Anything at all"), OutputSchema: judgeSchema})
	if err != nil || second.JSON.(map[string]any)["verdict"] != "yes" || second.Usage.Prompt != 10 {
		t.Fatalf("second judge call: %+v, %v", second, err)
	}
	tools := []ToolSpec{{Name: "finish", Parameters: map[string]any{"type": "object"}}}
	agent, err := c.Complete(ctx, Request{Key: Key{Node: "refine/agent", Iteration: 2, Attempt: 1}, Model: chat, Messages: userSays("go"), Tools: tools})
	if err != nil || len(agent.ToolCalls) != 1 || agent.ToolCalls[0].Name != "finish" || agent.ToolCalls[0].Args.(map[string]any)["answer"] != "STOP" {
		t.Fatalf("agent call: %+v, %v", agent, err)
	}
	_, err = c.Complete(ctx, Request{Key: Key{Node: "broken", Iteration: 1, Attempt: 1}, Model: chat, Messages: userSays("x")})
	if errclass.Of(err) != errclass.RateLimit || !strings.Contains(err.Error(), "slow down") {
		t.Fatalf("broken: %v", err)
	}
}

// TestCassetteMissSaysWhatDiffers triggers every way a replay can miss and
// checks that the message names what differs, never ending at "differs in".
func TestCassetteMissSaysWhatDiffers(t *testing.T) {
	srv := llmtest.New(t)
	srv.Push(llmtest.Reply{Text: "recorded"})
	rec := NewCassette()
	live, _ := testClient(t, srv, func(o *Options) { o.Record = rec })
	chat := model("gpt-4.1-mini")
	ctx := context.Background()
	recorded := Request{Key: Key{Node: "describe", Iteration: 1, Attempt: 1}, Model: chat, Messages: userSays("Describe it.")}
	if _, err := live.Complete(ctx, recorded); err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	recPath := filepath.Join(dir, "rec.yaml")
	if err := rec.WriteFile(recPath); err != nil {
		t.Fatal(err)
	}
	text, err := os.ReadFile(recPath)
	if err != nil {
		t.Fatal(err)
	}
	hashRE := regexp.MustCompile(`hash: [0-9a-f]+`)
	write := func(name, body string) *Client {
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, []byte(body), 0o644); err != nil {
			t.Fatal(err)
		}
		cas, err := LoadCassette(p)
		if err != nil {
			t.Fatal(err)
		}
		return New(Options{Env: func(string) (string, bool) { return "", false }, Replay: cas})
	}
	recordedCas := func() *Client { return write("rec.yaml", string(text)) }
	at := func(node string, it, att int, say string) Request {
		return Request{Key: Key{Node: node, Iteration: it, Attempt: att}, Model: chat, Messages: userSays(say)}
	}
	cases := []struct {
		name  string
		c     *Client
		calls []Request // the last one misses
		want  string
	}{
		{"empty", write("empty.yaml", "version: 1\nentries: []\n"), []Request{recorded}, "the cassette is empty"},
		{"other node", recordedCas(), []Request{at("judge", 1, 1, "Describe it.")}, `no entries for this node, only for "describe"`},
		{"called again", recordedCas(), []Request{recorded, recorded}, "this request was recorded 1 time(s) here and this is call 2"},
		{"other iteration", recordedCas(), []Request{at("describe", 2, 1, "Describe it.")}, "the same request was recorded at iteration 1, attempt 1"},
		{"prompt changed", recordedCas(), []Request{at("describe", 1, 1, "Describe that.")},
			`differs in messages[0].text: recorded "Describe it.", now "Describe that."`},
		{"prompt and attempt changed", recordedCas(), []Request{at("describe", 1, 2, "Describe that.")},
			`differs in attempt: recorded 1, now 2; messages[0].text: recorded "Describe it.", now "Describe that."`},
		{"hash edited", write("edited.yaml", hashRE.ReplaceAllString(string(text), "hash: 0000000000000000")), []Request{recorded},
			"differs in the request hash, though nothing the cassette shows differs"},
		{"hand-written used up", write("hand1.yaml", "version: 1\nentries:\n  - {node: describe, iteration: 1, attempt: 1, response: {text: one}}\n"),
			[]Request{recorded, recorded}, "it has 1 entries without a hash here, each answering one call, and this is call 2"},
		{"hand-written at another iteration", write("hand2.yaml", "version: 1\nentries:\n  - {node: describe, iteration: 1, attempt: 1, response: {text: one}}\n"),
			[]Request{at("describe", 3, 2, "x")}, "differs in iteration: recorded 1, now 3; attempt: recorded 1, now 2"},
	}
	for _, tc := range cases {
		var err error
		for i, r := range tc.calls {
			_, err = tc.c.Complete(ctx, r)
			if i < len(tc.calls)-1 && err != nil {
				t.Fatalf("%s: call %d: %v", tc.name, i+1, err)
			}
		}
		if err == nil || errclass.Of(err) != errclass.Critical {
			t.Errorf("%s: want a critical miss, got %v", tc.name, err)
			continue
		}
		msg := err.Error()
		if !strings.Contains(msg, tc.want) {
			t.Errorf("%s: %q\ndoes not contain %q", tc.name, msg, tc.want)
		}
		if i := strings.Index(msg, "differs in"); i >= 0 && strings.TrimSpace(strings.TrimPrefix(msg[i:], "differs in")) == "" {
			t.Errorf("%s: the message ends at differs in: %q", tc.name, msg)
		}
	}
}

// A replay mismatch shows the text around the first difference, cut to
// start 20 characters before it: a key before the difference, with the
// cut at every offset of it, leaves no piece of it (four characters or
// more).
func TestMismatchCutLeavesNoPieceOfTheKey(t *testing.T) {
	redact.Add(fakeKey)
	for gap := 0; gap <= 25; gap++ {
		x := "key " + fakeKey + strings.Repeat(" ", gap) + "A"
		y := "key " + fakeKey + strings.Repeat(" ", gap) + "B"
		gx, gy := aroundDiff(x, y)
		for i := 0; i+4 <= len(fakeKey); i++ {
			if strings.Contains(gx+gy, fakeKey[i:i+4]) {
				t.Fatalf("gap %d: %s / %s hold %q of the key", gap, gx, gy, fakeKey[i:i+4])
			}
		}
	}
}

// A replay miss over a difference no quoting shows (a line break sent as
// \r\n, a trailing space, a Cyrillic letter for a Latin one) names the
// characters where the two texts part; a visible one is quoted alone.
func TestMismatchShowsInvisibleDifferences(t *testing.T) {
	for _, c := range []struct{ recorded, now, wantRecorded, wantNow string }{
		{"first\nsecond", "first\r\nsecond", `"first\nsecond" (character 6 is U+000A '\n')`, `"first\r\nsecond" (character 6 is U+000D '\r')`},
		{"the end", "the end ", `"the end" (ends after 7 characters)`, `"the end " (character 8 is U+0020 ' ')`},
		{"a cat", "a cаt", `"a cat" (character 4 is U+0061 'a')`, `"a cаt" (character 4 is U+0430 'а')`},
		{"tab\there", "tab here", `"tab\there" (character 4 is U+0009 '\t')`, `"tab here" (character 4 is U+0020 ' ')`},
		{"Is it red?", "Is it blue?", `"Is it red?"`, `"Is it blue?"`},
	} {
		gotRecorded, gotNow := aroundDiff(c.recorded, c.now)
		if gotRecorded != c.wantRecorded || gotNow != c.wantNow {
			t.Errorf("%q against %q:\n got %s, %s\nwant %s, %s", c.recorded, c.now, gotRecorded, gotNow, c.wantRecorded, c.wantNow)
		}
	}
}
