package main

import (
	"bytes"
	"encoding/json"
	"fmt"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/flowrun/flowrun/internal/npmtest"
	"github.com/flowrun/flowrun/llm/llmtest"
)

// compatServer is an OpenAI-compatible server the compatibility suite
// runs its pipelines against.
type compatServer struct {
	name  string
	start func(t *testing.T) compatEndpoint
	cases []compatCase
}

type compatEndpoint struct {
	baseURL string
	// requests counts the chat completion requests received so far.
	requests func(t *testing.T) int
	// rejected counts those answered 429 by the server's own rate limit;
	// nil when it has none.
	rejected func(t *testing.T) int
	// streamed says whether the last request asked for a stream, when
	// the server lets the test see it.
	streamed func() (streamed, known bool)
}

// compatCase is one pipeline run and what it must give.
type compatCase struct {
	pipeline string
	inputs   []string
	want     compatWant
	// unlike overrides want for a server and streaming mode
	// ("mock-llm/stream"), where that server lacks a feature.
	unlike map[string]compatWant
	// server, when set, starts a server of the case's own: one whose
	// state (a rate limit window) must not leak into other cases.
	server func(t *testing.T) compatEndpoint
}

type compatWant struct {
	outputs map[string]any
	tools   []string // tools run, in order
	tries   int      // requests sent
	// usage is the reported prompt and completion tokens; nil means the
	// server reports none and flowrun must estimate them.
	usage *[2]float64
	class string // the node's error class when the run fails
	error string // a part of its error message; BASE is the base URL
	// rejected is how many requests the server answered 429 itself.
	rejected int
	// wait, when set, bounds the wait_ms a model_turn announced before
	// its retry.
	wait *[2]float64
}

