package plan

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/flowrun/flowrun/budget"
	"github.com/flowrun/flowrun/dsl"
	"github.com/flowrun/flowrun/llm"
	"github.com/flowrun/flowrun/llm/llmtest"
)

func load(t *testing.T, path string) *dsl.Pipeline {
	t.Helper()
	p, ds := dsl.Load(path)
	if p == nil {
		t.Fatalf("%s: %v", path, ds)
	}
	return p
}

// TestBoundsMultiplyAndAdd: loops multiply by their iterations, maps by
// their items, retries by max_attempts, parallel branches and a call's
// callee add; given the inputs each figure is a number, and without them
// it stays the expression that bounds it.
func TestBoundsMultiplyAndAdd(t *testing.T) {
	p := load(t, "testdata/bounded.yaml")
	pl := Make(p, Options{Inputs: map[string]any{"rounds": 4}})
	// ask: 4 rounds × 2 attempts; write: 3 topics; l: 1; the callee's
	// one: len(topics) = 3.
	if v, ok := pl.Total.Calls.Value(); !ok || v != 8+3+1+3 {
		t.Fatalf("calls = %s (%s), want 15", pl.Total.Calls.Text(), pl.Total.Calls.Expr())
	}
	// 8 × 100 + 3 × 50 + 1 × 100 + 3 × 10 output tokens.
	if v, ok := pl.Total.OutputTokens.Value(); !ok || v != 800+150+100+30 {
		t.Fatalf("output tokens = %s, want 1080", pl.Total.OutputTokens.Text())
	}
	if v, ok := pl.Total.SandboxRuns.Value(); !ok || v != 3 {
		t.Fatalf("sandbox runs = %s, want 3", pl.Total.SandboxRuns.Text())
	}
	if _, ok := pl.Total.USD.Value(); !ok {
		t.Fatalf("cost is %s: every call has static prompts, a price and max_tokens; unbounded: %v", pl.Total.USD.Text(), pl.Unbounded)
	}

	symbolic := Make(p, Options{})
	if _, ok := symbolic.Total.Calls.Value(); ok || !strings.Contains(symbolic.Total.Calls.Expr(), "2 × inputs.rounds") {
		t.Fatalf("without rounds, calls = %s ≤ %s: want unknown, bounded by 2 × inputs.rounds", symbolic.Total.Calls.Text(), symbolic.Total.Calls.Expr())
	}
	if len(symbolic.Missing) != 1 || symbolic.Missing[0] != "rounds" {
		t.Fatalf("missing inputs %v, want [rounds]", symbolic.Missing)
	}
	each := row(t, pl, "each/write")
	if each.Runs.Expr() != "len(map(inputs.topics, upper(#)))" && each.Runs.Expr() != "len(inputs.topics)" {
		t.Fatalf("each/write runs ≤ %s, want the length of inputs.topics", each.Runs.Expr())
	}
}

// loadText loads a pipeline written as text.
func loadText(t *testing.T, src string) *dsl.Pipeline {
	t.Helper()
	path := filepath.Join(t.TempDir(), "p.yaml")
	if err := os.WriteFile(path, []byte(src), 0o644); err != nil {
		t.Fatal(err)
	}
	return load(t, path)
}

func row(t *testing.T, pl *Plan, path string) *Node {
	t.Helper()
	for _, n := range pl.Nodes {
		if n.Path == path {
			return n
		}
	}
	t.Fatalf("no node %s in the plan", path)
	return nil
}

// TestPerCallIsWorstCase: the cost of one call of a node is llm.WorstCase
// of the request the node sends, the bound the cost cap reserves.
func TestPerCallIsWorstCase(t *testing.T) {
	p := load(t, "testdata/bounded.yaml")
	pl := Make(p, Options{Inputs: map[string]any{"rounds": 1}})
	ask := row(t, pl, "rounds/ask")
	want, err := llm.WorstCase(&llm.Request{Model: p.Models["default"], SchemaName: "ask", Messages: []llm.Message{
		{Role: llm.RoleSystem, Text: "Be brief."}, {Role: llm.RoleUser, Text: "Say a."}}})
	if err != nil {
		t.Fatal(err)
	}
	if ask.PerCall == nil || *ask.PerCall != want {
		t.Fatalf("per call %+v, want WorstCase's %+v", ask.PerCall, want)
	}
	if v, _ := ask.USD.Value(); v != 2*want.USD {
		t.Fatalf("ask costs at most %v, want 2 attempts × %v", v, want.USD)
	}
}

