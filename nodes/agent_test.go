package nodes_test

import (
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"net/url"
	"reflect"
	"slices"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/flowrun/flowrun/dsl"
	"github.com/flowrun/flowrun/errclass"
	"github.com/flowrun/flowrun/llm"
	"github.com/flowrun/flowrun/llm/llmtest"
	"github.com/flowrun/flowrun/runtime"
	"github.com/flowrun/flowrun/runtime/runtimetest"
)

// agentTools declares a pipeline tool (lookup), an llm tool (summarize)
// and two finish tools; agentFiles holds what they refer to.
const agentTools = `
version: 1
name: t
models: {default: {model: gpt-4.1-mini}}
tools:
  lookup:
    description: Look a word up.
    parameters: {type: object, properties: {word: {type: string}}, required: [word]}
    pipeline: lookup.yaml
  summarize:
    description: Summarise a text.
    parameters: {type: object, properties: {text: {type: string}}, required: [text]}
    llm:
      system: You summarise.
      prompt: "Summarise: ${{ inputs.text }}"
      output_schema: {type: object, properties: {summary: {type: string}}, required: [summary]}
  answer:
    description: Give the final answer.
    parameters: {type: object, properties: {answer: {type: string}}, required: [answer]}
  give_up:
    description: Say why there is no answer.
    parameters: {type: object, properties: {reason: {type: string}}, required: [reason]}
`

var agentFiles = map[string]string{
	"lookup.yaml": `
version: 1
name: lookup
inputs: {word: {type: string}}
state: {definition: ""}
nodes:
  - id: define
    set: {definition: '"the meaning of " + inputs.word'}
outputs: {definition: state.definition}
`,
	"notes.txt": "flow: a steady stream",
}

// messages returns the chat messages a request sent.
func messages(t *testing.T, r llmtest.Request) []map[string]any {
	t.Helper()
	raw, _ := r.Body["messages"].([]any)
	out := make([]map[string]any, len(raw))
	for i, m := range raw {
		out[i] = m.(map[string]any)
	}
	return out
}

// toolNames lists the function tools a request offered.
func toolNames(r llmtest.Request) []string {
	var out []string
	ts, _ := r.Body["tools"].([]any)
	for _, t := range ts {
		out = append(out, t.(map[string]any)["function"].(map[string]any)["name"].(string))
	}
	return out
}

// toolReplies returns the contents of a request's tool messages, by call id.
func toolReplies(t *testing.T, r llmtest.Request) map[string]any {
	t.Helper()
	out := map[string]any{}
	for _, m := range messages(t, r) {
		if m["role"] != "tool" {
			continue
		}
		var v any
		if err := json.Unmarshal([]byte(llmtest.MessageText(m["content"])), &v); err != nil {
			t.Fatalf("tool message %v is not JSON: %v", m, err)
		}
		out[m["tool_call_id"].(string)] = v
	}
	return out
}

func toolEvents(rec *runtimetest.Events) []runtime.ToolCall {
	var out []runtime.ToolCall
	for _, e := range rec.All() {
		if e.Type == runtime.EventToolCall {
			out = append(out, *e.Tool)
		}
	}
	return out
}