// The same llm, agent, structured-output and error pipelines (testdata/compat)
// run against the in-process fake server and @dwmkerr/mock-llm, each with
// the model's stream: true and stream: false, and give the same outputs,
// tool calls, usage (reported, or estimated when the server sends none)
// and error classes. Where mock-llm lacks a feature the case says what
// flowrun does instead, as docs/providers.md states. The Python fake
// (testdata/compat/fake_openai.py) can only answer "xyzzy", so its cases
// say what flowrun makes of that reply, and of its 429s with Retry-After.
func TestCompatibilitySuite(t *testing.T) {
	usage := func(prompt, completion float64) *[2]float64 { return &[2]float64{prompt, completion} }
	streamCrash := compatWant{class: "server", tries: 2,
		error: `500 Internal Server Error from BASE/chat/completions: {"error":"TypeError","message":"Cannot read properties of null (reading 'length')","status":500}; ` +
			`the request offered tools and was streamed: if this server cannot stream tool calls, set stream: false on model "default"`}
	cases := []compatCase{
		{pipeline: "llm.yaml", want: compatWant{outputs: map[string]any{"text": "Hello, Ada! Nice to meet you."}, tries: 1, usage: usage(27, 9)},
			unlike: map[string]compatWant{"mock-llm/stream": {outputs: map[string]any{"text": "Hello, Ada! Nice to meet you."}, tries: 1}}},
		{pipeline: "structured.yaml", want: compatWant{outputs: map[string]any{"city": "Paris", "arrondissements": 20.0}, tries: 1, usage: usage(71, 11)},
			unlike: map[string]compatWant{"mock-llm/stream": {outputs: map[string]any{"city": "Paris", "arrondissements": 20.0}, tries: 1}}},
		{pipeline: "agent.yaml", want: compatWant{outputs: map[string]any{"capital": "Paris", "steps": 2.0}, tools: []string{"read_file", "answer"}, tries: 2, usage: usage(120+150, 16+14)},
			// mock-llm streams message.content only; a reply made of tool
			// calls has none, and it fails while streaming it.
			unlike: map[string]compatWant{"mock-llm/stream": streamCrash}},
		{pipeline: "error.yaml", inputs: []string{"trigger=error-401"},
			want: compatWant{class: "critical", tries: 1, error: "Incorrect API key provided."}},
		{pipeline: "error.yaml", inputs: []string{"trigger=error-429"},
			want: compatWant{class: "rate_limit", tries: 2, error: "Rate limit reached for requests."}},
		{pipeline: "error.yaml", inputs: []string{"trigger=error-500"},
			want: compatWant{class: "server", tries: 2, error: "database is down"}},
	}
	pythonCases := []compatCase{
		{pipeline: "llm.yaml", want: compatWant{outputs: map[string]any{"text": "xyzzy"}, tries: 1, usage: usage(20, 2)}},
		// Without finish tools, a reply in words ends the agent.
		{pipeline: "agent_text.yaml", want: compatWant{outputs: map[string]any{"text": "xyzzy", "steps": 1.0, "finish": nil}, tries: 1, usage: usage(20, 2)}},
		// With one, the model is made to call a tool (tool_choice:
		// required), which this server ignores: 1 turn, then step 2 asked
		// 1+tool_retries times.
		{pipeline: "agent.yaml", want: compatWant{class: "invalid_output", tries: 4,
			error: "step 2: the model answered without calling a tool, after it had been told to call one (asked 3 times; tool_retries: 2)"}},
		{pipeline: "structured.yaml", want: compatWant{class: "invalid_output", tries: 1,
			error: `invalid structured output from model "gpt-4.1-mini" after no repair_retries: the reply is not valid JSON: ` +
				`invalid character 'x' looking for beginning of value (reply: "xyzzy")`}},
		// --rpm 1: the second request is answered 429 with Retry-After: 60
		// (or 59); flowrun waits what the server asks, not its 1ms backoff,
		// and the node's 1s timeout ends the wait.
		{pipeline: "ratelimit.yaml", server: func(t *testing.T) compatEndpoint { return startPythonFake(t, "--rpm", "1") },
			want: compatWant{class: "timeout", tries: 2, rejected: 1, wait: &[2]float64{50_000, 60_000}, error: "timed out after 1s (timeout: 1s)"}},
	}
	servers := []compatServer{
		{name: "fake", start: startFakeCompat, cases: cases},
		{name: "mock-llm", start: startMockLLM, cases: cases},
		{name: "python", start: func(t *testing.T) compatEndpoint { return startPythonFake(t) }, cases: pythonCases},
	}
	for _, server := range servers {
		t.Run(server.name, func(t *testing.T) {
			ep := server.start(t)
			t.Setenv("OPENAI_BASE_URL", ep.baseURL)
			t.Setenv("OPENAI_API_KEY", "sk-compat-test")
			for _, stream := range []bool{true, false} {
				mode := map[bool]string{true: "stream", false: "plain"}[stream]
				dir := compatPipelines(t, stream)
				for _, tc := range server.cases {
					name := strings.TrimSuffix(tc.pipeline, ".yaml")
					if len(tc.inputs) > 0 {
						name += "/" + strings.TrimPrefix(tc.inputs[0], "trigger=")
					}
					t.Run(mode+"/"+name, func(t *testing.T) {
						want := tc.want
						if w, ok := tc.unlike[server.name+"/"+mode]; ok {
							want = w
						}
						ep := ep
						if tc.server != nil {
							ep = tc.server(t)
							t.Setenv("OPENAI_BASE_URL", ep.baseURL)
						}
						before, rejectedBefore := ep.requests(t), 0
						if ep.rejected != nil {
							rejectedBefore = ep.rejected(t)
						}
						runCompat(t, filepath.Join(dir, tc.pipeline), tc.inputs, want, ep.baseURL)
						if got := ep.requests(t) - before; got != want.tries {
							t.Errorf("the server received %d requests, want %d", got, want.tries)
						}
						if ep.rejected != nil {
							if got := ep.rejected(t) - rejectedBefore; got != want.rejected {
								t.Errorf("the server answered %d requests 429, want %d", got, want.rejected)
							}
						}
						if streamed, known := ep.streamed(); known && streamed != stream {
							t.Errorf("the last request streamed=%v with the model's stream: %v", streamed, stream)
						}
					})
				}
			}
		})
	}
}

// compatPipelines copies testdata/compat into a directory with every
// model's stream: true, or with every one turned to stream: false.
func compatPipelines(t *testing.T, stream bool) string {
	t.Helper()
	dir := t.TempDir()
	entries, err := os.ReadDir("testdata/compat")
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range entries {
		b, err := os.ReadFile(filepath.Join("testdata/compat", e.Name()))
		if err != nil {
			t.Fatal(err)
		}
		if !stream && strings.HasSuffix(e.Name(), ".yaml") && e.Name() != "mock-llm.yaml" {
			if strings.Count(string(b), "stream: true") != 1 {
				t.Fatalf("%s: the suite turns its one \"stream: true\" to false", e.Name())
			}
			b = bytes.Replace(b, []byte("stream: true"), []byte("stream: false"), 1)
		}
		writeFile(t, dir, e.Name(), string(b))
	}
	return dir
}