// TestNoMaxTokensIsUnbounded: a call with no output bound makes the cost
// unbounded, and the plan names the node and what to set.
func TestNoMaxTokensIsUnbounded(t *testing.T) {
	p := load(t, "testdata/bounded.yaml")
	p.Models["default"].MaxTokens = 0
	pl := Make(p, Options{Inputs: map[string]any{"rounds": 1}})
	if !pl.Total.USD.IsUnbounded() || !pl.Total.OutputTokens.IsUnbounded() {
		t.Fatalf("cost %s, output tokens %s: want unbounded", pl.Total.USD.Text(), pl.Total.OutputTokens.Text())
	}
	var fixes []string
	for _, r := range pl.Unbounded {
		fixes = append(fixes, r.Node+": "+r.Fix)
	}
	if !strings.Contains(strings.Join(fixes, "\n"), "rounds/ask: set max_tokens on node ask or on model default") {
		t.Fatalf("reasons:\n%s\nwant rounds/ask's, naming max_tokens", strings.Join(fixes, "\n"))
	}
	if v, ok := row(t, pl, "each/write").USD.Value(); !ok || v <= 0 {
		t.Fatal("each/write sets its own max_tokens: its cost stays bounded")
	}
}

// TestTheCapReservesThePlansPerCall: the cost cap reserves, before each
// call, the plan's per-call figure: a cap of exactly that much lets the
// call through, and a cap a hair below refuses it before it is sent.
func TestTheCapReservesThePlansPerCall(t *testing.T) {
	p := load(t, "testdata/bounded.yaml")
	per := row(t, Make(p, Options{Inputs: map[string]any{"rounds": 1}}), "rounds/ask").PerCall
	srv := llmtest.New(t)
	srv.Handle(func(llmtest.Request) llmtest.Reply {
		return llmtest.Reply{Text: "a", Usage: llmtest.Usage{Prompt: 1, Completion: 1}}
	})
	c := llm.New(llm.Options{Env: srv.Env("sk-test"), MaxAttempts: 1})
	send := func(limit float64) error {
		_, err := c.Complete(context.Background(), llm.Request{Model: p.Models["default"], SchemaName: "ask",
			Messages: []llm.Message{{Role: llm.RoleSystem, Text: "Be brief."}, {Role: llm.RoleUser, Text: "Say a."}},
			Ledger:   budget.New("the cap", limit, 0, nil)})
		return err
	}
	if err := send(per.USD); err != nil {
		t.Fatalf("a cap of the plan's per-call $%v: %v", per.USD, err)
	}
	var refused *budget.ExceededError
	if err := send(per.USD - 2*budget.Slack); !errors.As(err, &refused) || srv.Calls() != 1 {
		t.Fatalf("a cap just below the plan's per-call: %v after %d calls, want refused before sending", err, srv.Calls())
	}
}

// TestFiguresRoundUp: a bound is never written below its value.
func TestFiguresRoundUp(t *testing.T) {
	for _, c := range []struct {
		f    Figure
		text string
		usd  string
	}{
		{Num(1.26601), "1.267", "$1.2661"},
		{Num(0.000011), "1.1e-05", "$0.0001"},
		{Num(2), "2", "$2.0000"},
		{Num(0), "0", "$0.0000"},
		{Num(37712736), "37.8M", "$37712736.0000"},
	} {
		if got := c.f.Text(); got != c.text {
			t.Errorf("Text %v = %s, want %s", c.f.value, got, c.text)
		}
		if got := c.f.USD(); got != c.usd {
			t.Errorf("USD %v = %s, want %s", c.f.value, got, c.usd)
		}
	}
	if got := Sym("x", 0, false).Times(Num(1.26601)).Expr(); got != "1.267 × x" {
		t.Errorf("Expr = %s, want 1.267 × x", got)
	}
}

// TestRetriesNeverMultiplyUnderTheBound: a model call's tries and a
// node's runs again for invalid output both count: a structured call
// with repair_retries 1 under retry: {max_attempts: 2} may be sent
// 2 runs × 2 turns × 2 tries; without invalid_output in retry_on the node
// is not run again.
func TestRetriesNeverMultiplyUnderTheBound(t *testing.T) {
	const src = `version: 1
name: r
models:
  default: {model: gpt-4.1-mini, max_tokens: 10}
nodes:
  - id: judge
    llm:
      prompt: "Grade."
      output_schema: {type: object, properties: {ok: {type: boolean}}, required: [ok]}
      repair_retries: 1
    retry: {max_attempts: 2%s}
`
	for _, c := range []struct {
		retryOn string
		calls   float64
	}{{"", 8}, {", retry_on: [server]", 4}} {
		pl := Make(loadText(t, fmt.Sprintf(src, c.retryOn)), Options{})
		if v, ok := pl.Total.Calls.Value(); !ok || v != c.calls {
			t.Errorf("retry_on %q: calls %s, want %v", c.retryOn, pl.Total.Calls.Text(), c.calls)
		}
	}
}