func asJSON(t *testing.T, v any) string {
	t.Helper()
	b, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

func withUsage(r llmtest.Reply) llmtest.Reply {
	r.Usage = llmtest.Usage{Prompt: 100, Completion: 10}
	return r
}

func TestAgentUsesTwoToolsThenFinishes(t *testing.T) {
	srv := llmtest.New(t)
	srv.Push(
		withUsage(llmtest.Calls(llmtest.Call("lookup", map[string]any{"word": "flow"}))),
		withUsage(llmtest.Reply{Text: "Let me check the notes.", ToolCalls: []llmtest.ToolCall{llmtest.Call("read_file", map[string]any{"path": "notes.txt"})}}),
		withUsage(llmtest.Calls(llmtest.Call("answer", map[string]any{"answer": "a steady stream"}))),
	)
	p := load(t, agentTools+`
nodes:
  - id: solve
    agent:
      prompt: What does "flow" mean?
      tools: [lookup, read_file]
      finish: [answer, give_up]
      max_steps: 5
outputs: {out: nodes.solve}
`, agentFiles)
	res, rec := run(t, p, modelKinds(srv, llm.Options{}), nil)
	mustComplete(t, res)

	out := res.Outputs["out"].(map[string]any)
	if want := map[string]any{"name": "answer", "args": map[string]any{"answer": "a steady stream"}}; !reflect.DeepEqual(out["finish"], want) {
		t.Errorf("finish = %v, want %v", out["finish"], want)
	}
	if out["steps"] != 3 || out["text"] != "Let me check the notes." {
		t.Errorf("steps = %v, text = %q", out["steps"], out["text"])
	}
	usage := out["usage"].(map[string]any)
	if usage["prompt"] != 300 || usage["completion"] != 30 || out["cost_usd"].(float64) <= 0 {
		t.Errorf("usage = %v, cost = %v", usage, out["cost_usd"])
	}

	reqs := srv.Requests()
	if len(reqs) != 3 {
		t.Fatalf("%d requests, want 3", len(reqs))
	}
	if got := toolNames(reqs[0]); !reflect.DeepEqual(got, []string{"lookup", "read_file", "answer", "give_up"}) {
		t.Errorf("tools offered = %v", got)
	}
	for i, r := range reqs[:2] {
		if tc, ok := r.Body["tool_choice"]; ok {
			t.Errorf("request %d: tool_choice %v, want the model's choice", i+1, tc)
		}
	}
	if got := asJSON(t, toolReplies(t, reqs[1])); got != `{"call_1_1":{"definition":"the meaning of flow"}}` {
		t.Errorf("lookup's reply = %s", got)
	}
	if got := toolReplies(t, reqs[2])["call_2_1"]; got != "flow: a steady stream" {
		t.Errorf("read_file's reply = %v", got)
	}

	calls := toolEvents(rec)
	if len(calls) != 3 || calls[0].Name != "lookup" || calls[1].Name != "read_file" || calls[2].Name != "answer" {
		t.Fatalf("tool_call events = %+v", calls)
	}
	if asJSON(t, calls[0].Result) != `{"definition":"the meaning of flow"}` || calls[0].Error != "" {
		t.Errorf("lookup event = %+v", calls[0])
	}
	if got := rec.Paths(runtime.EventModelTurn); !reflect.DeepEqual(got, []string{"solve", "solve", "solve"}) {
		t.Errorf("model_turn events at %v", got)
	}
	// The tool's sub-pipeline runs under the agent's step and the tool.
	if got := rec.Paths(runtime.EventNodeFinished); !slices.Contains(got, "solve[1]/lookup/define") {
		t.Errorf("node_finished paths %v lack the tool's node", got)
	}
}

func TestAgentForcedToFinishAtMaxSteps(t *testing.T) {
	cases := []struct {
		name   string
		finish string
		want   string // the last request's tool_choice
	}{
		{"one finish tool", "[answer]", `{"function":{"name":"answer"},"type":"function"}`},
		{"two finish tools", "[answer, give_up]", `{"allowed_tools":{"mode":"required","tools":[{"function":{"name":"answer"},"type":"function"},{"function":{"name":"give_up"},"type":"function"}]},"type":"allowed_tools"}`},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			srv := llmtest.New(t)
			// The model would look words up forever unless told otherwise.
			srv.Handle(func(r llmtest.Request) llmtest.Reply {
				if _, forced := r.Body["tool_choice"]; forced {
					return llmtest.Calls(llmtest.Call("answer", map[string]any{"answer": "forced"}))
				}
				return llmtest.Calls(llmtest.Call("lookup", map[string]any{"word": fmt.Sprint("w", r.N)}))
			})
			p := load(t, agentTools+`
nodes:
  - id: solve
    agent: {prompt: Keep going., tools: [lookup], finish: `+c.finish+`, max_steps: 3}
outputs: {out: nodes.solve}
`, agentFiles)
			res, _ := run(t, p, modelKinds(srv, llm.Options{}), nil)
			mustComplete(t, res)
			out := res.Outputs["out"].(map[string]any)
			if out["steps"] != 3 || out["finish"].(map[string]any)["name"] != "answer" {
				t.Fatalf("output = %v", out)
			}
			reqs := srv.Requests()
			if len(reqs) != 3 {
				t.Fatalf("%d requests, want 3", len(reqs))
			}
			if got := asJSON(t, reqs[2].Body["tool_choice"]); got != c.want {
				t.Errorf("last tool_choice = %s\nwant %s", got, c.want)
			}
		})
	}
}

