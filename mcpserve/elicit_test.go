package mcpserve

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/flowrun/flowrun/dsl"
	"github.com/flowrun/flowrun/engine"
	"github.com/flowrun/flowrun/llm/llmtest"
	"github.com/flowrun/flowrun/runtime"
	"github.com/flowrun/flowrun/store"
)

const confirmPipeline = `
version: 1
name: launch
description: Multiplies, after a confirmation.
state: {n: 3}
nodes:
  - id: careful
    confirm: true
    set: {n: state.n * 100}
outputs: {n: state.n}
`

// elicited is a client's user: it keeps every form it is asked to fill
// and answers each with answer's reply to it.
type elicited struct {
	mu     sync.Mutex
	asked  []*mcp.ElicitParams
	answer func(*mcp.ElicitParams) *mcp.ElicitResult
}

func (e *elicited) options() *mcp.ClientOptions {
	return &mcp.ClientOptions{ElicitationHandler: func(_ context.Context, r *mcp.ElicitRequest) (*mcp.ElicitResult, error) {
		e.mu.Lock()
		defer e.mu.Unlock()
		e.asked = append(e.asked, r.Params)
		return e.answer(r.Params), nil
	}}
}

func (e *elicited) messages() []string {
	e.mu.Lock()
	defer e.mu.Unlock()
	var out []string
	for _, p := range e.asked {
		out = append(out, p.Message)
	}
	return out
}

// accept fills a form with value.
func accept(value any) *mcp.ElicitResult {
	return &mcp.ElicitResult{Action: "accept", Content: map[string]any{inputKey: value}}
}

// call calls the tool name with args and fails the test unless it
// returns outputs.
func call(t *testing.T, cs *mcp.ClientSession, name string, args map[string]any, log interface{ String() string }) *mcp.CallToolResult {
	t.Helper()
	res, err := cs.CallTool(context.Background(), &mcp.CallToolParams{Name: name, Arguments: args})
	if err != nil || res.IsError {
		t.Fatalf("call %s: %v %s\n%s", name, err, text(res), log)
	}
	return res
}

// TestAskWithoutElicitationSaysHowToAnswer: a client that cannot elicit
// gets an error that says the run waits for a person, on what, and how
// to answer; the run waits in the store. (Was the second half of
// cmd/flowrun's TestMCPServeAskUsesElicitation; the first is
// TestCallAsksAndCompletesARecordedRun.)
func TestAskWithoutElicitationSaysHowToAnswer(t *testing.T) {
	dir := t.TempDir()
	writeFile(t, dir, "greet.yaml", greetPipeline)
	cs, st, _ := serve(t, dir, nil)
	res, err := cs.CallTool(context.Background(), &mcp.CallToolParams{Name: "greet", Arguments: map[string]any{}})
	if err != nil {
		t.Fatal(err)
	}
	if got := text(res.Content); !res.IsError || !strings.Contains(got, "is waiting for a person (who: Whom should I greet?) and this client cannot ask one (no MCP elicitation)") ||
		!strings.Contains(got, "flowrun resume") {
		t.Errorf("without elicitation: %s", got)
	}
	if runs, _ := st.Runs(context.Background()); len(runs) != 1 || runs[0].Status != runtime.StatusWaiting {
		t.Errorf("runs %+v, want one waiting", runs)
	}
}

// TestConfirmElicitsYesOrNo: a confirm: true node asks the client's user
// a yes/no form saying what will run: yes runs the node and the call
// returns the outputs; a declined form stops the run, and the call's
// error says so and how to go on. (Was cmd/flowrun's
// TestMCPServeConfirmUsesElicitation.)
func TestConfirmElicitsYesOrNo(t *testing.T) {
	dir := t.TempDir()
	writeFile(t, dir, "launch.yaml", confirmPipeline)
	decline := false
	user := &elicited{answer: func(*mcp.ElicitParams) *mcp.ElicitResult {
		if decline {
			return &mcp.ElicitResult{Action: "decline"}
		}
		return accept(true)
	}}
	cs, st, log := serve(t, dir, user.options())
	if got := text(call(t, cs, "launch", map[string]any{}, log).StructuredContent); got != `{"n":300}` {
		t.Errorf("outputs %s, want {\"n\":300}", got)
	}
	if len(user.asked) != 1 {
		t.Fatalf("asked %d times, want 1", len(user.asked))
	}
	field := text(user.asked[0].RequestedSchema)
	if user.asked[0].Message != "Running careful needs your confirmation.\n\nwill run: set node careful" || !strings.Contains(field, `"answer":{"type":"boolean"}`) {
		t.Errorf("the confirmation asked %q with %s", user.asked[0].Message, field)
	}
	user.mu.Lock()
	decline = true
	user.mu.Unlock()
	res, err := cs.CallTool(context.Background(), &mcp.CallToolParams{Name: "launch", Arguments: map[string]any{}})
	if err != nil {
		t.Fatal(err)
	}
	if got := text(res.Content); !res.IsError || !strings.Contains(got, "stopped: running careful was declined") || !strings.Contains(got, "flowrun resume") {
		t.Errorf("declined: %s", got)
	}
	runs, _ := st.Runs(context.Background())
	stopped := 0
	for _, r := range runs {
		if r.Status == runtime.StatusStopped && r.Pending != nil && r.Pending.Path == "careful" {
			stopped++
		}
	}
	if stopped != 1 {
		t.Errorf("runs %+v, want one stopped with its confirmation pending", runs)
	}
}