// TestWhatIsNotGivenIsNotCounted: a prompt reading an input that is not
// given is not rendered as if it were empty; an llm tool called by a tool
// node counts its call, rendered with the node's args.
func TestWhatIsNotGivenIsNotCounted(t *testing.T) {
	const src = `version: 1
name: g
inputs:
  topic: {type: string}
models:
  default: {model: gpt-4.1-mini, max_tokens: 10, price: {input_per_mtok: 1, output_per_mtok: 1}}
tools:
  shout:
    description: Shout a word.
    parameters: {type: object, properties: {word: {type: string}}, required: [word]}
    llm: {prompt: "Shout ${{ inputs.word }}"}
nodes:
  - id: say
    llm: {prompt: "Say ${{ inputs.topic }}"}
    retry: {max_attempts: 1}
  - id: loud
    tool: {name: shout, args: {word: '"hello"'}}
    retry: {max_attempts: 1}
`
	p := loadText(t, src)
	pl := Make(p, Options{})
	window, _ := llm.ContextWindow("gpt-4.1-mini")
	if v, ok := row(t, pl, "say").InputTokens.Value(); !ok || v != float64(window) {
		t.Errorf("say's input without topic: %s, want the context window %d", row(t, pl, "say").InputTokens.Text(), window)
	}
	if !strings.Contains(strings.Join(pl.Notes, "\n"), "inputs.topic, which is not given") {
		t.Errorf("the notes do not say topic is not given: %v", pl.Notes)
	}
	loud := row(t, pl, "loud")
	want, _ := llm.WorstCase(&llm.Request{Model: p.Models["default"], SchemaName: "loud", Messages: []llm.Message{{Role: llm.RoleUser, Text: "Shout hello"}}})
	if v, ok := loud.Calls.Value(); !ok || v != 1 || loud.PerCall == nil || *loud.PerCall != want {
		t.Errorf("loud: %s calls, per call %+v; want 1 call of %+v", loud.Calls.Text(), loud.PerCall, want)
	}
}

// TestAgentsMultiplyByTheirLimits: an agent's calls are max_steps ×
// (1 + tool_retries) × the tries of each; its tool calls, and the sandbox
// runs of python_execute, have no bound (a turn may call several tools);
// a tool that makes model calls leaves its calls and cost unbounded.
func TestAgentsMultiplyByTheirLimits(t *testing.T) {
	const src = `version: 1
name: a
models:
  default: {model: gpt-4.1-mini, max_tokens: 10}
tools:
  helper:
    description: Help.
    parameters: {type: object, properties: {q: {type: string}}, required: [q]}
    llm: {prompt: "${{ inputs.q }}"}
  done:
    description: Finish.
    parameters: {type: object, properties: {a: {type: string}}, required: [a]}
nodes:
  - id: solve
    agent: {prompt: "Go.", tools: [python_execute%s], finish: [done], max_steps: 3, tool_retries: 1}
`
	for _, c := range []struct {
		tools string
		calls string
	}{{"", "30"}, {", helper", "∞"}} {
		solve := row(t, Make(loadText(t, fmt.Sprintf(src, c.tools)), Options{}), "solve")
		if solve.Calls.Text() != c.calls || !solve.ToolCalls.IsUnbounded() || !solve.SandboxRuns.IsUnbounded() {
			t.Errorf("tools %q: calls %s, tool calls %s, sandbox runs %s; want %s, ∞, ∞", c.tools, solve.Calls.Text(), solve.ToolCalls.Text(), solve.SandboxRuns.Text(), c.calls)
		}
		if c.calls == "∞" && !solve.USD.IsUnbounded() {
			t.Errorf("with a model-calling tool, cost %s: want unbounded", solve.USD.Text())
		}
	}
}

// TestOfflineModelsCostNothing: an offline model with no price: bills
// nothing, so its calls cost $0 in the plan as in a run (and under a cap)
// even with no max_tokens; its output tokens stay unbounded, named. A
// server's model with no price leaves the cost unbounded, once said.
func TestOfflineModelsCostNothing(t *testing.T) {
	p := loadText(t, `version: 1
name: offline
models:
  default: {provider: echo}
  local: {model: my-local-model}
inputs:
  q: {type: string, default: hi}
nodes:
  - id: say
    llm: {prompt: "Say ${{ inputs.q }}"}
  - id: other
    llm: {model: local, prompt: "Say ${{ inputs.q }}", max_tokens: 10}
`)
	pl := Make(p, Options{})
	say, other := row(t, pl, "say"), row(t, pl, "other")
	if v, ok := say.USD.Value(); !ok || v != 0 || !say.OutputTokens.IsUnbounded() {
		t.Errorf("echo: cost %s, output tokens %s; want $0 and unbounded", say.USD.Text(), say.OutputTokens.Text())
	}
	if v, ok := say.InputTokens.Value(); !ok || v <= 0 {
		t.Errorf("echo: input tokens %s, want the prompt's bound", say.InputTokens.Text())
	}
	if !other.USD.IsUnbounded() {
		t.Errorf("a server's model with no price: cost %s, want unbounded", other.USD.Text())
	}
	var why []string
	for _, r := range pl.Unbounded {
		why = append(why, r.Node+": "+r.Figure+": "+r.Why+"; "+r.Fix)
	}
	all := strings.Join(why, "\n")
	if !strings.Contains(all, "say: output tokens: no max_tokens") || strings.Contains(all, "say: output tokens and cost") ||
		strings.Count(all, "give") != 1 || !strings.Contains(all, "other: cost: model local (my-local-model) has no price") {
		t.Errorf("reasons:\n%s", all)
	}
}
