package llm

import (
	"context"
	"errors"
	"path/filepath"
	"strings"
	"testing"

	"github.com/flowrun/flowrun/budget"
	"github.com/flowrun/flowrun/errclass"
	"github.com/flowrun/flowrun/llmconf"
)

// TestOfflineModels: echo replies with the last user message and mock
// with the first reply of its file that matches, a structured one
// validated against the output schema; neither needs a key or a server,
// and each goes through the client as a server's reply would: observed,
// recorded into a cassette and replayed from it, counted against a cost
// cap and refused by one it cannot fit.
func TestOfflineModels(t *testing.T) {
	ctx := context.Background()
	noEnv := func(string) (string, bool) { return "", false }
	mock, err := llmconf.ParseMock([]byte(`
replies:
  - input: "(?s)grade.*Paris"
    json: {verdict: true, reasoning: It names Paris.}
  - prompt: capital of France
    text: Paris
`))
	if err != nil {
		t.Fatal(err)
	}
	echo := &llmconf.Model{Name: "default", Model: "echo", Provider: llmconf.ProviderEcho}
	mocked := &llmconf.Model{Name: "grader", Model: "mock", Provider: llmconf.ProviderMock, MockFile: "replies.yaml", Mock: mock,
		Price: &llmconf.Price{InputPerMTok: 1000, OutputPerMTok: 1000}}
	rec := NewCassette()
	var seen []Exchange
	c := New(Options{Env: noEnv, Record: rec})
	user := func(text string) []Message {
		return []Message{{Role: RoleSystem, Text: "Be brief."}, {Role: RoleUser, Text: text}}
	}

	resp, err := c.Complete(ctx, Request{Model: echo, Messages: user("say this back"), Key: Key{Node: "a"}, Observe: func(x Exchange) { seen = append(seen, x) }})
	if err != nil || resp.Text != "say this back" || resp.Usage.Total == 0 {
		t.Fatalf("echo: %+v, %v", resp, err)
	}
	if len(seen) != 1 || seen[0].Endpoint != "offline:echo" {
		t.Errorf("echo's exchange observed as %+v", seen)
	}
	resp, err = c.Complete(ctx, Request{Model: mocked, Messages: user("What is the capital of France?"), Key: Key{Node: "b"}})
	if err != nil || resp.Text != "Paris" || resp.CostUSD <= 0 {
		t.Fatalf("mock by prompt: %+v, %v", resp, err)
	}
	schema := map[string]any{"type": "object", "required": []any{"verdict", "reasoning"}, "additionalProperties": false,
		"properties": map[string]any{"verdict": map[string]any{"type": "boolean"}, "reasoning": map[string]any{"type": "string"}}}
	resp, err = c.Complete(ctx, Request{Model: mocked, Messages: []Message{{Role: RoleSystem, Text: "You grade answers."}, {Role: RoleUser, Text: "Answer: Paris"}},
		OutputSchema: schema, Key: Key{Node: "judge"}})
	if err != nil || resp.JSON.(map[string]any)["verdict"] != true {
		t.Fatalf("mock judge: %+v, %v", resp, err)
	}
	_, err = c.Complete(ctx, Request{Model: mocked, Messages: user("What is the capital of Peru?"), Key: Key{Node: "c"}})
	var le *Error
	if !errors.As(err, &le) || le.Class() != errclass.Critical || !strings.Contains(err.Error(), `no reply of the mock file replies.yaml matches the prompt "What is the capital of Peru?"`) {
		t.Errorf("a prompt no reply matches: %v", err)
	}

	ledger := budget.New("batch", 0.000001, 0, nil)
	_, err = c.Complete(ctx, Request{Model: mocked, Messages: user("What is the capital of France?"), MaxTokens: 100, Key: Key{Node: "b"}, Ledger: ledger})
	if !errors.As(err, new(*budget.ExceededError)) {
		t.Errorf("a call the cap cannot fit: %v", err)
	}

	if rec.Len() != 4 {
		t.Fatalf("%d exchanges recorded, want the 3 answered and the one no reply matched", rec.Len())
	}
	path := filepath.Join(t.TempDir(), "offline.cassette.yaml")
	if err := rec.WriteFile(path); err != nil {
		t.Fatal(err)
	}
	cas, err := LoadCassette(path)
	if err != nil {
		t.Fatal(err)
	}
	replay := New(Options{Env: noEnv, Replay: cas})
	resp, err = replay.Complete(ctx, Request{Model: echo, Messages: user("say this back"), Key: Key{Node: "a"}})
	if err != nil || resp.Text != "say this back" {
		t.Errorf("echo replayed: %+v, %v", resp, err)
	}
}

// An offline model with no price: bills nothing: its worst case is $0,
// with or without max_tokens, and it is not listed as unpriced, while a
// server's unknown model is.
func TestOfflineModelsArePricedAtZero(t *testing.T) {
	echo := &llmconf.Model{Name: "default", Model: "echo", Provider: llmconf.ProviderEcho}
	local := &llmconf.Model{Name: "local", Model: "my-local-model"}
	b, err := WorstCase(&Request{Model: echo, Messages: []Message{{Role: RoleUser, Text: "hi"}}})
	if err != nil || b.USD != 0 || b.InputTokens <= 0 {
		t.Errorf("echo's worst case: %+v, %v; want $0 and its input bounded", b, err)
	}
	un := Unpriced(map[string]*llmconf.Model{"default": echo, "local": local})
	if len(un) != 1 || un[0].Name != "local" {
		t.Errorf("unpriced: %v, want local alone", un)
	}
}