func runCompat(t *testing.T, pipeline string, inputs []string, want compatWant, baseURL string) {
	t.Helper()
	args := []string{"run", pipeline, "--store", filepath.Join(t.TempDir(), "runs.db"), "--json"}
	for _, in := range inputs {
		args = append(args, "--input", in)
	}
	code, stdout, stderr := flowrun(t, args...)
	evs := eventsOf(t, stdout)
	var tools []string
	var tries int
	var prompt, completion, wait float64
	estimated := false
	for _, e := range evs {
		switch e["type"] {
		case "tool_call":
			tools = append(tools, e["tool"].(map[string]any)["name"].(string))
		case "model_turn":
			tries++
			turn := e["turn"].(map[string]any)
			if w, ok := turn["wait_ms"].(float64); ok {
				wait = max(wait, w)
			}
			u, _ := turn["usage"].(map[string]any)
			if u == nil {
				continue
			}
			prompt += u["prompt"].(float64)
			completion += u["completion"].(float64)
			if u["estimated"] == true {
				estimated = true
			}
		}
	}
	if tries != want.tries {
		t.Errorf("%d model_turn events, want %d", tries, want.tries)
	}
	if strings.Join(tools, ",") != strings.Join(want.tools, ",") {
		t.Errorf("tools run %v, want %v", tools, want.tools)
	}
	if want.wait != nil && (wait < want.wait[0] || wait > want.wait[1]) {
		t.Errorf("the longest wait announced before a retry was %vms, want %v to %vms", wait, want.wait[0], want.wait[1])
	}
	last := evs[len(evs)-1]
	if want.class != "" {
		var failed map[string]any
		for _, e := range evs {
			if e["type"] == "node_failed" {
				failed = e
			}
		}
		if code != exitFailed || failed == nil {
			t.Fatalf("exit %d, want a failed run\n%s\n%s", code, stdout, stderr)
		}
		msg := strings.ReplaceAll(want.error, "BASE", baseURL)
		if failed["class"] != want.class || !strings.Contains(failed["error"].(string), msg) {
			t.Errorf("node failed with %v: %v\nwant class %s and an error saying %q", failed["class"], failed["error"], want.class, msg)
		}
		return
	}
	if code != exitOK {
		t.Fatalf("exit %d\n%s", code, stderr)
	}
	if !jsonEqual(last["outputs"], want.outputs) {
		t.Errorf("outputs %v, want %v", last["outputs"], want.outputs)
	}
	switch {
	case want.usage == nil:
		// Counted locally: marked, and priced so max_cost_usd holds.
		if !estimated || prompt == 0 || completion == 0 || last["cost_usd"].(float64) <= 0 {
			t.Errorf("usage %v+%v estimated=%v cost %v: want tokens counted locally, marked estimated, and a cost", prompt, completion, estimated, last["cost_usd"])
		}
	case estimated || prompt != want.usage[0] || completion != want.usage[1]:
		t.Errorf("usage %v+%v estimated=%v, want the reported %v+%v", prompt, completion, estimated, want.usage[0], want.usage[1])
	}
}

// startFakeCompat starts the in-process fake server answering as the
// rules of testdata/compat/mock-llm.yaml do.
func startFakeCompat(t *testing.T) compatEndpoint {
	srv := llmtest.New(t)
	srv.Handle(func(r llmtest.Request) llmtest.Reply {
		msgs, _ := r.Body["messages"].([]any)
		last, _ := msgs[len(msgs)-1].(map[string]any)
		content, _ := last["content"].(string)
		switch {
		case strings.Contains(content, "error-401"):
			return llmtest.Reply{Status: 401, Body: `{"error": {"message": "Incorrect API key provided.", "type": "invalid_request_error", "param": null, "code": "invalid_api_key"}}`}
		case strings.Contains(content, "error-429"):
			return llmtest.Reply{Status: 429, Body: `{"error": {"message": "Rate limit reached for requests.", "type": "requests", "param": null, "code": "rate_limit_exceeded"}}`}
		case strings.Contains(content, "error-500"):
			return llmtest.Reply{Status: 500, Body: `{"error": "Internal Server Error", "message": "database is down", "status": 500}`}
		case last["role"] == "tool" && strings.Contains(content, "Paris"):
			return llmtest.Reply{ToolCalls: []llmtest.ToolCall{{ID: "call_answer", Name: "answer", Arguments: `{"capital":"Paris"}`}}, Usage: llmtest.Usage{Prompt: 150, Completion: 14}}
		case r.Body["tools"] != nil:
			return llmtest.Reply{ToolCalls: []llmtest.ToolCall{{ID: "call_read", Name: "read_file", Arguments: `{"path":"facts.txt"}`}}, Usage: llmtest.Usage{Prompt: 120, Completion: 16}}
		case r.Body["response_format"] != nil:
			return llmtest.Reply{Text: `{"city":"Paris","arrondissements":20}`, Usage: llmtest.Usage{Prompt: 71, Completion: 11}}
		default:
			return llmtest.Reply{Text: "Hello, Ada! Nice to meet you.", Usage: llmtest.Usage{Prompt: 27, Completion: 9}}
		}
	})
	return compatEndpoint{baseURL: srv.URL, requests: func(*testing.T) int { return len(srv.Requests()) },
		streamed: func() (bool, bool) { return srv.Last().Stream, true }}
}