// TestRequestStateIsSingleUse: a declined confirmation's request state
// cannot be replayed to approve it. (Was cmd/flowrun's
// TestMCPServeRequestStateIsSingleUse.)
func TestRequestStateIsSingleUse(t *testing.T) {
	dir := t.TempDir()
	writeFile(t, dir, "launch.yaml", confirmPipeline)
	cs, _, first := askedWithState(t, dir, "launch")
	answer := func(r *mcp.ElicitResult) *mcp.CallToolResult {
		return answerState(t, cs, "launch", first.RequestState, r)
	}
	if res := answer(&mcp.ElicitResult{Action: "decline"}); !res.IsError || !strings.Contains(text(res.Content), "declined") {
		t.Fatalf("declining: %s", text(res))
	}
	res := answer(accept(true))
	if !res.IsError || res.StructuredContent != nil || !strings.Contains(text(res.Content), "the request state was already used") {
		t.Fatalf("a replayed state was accepted: %s", text(res))
	}
}

const askThenConfirmPipeline = `
version: 1
name: greet_then_launch
nodes:
  - id: who
    ask: {question: "Whom should I greet?", schema: {type: string}}
  - id: careful
    confirm: true
    set: {}
outputs:
  greeting: '"hello " + nodes.who'
`

// TestAskThenConfirmOnEveryTransport: every client that elicits gets the
// outputs of a pipeline that asks and then confirms, over stdio and
// Streamable HTTP, whether it retries with a request state itself (the
// Go SDK's client does) or must be asked every question within the one
// call. (Was cmd/flowrun's TestMCPServeAskThenConfirmOnEveryProtocol.)
func TestAskThenConfirmOnEveryTransport(t *testing.T) {
	dir := t.TempDir()
	writeFile(t, dir, "p.yaml", askThenConfirmPipeline)
	for _, tc := range []struct {
		name, transport string
		noRetries       bool
	}{{"stdio", "stdio", false}, {"http", "http", false}, {"http-without-retries", "http", true}} {
		t.Run(tc.name, func(t *testing.T) {
			user := &elicited{answer: func(p *mcp.ElicitParams) *mcp.ElicitResult {
				if strings.Contains(p.Message, "confirmation") {
					return accept(true)
				}
				return accept("Ada")
			}}
			opts := user.options()
			if tc.noRetries {
				opts.MultiRoundTrip = &mcp.MultiRoundTripOptions{Disabled: true}
			}
			cs, _, log := serveWith(t, setup{transport: tc.transport}, dir, opts)
			res := call(t, cs, "greet_then_launch", map[string]any{}, log)
			if got, asked := text(res.StructuredContent), user.messages(); got != `{"greeting":"hello Ada"}` || len(asked) != 2 {
				t.Errorf("asked %q, got %s (%s)", asked, got, text(res))
			}
		})
	}
}

// TestRecordsOneCassettePerRun: with RecordDir, each run gets a cassette
// of its own: two calls do not overwrite each other's, the answer to a
// run's confirmation adds to that run's cassette, and the cassette
// replays the whole run offline. (Was cmd/flowrun's
// TestMCPServeRecordsOneCassettePerRun.)
func TestRecordsOneCassettePerRun(t *testing.T) {
	dir, recDir := t.TempDir(), t.TempDir()
	draft, err := os.ReadFile(filepath.Join("testdata", "draft.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	p := writeFile(t, dir, "draft.yaml", string(draft))
	fake := llmtest.New(t)
	fake.Push(llmtest.Text("about cats"), llmtest.Text("polished cats"), llmtest.Text("about dogs"), llmtest.Text("polished dogs"))
	user := &elicited{answer: func(*mcp.ElicitParams) *mcp.ElicitResult { return accept(true) }}
	cs, _, log := serveWith(t, setup{recordDir: recDir, engine: engine.Options{LookupEnv: fake.Env(""), MaxAttempts: 1}}, dir, user.options())
	for _, topic := range []string{"cats", "dogs"} {
		if got := text(call(t, cs, "draft", map[string]any{"topic": topic}, log).StructuredContent); got != `{"text":"polished `+topic+`"}` {
			t.Errorf("outputs %s", got)
		}
	}
	pipeline, ds := dsl.Load(p)
	if pipeline == nil {
		t.Fatal(ds)
	}
	files, _ := filepath.Glob(filepath.Join(recDir, "draft.*.cassette.yaml"))
	if len(files) != 2 {
		t.Fatalf("cassettes %v, want one per run (2)\n%s", files, log)
	}
	for _, f := range files {
		b, _ := os.ReadFile(f)
		topic := "cats"
		if strings.Contains(string(b), "dogs") {
			topic = "dogs"
		}
		for _, want := range []string{"node: write", "node: polish", "about " + topic, "polished " + topic} {
			if !strings.Contains(string(b), want) {
				t.Errorf("%s lacks %q:\n%s", f, want, b)
			}
		}
		replay, st := replayEngine(t, f)
		r, err := replay.Start(context.Background(), pipeline, map[string]any{"topic": topic}, engine.RunOptions{Human: replay.Human(true)})
		if err != nil {
			t.Fatalf("replaying %s: %v", f, err)
		}
		if res := r.Wait(); res.Status != runtime.StatusCompleted || res.Outputs["text"] != "polished "+topic {
			t.Errorf("replaying %s: %+v", f, res)
		}
		st.Close()
	}
}

// replayEngine is an engine on a fresh store that answers every model
// call from cassette and has no model endpoint: a run it completes ran
// offline.
func replayEngine(t *testing.T, cassette string) (*engine.Engine, *store.Store) {
	t.Helper()
	st, err := store.Open(filepath.Join(t.TempDir(), "replay.db"))
	if err != nil {
		t.Fatal(err)
	}
	e, err := engine.New(engine.Options{Store: st, Replay: cassette, LookupEnv: func(string) (string, bool) { return "", false }})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { e.Close() })
	return e, st
}
