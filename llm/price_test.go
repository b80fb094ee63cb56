package llm

import (
	"math"
	"testing"

	"github.com/flowrun/flowrun/llmconf"
)

func TestLookupPrice(t *testing.T) {
	cases := []struct {
		model string
		in    float64
		ok    bool
	}{
		{"gpt-4.1", 2.00, true},
		{"gpt-4.1-mini", 0.40, true},
		{"gpt-4.1-mini-2025-04-14", 0.40, true},
		{"gpt-4o-2024-08-06", 2.50, true},
		{"gpt-4o-mini-2024-07-18", 0.15, true},
		{"o3", 2.00, true},
		{"o4-mini", 1.10, true},
		{"gpt-5", 1.25, true},
		{"gpt-5-mini", 0.25, true},
		{"gpt-5-nano-2025-08-07", 0.05, true},
		{"gpt-4o-audio-preview", 0, false}, // not priced like gpt-4o
		{"llama3.1:8b", 0, false},
	}
	for _, tc := range cases {
		p, ok := LookupPrice(tc.model, nil)
		if ok != tc.ok || p.InputPerMTok != tc.in {
			t.Errorf("%s: %+v %v, want input %v %v", tc.model, p, ok, tc.in, tc.ok)
		}
	}
	over := &llmconf.Price{InputPerMTok: 1, OutputPerMTok: 2}
	if p, ok := LookupPrice("llama3.1:8b", over); !ok || p != *over {
		t.Errorf("override ignored: %+v", p)
	}
}

func TestCost(t *testing.T) {
	cases := []struct {
		name  string
		usage Usage
		price llmconf.Price
		want  float64
	}{
		{"plain", Usage{Prompt: 1_000_000, Completion: 1_000_000}, llmconf.Price{InputPerMTok: 2, OutputPerMTok: 8}, 10},
		{"cached at cached rate", Usage{Prompt: 1_000_000, Cached: 500_000, Completion: 0}, llmconf.Price{InputPerMTok: 2, CachedInputPerMTok: 0.5, OutputPerMTok: 8}, 1.25},
		{"cached without cached rate", Usage{Prompt: 1_000_000, Cached: 500_000}, llmconf.Price{InputPerMTok: 2, OutputPerMTok: 8}, 2},
		{"reasoning is inside completion", Usage{Prompt: 0, Completion: 1000, Reasoning: 800}, llmconf.Price{InputPerMTok: 1, OutputPerMTok: 4}, 0.004},
		{"free local model", Usage{Prompt: 5000, Completion: 5000}, llmconf.Price{}, 0},
	}
	for _, tc := range cases {
		if got := Cost(tc.usage, tc.price); math.Abs(got-tc.want) > 1e-12 {
			t.Errorf("%s: %v, want %v", tc.name, got, tc.want)
		}
	}
}

func TestCostUsesOverrideThenAnsweringModel(t *testing.T) {
	u := Usage{Prompt: 1_000_000}
	if got := cost(u, &llmconf.Model{Model: "my-finetune", Price: &llmconf.Price{InputPerMTok: 3}}, "whatever"); got != 3 {
		t.Errorf("override: %v", got)
	}
	if got := cost(u, &llmconf.Model{Model: "my-alias"}, "gpt-4.1-2025-04-14"); got != 2 {
		t.Errorf("answering model: %v", got)
	}
	if got := cost(u, &llmconf.Model{Model: "local"}, "local"); got != 0 {
		t.Errorf("unknown: %v", got)
	}
}