// startMockLLM starts @dwmkerr/mock-llm with testdata/compat/mock-llm.yaml
// on a free port, and kills it when the test ends.
func startMockLLM(t *testing.T) compatEndpoint {
	config, err := filepath.Abs("testdata/compat/mock-llm.yaml")
	if err != nil {
		t.Fatal(err)
	}
	port := freePort(t)
	cmd := npmtest.Command(t, "@dwmkerr/mock-llm", "mock-llm", "--config", config)
	cmd.Env = append(os.Environ(), "HOST=127.0.0.1", fmt.Sprintf("PORT=%d", port))
	base := fmt.Sprintf("http://127.0.0.1:%d", port)
	log := startServing(t, "mock-llm", cmd, base+"/health")
	// mock-llm logs one line per request it receives, and not whether it
	// asked for a stream.
	return compatEndpoint{baseURL: base + "/v1", requests: func(*testing.T) int { return strings.Count(log.String(), "POST /v1/chat/completions\n") },
		streamed: func() (bool, bool) { return false, false }}
}

// startPythonFake starts testdata/compat/fake_openai.py with args on a
// free port, and kills it when the test ends. Without python3 it skips,
// except under CI=true where it fails.
func startPythonFake(t *testing.T, args ...string) compatEndpoint {
	python, err := exec.LookPath("python3")
	if err != nil {
		if os.Getenv("CI") == "true" {
			t.Fatalf("CI runs the suite against the Python fake server: %v", err)
		}
		t.Skipf("skipping the suite against the Python fake server (testdata/compat/fake_openai.py): %v; install Python 3 to run it", err)
	}
	port := freePort(t)
	cmd := exec.Command(python, append([]string{filepath.Join("testdata", "compat", "fake_openai.py"), strconv.Itoa(port)}, args...)...)
	base := fmt.Sprintf("http://127.0.0.1:%d", port)
	log := startServing(t, "the Python fake server", cmd, base+"/stats")
	stat := func(t *testing.T, name string) int {
		res, err := http.Get(base + "/stats")
		if err != nil {
			t.Fatalf("reading the Python fake server's stats: %v\n%s", err, log.String())
		}
		defer res.Body.Close()
		var stats map[string]int
		if err := json.NewDecoder(res.Body).Decode(&stats); err != nil {
			t.Fatalf("reading the Python fake server's stats: %v", err)
		}
		return stats[name]
	}
	return compatEndpoint{baseURL: base + "/v1",
		requests: func(t *testing.T) int { return stat(t, "requests") },
		rejected: func(t *testing.T) int { return stat(t, "rejected") },
		streamed: func() (bool, bool) { return false, false }}
}

// startServing starts cmd, a server, kills it when the test ends, and waits up
// to 20s for it to answer 200 at url. It returns the server's output.
func startServing(t *testing.T, server string, cmd *exec.Cmd, url string) *syncBuffer {
	t.Helper()
	log := &syncBuffer{}
	cmd.Stdout, cmd.Stderr = log, log
	if err := cmd.Start(); err != nil {
		t.Fatalf("starting %s: %v", server, err)
	}
	t.Cleanup(func() {
		_ = cmd.Process.Kill()
		_ = cmd.Wait()
	})
	deadline := time.Now().Add(20 * time.Second)
	for {
		res, err := http.Get(url)
		if err == nil {
			res.Body.Close()
			if res.StatusCode == http.StatusOK {
				return log
			}
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s did not answer %s within 20s: %v\n%s", server, url, err, log.String())
		}
		time.Sleep(20 * time.Millisecond)
	}
}

func freePort(t *testing.T) int {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port
}

// syncBuffer is a bytes.Buffer a child process writes to while the test
// reads it.
type syncBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (b *syncBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.Write(p)
}

func (b *syncBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.String()
}