func TestAgentWithoutFinishToolsAnswersInWordsAtMaxSteps(t *testing.T) {
	srv := llmtest.New(t)
	srv.Push(
		llmtest.Calls(llmtest.Call("lookup", map[string]any{"word": "flow"})),
		llmtest.Text("It means a steady stream."),
	)
	p := load(t, agentTools+`
nodes:
  - id: solve
    agent: {prompt: Define flow., tools: [lookup], max_steps: 2}
outputs: {out: nodes.solve}
`, agentFiles)
	res, _ := run(t, p, modelKinds(srv, llm.Options{}), nil)
	mustComplete(t, res)
	out := res.Outputs["out"].(map[string]any)
	if out["finish"] != nil || out["text"] != "It means a steady stream." || out["steps"] != 2 {
		t.Fatalf("output = %v", out)
	}
	if got := srv.Last().Body["tool_choice"]; got != "none" {
		t.Errorf("last tool_choice = %v, want none", got)
	}
}

func TestAgentTextReplyForcesAToolCall(t *testing.T) {
	srv := llmtest.New(t)
	srv.Push(
		llmtest.Text("I think it means a stream."),
		llmtest.Calls(llmtest.Call("answer", map[string]any{"answer": "a stream"})),
	)
	p := load(t, agentTools+`
nodes:
  - id: solve
    agent: {prompt: Define flow., tools: [lookup], finish: [answer], max_steps: 5}
outputs: {out: nodes.solve}
`, agentFiles)
	res, _ := run(t, p, modelKinds(srv, llm.Options{}), nil)
	mustComplete(t, res)
	reqs := srv.Requests()
	if got := reqs[1].Body["tool_choice"]; got != "required" {
		t.Errorf("tool_choice after a text reply = %v, want required", got)
	}
	// The text reply is kept; no prompt text is added after it.
	msgs := messages(t, reqs[1])
	if last := msgs[len(msgs)-1]; last["role"] != "assistant" || llmtest.MessageText(last["content"]) != "I think it means a stream." {
		t.Errorf("last message sent = %v", last)
	}
}

