package eventview

import (
	"encoding/json"
	"flag"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/flowrun/flowrun/runtime"
	"github.com/flowrun/flowrun/tokens"
)

var update = flag.Bool("update", false, "rewrite testdata/lines.golden")

// TestEveryEventTypeDescribed fails when runtime records an event type
// that has no description here, or a description names a type runtime
// does not record.
func TestEveryEventTypeDescribed(t *testing.T) {
	types := runtime.EventTypes()
	for _, typ := range types {
		if !Described(typ) {
			t.Errorf("event type %q has no description in eventview", typ)
		}
	}
	for typ := range descriptions {
		if !slices.Contains(types, typ) {
			t.Errorf("eventview describes %q, which runtime.EventTypes does not list", typ)
		}
	}
}

// events is one event of every type (two where the line differs by
// outcome), and one of a type runtime does not have.
func events() []runtime.Event {
	at := time.Date(2026, 11, 26, 12, 0, 0, 0, time.UTC)
	return []runtime.Event{
		{Type: runtime.EventRunStarted, Run: "r1", Pipeline: "sir"},
		{Type: runtime.EventRunStarted, Run: "r2", Pipeline: "sir", ForkOf: "r1"},
		{Type: runtime.EventNodeStarted, Run: "r1", Path: "refine[1]/translate", Kind: "agent"},
		{Type: runtime.EventNodeFinished, Run: "r1", Path: "refine[1]/translate", Kind: "agent", DurationMS: 1234},
		{Type: runtime.EventNodeRestored, Run: "r1", Path: "prepare", Kind: "set"},
		{Type: runtime.EventNodeSkipped, Run: "r1", Path: "route", Kind: "branch"},
		{Type: runtime.EventNodeFailed, Run: "r1", Path: "code", Kind: "code", Class: "timeout", Error: "took too long", Message: "on_error: continue"},
		{Type: runtime.EventNodeRetry, Run: "r1", Path: "ask_model", Attempt: 2, DurationMS: 500, Class: "rate_limit", Error: "429"},
		{Type: runtime.EventLoopExhausted, Run: "r1", Path: "refine", Message: "max_iterations (3) reached", Error: ""},
		{Type: runtime.EventMapItemSkipped, Run: "r1", Path: "each[2]", Message: "item skipped:", Error: "bad input"},
		{Type: runtime.EventModelTurn, Run: "r1", Path: "ask_model", Kind: "llm", Turn: &runtime.Turn{Model: "gpt-4.1", Try: 1,
			Usage: &tokens.Usage{Prompt: 10, Completion: 5, Total: 15}, CostUSD: 0.0012, LatencyMS: 800,
			Reply: map[string]any{"text": "Let me look.", "tool_calls": []any{map[string]any{"name": "ocr", "arguments": `{"region":"top"}`}}}}},
		{Type: runtime.EventModelTurn, Run: "r1", Path: "ask_model", Kind: "llm", Turn: &runtime.Turn{Model: "gpt-4.1", Try: 2,
			Usage: &tokens.Usage{Total: 40, Estimated: true}, CostUSD: 0.0001, LatencyMS: 20}},
		{Type: runtime.EventModelTurn, Run: "r1", Path: "ask_model", Kind: "llm", Turn: &runtime.Turn{Model: "gpt-4.1", Try: 1,
			Class: "rate_limit", Error: "429 Too Many Requests", WaitMS: 1500}},
		{Type: runtime.EventModelTurn, Run: "r1", Path: "ask_model", Kind: "llm", Turn: &runtime.Turn{Model: "gpt-4.1", Cached: true}},
		{Type: runtime.EventToolCall, Run: "r1", Path: "refine[1]/translate", Tool: &runtime.ToolCall{Name: "ocr", Args: map[string]any{"region": "top"}, Result: "HELLO"}},
		{Type: runtime.EventToolCall, Run: "r1", Path: "refine[1]/translate", Tool: &runtime.ToolCall{Name: "ocr", Error: "no such region"}},
		{Type: runtime.EventRunFinished, Run: "r3", Status: runtime.StatusWaiting, Message: `waiting for an answer to "name": Who are you?`},
		{Type: runtime.EventToolProgress, Run: "r1", Path: "search", Tool: &runtime.ToolCall{Name: "crawl"}, Message: "page 2 of 5\nmore"},
		{Type: runtime.EventRemoteWork, Run: "r1", Path: "plan", Remote: &runtime.RemoteWork{What: "created", ID: "resp_1", Status: "queued"}},
		{Type: runtime.EventRemoteWork, Run: "r1", Path: "plan", Remote: &runtime.RemoteWork{What: "polled", ID: "resp_1", Status: "in_progress", Polls: 3}},
		{Type: runtime.EventRemoteWork, Run: "r1", Path: "plan", Remote: &runtime.RemoteWork{What: "completed", ID: "resp_1", Status: "completed", Polls: 12}},
		{Type: runtime.EventRemoteWork, Run: "r1", Path: "plan", Remote: &runtime.RemoteWork{What: "cancelled", ID: "resp_1", Error: "503 from the server"}},
		{Type: runtime.EventSandboxRun, Run: "r1", Path: "run_code", Kind: "python", DurationMS: 42, Output: map[string]any{"stdout": "hi\n"}},
		{Type: runtime.EventSandboxRun, Run: "r1", Path: "run_code", Kind: "python", DurationMS: 42, Class: "exception", Error: "ZeroDivisionError\ntraceback"},
		{Type: runtime.EventQuestion, Run: "r1", Path: "confirm", Message: "Go on?", Status: runtime.StatusWaiting},
		{Type: runtime.EventQuestion, Run: "r1", Path: "name", Message: "Your name?", Output: "Ada"},
		{Type: runtime.EventRunFinished, Run: "r1", Status: runtime.StatusFailed, Error: "node \"code\": timeout"},
		{Type: "budget_warning", Run: "r1", Path: "ask_model", Message: "80% of max_cost_usd spent", Time: at},
	}
}

// TestLines checks the CLI line, the web text and the exchange of every
// event type against testdata/lines.golden (go test -update rewrites it).
func TestLines(t *testing.T) {
	var b strings.Builder
	for _, e := range events() {
		v := Describe(e)
		b.WriteString(e.Type + "\n")
		b.WriteString("line: " + v.Line() + "\n")
		b.WriteString("text: " + v.Text() + "\n")
		if v.Exchange != "" {
			x, _ := json.Marshal(v.Exchange)
			b.WriteString("exchange: " + string(x) + "\n")
		}
		b.WriteString("\n")
	}
	golden := filepath.Join("testdata", "lines.golden")
	if *update {
		if err := os.WriteFile(golden, []byte(b.String()), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	want, err := os.ReadFile(golden)
	if err != nil {
		t.Fatal(err)
	}
	if b.String() != string(want) {
		t.Errorf("lines differ from %s (go test -update rewrites it):\n%s", golden, b.String())
	}
}

// TestUnknownType checks that an event of a type eventview does not know
// reads by its type, message and error rather than as nothing.
func TestUnknownType(t *testing.T) {
	v := Describe(runtime.Event{Type: "budget_warning", Path: "ask_model", Message: "80% spent", Error: "close"})
	if line := v.Line(); !strings.Contains(line, "budget_warning") || !strings.Contains(line, "80% spent close") || !strings.Contains(line, "ask_model") {
		t.Errorf("line %q", line)
	}
	if !v.Failed || v.Tag != "budget_warning" {
		t.Errorf("view %+v", v)
	}
}
