package main

import (
	"path/filepath"
	"strings"
	"testing"

	"github.com/flowrun/flowrun/llm/llmtest"
)

// TestCostCapWarnsOfUnpricedModels: a run under limits.max_cost_usd
// warns of each model without a price, whose calls the cap cannot
// bound, and not of a priced one.
func TestCostCapWarnsOfUnpricedModels(t *testing.T) {
	dir := t.TempDir()
	srv := llmtest.New(t)
	srv.Handle(func(llmtest.Request) llmtest.Reply { return llmtest.Reply{Text: "ok"} })
	useModel(t, srv)
	p := writeFile(t, dir, "p.yaml", `
version: 1
name: p
models:
  default: {model: gpt-4.1-mini}
  local: {model: my-llama}
limits: {max_cost_usd: 1}
nodes:
  - id: ask
    llm: {model: local, prompt: "hi", max_tokens: 10}
`)
	code, _, stderr := flowrun(t, "run", p, "--store", filepath.Join(dir, "runs.db"))
	if code != exitOK || !strings.Contains(stderr, "flowrun run: warning: model local (my-llama) has no price, so a cost cap cannot hold for its calls") || strings.Contains(stderr, "model default") {
		t.Fatalf("exit %d\n%s", code, stderr)
	}
}