func TestAgentRetriesTruncatedToolCall(t *testing.T) {
	srv := llmtest.New(t)
	truncated := llmtest.Reply{ToolCalls: []llmtest.ToolCall{{Name: "lookup", Arguments: `{"word": "fl`}}, FinishReason: "length"}
	srv.Push(
		truncated,
		llmtest.Calls(llmtest.Call("lookup", map[string]any{"word": "flow"})),
		llmtest.Calls(llmtest.Call("answer", map[string]any{"answer": "a stream"})),
		llmtest.Text("noted"),
	)
	p := load(t, agentTools+`
memories:
  notes: {system: You define words.}
nodes:
  - id: solve
    agent: {memory: notes, prompt: Define flow., tools: [lookup], finish: [answer], max_steps: 4}
  - id: after
    llm: {memory: notes, prompt: Thanks.}
outputs: {out: nodes.solve}
`, agentFiles)
	res, rec := run(t, p, modelKinds(srv, llm.Options{}), nil)
	mustComplete(t, res)
	if out := res.Outputs["out"].(map[string]any); out["steps"] != 2 {
		t.Errorf("steps = %v, want 2 (a retried turn is not a step)", out["steps"])
	}
	reqs := srv.Requests()
	if len(reqs) != 4 {
		t.Fatalf("%d requests, want 4", len(reqs))
	}
	// The retry sends exactly what the first try sent.
	if !reflect.DeepEqual(reqs[0].Body["messages"], reqs[1].Body["messages"]) {
		t.Errorf("the retry's messages differ:\n%s\n%s", reqs[0].Raw, reqs[1].Raw)
	}
	for i, r := range reqs[1:] {
		if strings.Contains(string(r.Raw), `\"word\": \"fl"`) || strings.Contains(string(r.Raw), `call_1_1`) {
			t.Errorf("request %d carries the truncated call: %s", i+2, r.Raw)
		}
	}
	// The memory holds the agent's kept turns: prompt, call, result,
	// finish call and its acknowledgement, then the next node's prompt.
	var roles []string
	for _, m := range messages(t, reqs[3]) {
		roles = append(roles, m["role"].(string))
	}
	if want := []string{"system", "user", "assistant", "tool", "assistant", "tool", "user"}; !reflect.DeepEqual(roles, want) {
		t.Errorf("memory roles = %v, want %v", roles, want)
	}
	if n := len(rec.Paths(runtime.EventModelTurn)); n != 4 {
		t.Errorf("%d model_turn events, want 4 (the rejected turn included)", n)
	}
}

func TestAgentInvalidArgumentsOutOfRetries(t *testing.T) {
	srv := llmtest.New(t)
	srv.Handle(func(llmtest.Request) llmtest.Reply {
		return llmtest.Calls(llmtest.Call("lookup", map[string]any{"word": 7}))
	})
	p := load(t, agentTools+`
memories:
  notes: {}
nodes:
  - id: solve
    agent: {memory: notes, prompt: Define flow., tools: [lookup], finish: [answer], max_steps: 4, tool_retries: 1}
`, agentFiles)
	res, _ := run(t, p, modelKinds(srv, llm.Options{}), nil)
	var ne *runtime.NodeError
	if res.Status != runtime.StatusFailed || !errors.As(res.Err, &ne) {
		t.Fatalf("status %s, err %v", res.Status, res.Err)
	}
	if ne.Class != errclass.InvalidOutput || !strings.Contains(ne.Error(), "tool lookup") || !strings.Contains(ne.Error(), "word") {
		t.Errorf("class %s, error %v", ne.Class, ne)
	}
	if n := srv.Calls(); n != 2 {
		t.Errorf("%d requests, want 2 (tool_retries: 1)", n)
	}
}

func TestAgentParallelToolCalls(t *testing.T) {
	srv := llmtest.New(t)
	srv.Push(
		llmtest.Calls(llmtest.Call("lookup", map[string]any{"word": "ebb"}), llmtest.Call("lookup", map[string]any{"word": "flow"})),
		llmtest.Calls(llmtest.Call("answer", map[string]any{"answer": "opposites"})),
	)
	p := load(t, agentTools+`
nodes:
  - id: solve
    agent: {prompt: Compare ebb and flow., tools: [lookup], finish: [answer], max_steps: 3}
`, agentFiles)
	res, rec := run(t, p, modelKinds(srv, llm.Options{}), nil)
	mustComplete(t, res)
	msgs := messages(t, srv.Last())
	var tail []string
	for _, m := range msgs[len(msgs)-2:] {
		tail = append(tail, fmt.Sprintf("%s %s %s", m["role"], m["tool_call_id"], llmtest.MessageText(m["content"])))
	}
	want := []string{
		`tool call_1_1 {"definition":"the meaning of ebb"}`,
		`tool call_1_2 {"definition":"the meaning of flow"}`,
	}
	if !reflect.DeepEqual(tail, want) {
		t.Errorf("tool messages = %q, want %q", tail, want)
	}
	got := rec.Paths(runtime.EventNodeFinished)
	if !slices.Contains(got, "solve[1]/lookup[1]/define") || !slices.Contains(got, "solve[1]/lookup[2]/define") {
		t.Errorf("node_finished paths %v: each call should run under its own path", got)
	}
}

func TestAgentToolErrorGoesBackToTheModel(t *testing.T) {
	srv := llmtest.New(t)
	srv.Push(
		llmtest.Calls(llmtest.Call("read_file", map[string]any{"path": "/etc/passwd"})),
		llmtest.Calls(llmtest.Call("give_up", map[string]any{"reason": "no access"})),
	)
	p := load(t, agentTools+`
nodes:
  - id: solve
    agent: {prompt: Read the secret., tools: [read_file], finish: [answer, give_up], max_steps: 3}
outputs: {out: nodes.solve.finish.name}
`, agentFiles)
	res, rec := run(t, p, modelKinds(srv, llm.Options{}), nil)
	mustComplete(t, res)
	if res.Outputs["out"] != "give_up" {
		t.Errorf("finish = %v", res.Outputs["out"])
	}
	reply, _ := toolReplies(t, srv.Last())["call_1_1"].(map[string]any)
	if msg, _ := reply["error"].(string); msg != `read_file "/etc/passwd": path escapes the pipeline directory` {
		t.Errorf("tool reply = %v, want an error about the directory", reply)
	}
	if ev := toolEvents(rec)[0]; ev.Error == "" || ev.Result != nil {
		t.Errorf("tool_call event = %+v, want its error", ev)
	}
}

func TestAgentMemoryAcrossLoopIterations(t *testing.T) {
	srv := llmtest.New(t)
	srv.Handle(func(r llmtest.Request) llmtest.Reply {
		return llmtest.Calls(llmtest.Call("answer", map[string]any{"answer": fmt.Sprint("answer ", r.N)}))
	})
	p := load(t, agentTools+`
memories:
  talk: {system: You answer.}
nodes:
  - id: rounds
    loop:
      max_iterations: 2
      body:
        - id: solve
          agent: {memory: talk, prompt: "Round ${{ loop.iteration }}.", finish: [answer], max_steps: 2}
`, agentFiles)
	res, _ := run(t, p, modelKinds(srv, llm.Options{}), nil)
	mustComplete(t, res)
	reqs := srv.Requests()
	if len(reqs) != 2 {
		t.Fatalf("%d requests, want 2", len(reqs))
	}
	var got []string
	for _, m := range messages(t, reqs[1]) {
		s := fmt.Sprint(m["role"], ": ", llmtest.MessageText(m["content"]))
		if calls, ok := m["tool_calls"].([]any); ok {
			s += fmt.Sprint(" calls ", calls[0].(map[string]any)["function"].(map[string]any)["arguments"])
		}
		got = append(got, s)
	}
	want := []string{
		"system: You answer.",
		"user: Round 1.",
		`assistant:  calls {"answer":"answer 1"}`,
		`tool: {"ok":true}`,
		"user: Round 2.",
	}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("second iteration sent\n%s\nwant\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
}

func TestAgentLLMTool(t *testing.T) {
	srv := llmtest.New(t)
	srv.Push(
		llmtest.Calls(llmtest.Call("summarize", map[string]any{"text": "a long story about rivers"})),
		llmtest.JSON(map[string]any{"summary": "rivers"}),
		llmtest.Calls(llmtest.Call("answer", map[string]any{"answer": "rivers"})),
	)
	p := load(t, agentTools+`
nodes:
  - id: solve
    agent: {prompt: Summarise the story., tools: [summarize], finish: [answer], max_steps: 3}
`, agentFiles)
	res, rec := run(t, p, modelKinds(srv, llm.Options{}), nil)
	mustComplete(t, res)
	reqs := srv.Requests()
	tool := reqs[1]
	var sent []string
	for _, m := range messages(t, tool) {
		sent = append(sent, fmt.Sprint(m["role"], ": ", llmtest.MessageText(m["content"])))
	}
	if want := []string{"system: You summarise.", "user: Summarise: a long story about rivers"}; !reflect.DeepEqual(sent, want) {
		t.Errorf("the tool's call sent %q, want %q", sent, want)
	}
	if _, ok := tool.Body["tools"]; ok || tool.Body["response_format"] == nil {
		t.Errorf("the tool's call should offer no tools and ask for structured output: %s", tool.Raw)
	}
	if got := asJSON(t, toolReplies(t, reqs[2])); got != `{"call_1_1":{"summary":"rivers"}}` {
		t.Errorf("summarize's reply = %s", got)
	}
	if got := rec.Paths(runtime.EventModelTurn); !reflect.DeepEqual(got, []string{"solve", "solve[1]/summarize", "solve"}) {
		t.Errorf("model_turn events at %v", got)
	}
}

func TestAgentHTTPGet(t *testing.T) {
	var hits atomic.Int32
	site := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		hits.Add(1)
		fmt.Fprint(w, "hello, world")
	}))
	defer site.Close()
	u, _ := url.Parse(site.URL)
	cases := []struct {
		name    string
		config  string
		want    string // the tool's reply, as JSON
		siteHit bool
	}{
		{"allowed and cut at max_bytes", fmt.Sprintf("{allow_hosts: [%s], max_bytes: 5}", u.Hostname()),
			`{"body":"hello","status":200,"truncated":true}`, true},
		{"any host, but not one on this machine", "{allow_hosts: []}",
			fmt.Sprintf(`{"error":"http_get %s/page: 127.0.0.1 (loopback), which http_get reaches only for a host listed in allow_hosts"}`, site.URL), false},
		{"host not allowed", "{allow_hosts: [example.com]}",
			fmt.Sprintf(`{"error":"http_get %s/page: host \"%s\" is not allowed (allowed: example.com)"}`, site.URL, u.Hostname()), false},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			hits.Store(0)
			srv := llmtest.New(t)
			srv.Push(
				llmtest.Calls(llmtest.Call("http_get", map[string]any{"url": site.URL + "/page"})),
				llmtest.Calls(llmtest.Call("answer", map[string]any{"answer": "done"})),
			)
			p := load(t, agentTools+"http_get: "+c.config+`
nodes:
  - id: solve
    agent: {prompt: Fetch the page., tools: [http_get], finish: [answer], max_steps: 3}
`, agentFiles)
			res, _ := run(t, p, modelKinds(srv, llm.Options{}), nil)
			mustComplete(t, res)
			if got := asJSON(t, toolReplies(t, srv.Last())["call_1_1"]); got != c.want {
				t.Errorf("reply = %s\nwant  %s", got, c.want)
			}
			if (hits.Load() > 0) != c.siteHit {
				t.Errorf("the site was hit %d times", hits.Load())
			}
		})
	}
}

func TestAgentHTTPGetOffByDefault(t *testing.T) {
	dir := t.TempDir()
	src := agentTools + `
nodes:
  - id: solve
    agent: {prompt: Fetch., tools: [http_get], finish: [answer]}
`
	_, ds := dsl.LoadSource(dir+"/p.yaml", []byte(src))
	if !ds.HasErrors() || !strings.Contains(ds.String(), "http_get is off in this pipeline: enable it with a top-level http_get:") {
		t.Fatalf("diagnostics:\n%s", ds)
	}
}

func TestAgentSandboxToolsFailBeforeAnyModelCall(t *testing.T) {
	srv := llmtest.New(t)
	p := load(t, agentTools+`
nodes:
  - id: solve
    agent: {prompt: Compute., tools: [python_execute], finish: [answer]}
`, agentFiles)
	res, _ := run(t, p, modelKinds(srv, llm.Options{}), nil)
	var ue *runtime.UnavailableError
	if res.Status != runtime.StatusFailed || !errors.As(res.Err, &ue) {
		t.Fatalf("status %s, err %v", res.Status, res.Err)
	}
	if !strings.Contains(res.Err.Error(), `node "solve": tool python_execute runs code in the sandbox, which is not available here`) {
		t.Errorf("error = %v", res.Err)
	}
	if srv.Calls() != 0 {
		t.Errorf("%d model calls before failing", srv.Calls())
	}
}
