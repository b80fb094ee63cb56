package llm

import (
	"context"
	"math"
	"os"
	"testing"

	"github.com/tiktoken-go/tokenizer"
	"gopkg.in/yaml.v3"

	"github.com/flowrun/flowrun/llm/llmtest"
	"github.com/flowrun/flowrun/llmconf"
)

type corpusItem struct {
	Model      string     `yaml:"model"`
	Messages   []Message  `yaml:"messages"`
	Tools      []ToolSpec `yaml:"tools"`
	Reply      string     `yaml:"reply"`
	Prompt     int        `yaml:"prompt"`
	Completion *int       `yaml:"completion"` // nil: not published, not checked
}

// A server that reports no usage gets its tokens counted locally, within
// 5% of what a server reported for the same exchange, in both streaming
// modes and on both APIs; a server that reports usage is believed.
func TestUsageEstimatedWithin5Percent(t *testing.T) {
	raw, err := os.ReadFile("testdata/usage_corpus.yaml")
	if err != nil {
		t.Fatal(err)
	}
	var corpus []corpusItem
	if err := yaml.Unmarshal(raw, &corpus); err != nil {
		t.Fatal(err)
	}
	within := func(got, want int) bool { return math.Abs(float64(got-want)) <= 0.05*float64(want) }
	for i, it := range corpus {
		completion, checkCompletion := 0, it.Completion != nil
		if checkCompletion {
			completion = *it.Completion
		}
		for _, api := range []string{APIChat, APIResponses} {
			for _, stream := range []string{"true", "false"} {
				srv := llmtest.New(t)
				srv.Push(llmtest.Reply{Text: it.Reply, NoUsage: true},
					llmtest.Reply{Text: it.Reply, Usage: llmtest.Usage{Prompt: it.Prompt, Completion: completion}})
				c, _ := testClient(t, srv)
				m := &llmconf.Model{Name: "default", Model: it.Model, API: api, Stream: stream}
				if _, ok := LookupPrice(it.Model, nil); !ok {
					// gpt-4 (cl100k) is not in the price table: priced as a user would.
					m.Price = &llmconf.Price{InputPerMTok: 30, OutputPerMTok: 60}
				}
				req := Request{Model: m, Messages: it.Messages, Tools: it.Tools}
				est, err := c.Complete(context.Background(), req)
				if err != nil {
					t.Fatal(err)
				}
				u := est.Usage
				if !u.Estimated || !within(u.Prompt, it.Prompt) || (checkCompletion && !within(u.Completion, completion)) || u.Total != u.Prompt+u.Completion {
					t.Errorf("item %d (%s) %s stream=%s: estimated %+v, want prompt %d completion %d", i+1, it.Model, api, stream, u, it.Prompt, completion)
				}
				if est.CostUSD == 0 {
					t.Errorf("item %d %s stream=%s: estimated usage costs nothing", i+1, api, stream)
				}
				reported, err := c.Complete(context.Background(), req)
				if err != nil {
					t.Fatal(err)
				}
				if r := reported.Usage; r.Estimated || r.Prompt != it.Prompt || r.Completion != completion {
					t.Errorf("item %d %s stream=%s: reported usage became %+v", i+1, api, stream, r)
				}
			}
		}
	}
}

func TestEncodingForModel(t *testing.T) {
	for model, want := range map[string]tokenizer.Encoding{
		"gpt-4o-mini": tokenizer.O200kBase, "gpt-4.1-2025-04-14": tokenizer.O200kBase, "o3": tokenizer.O200kBase,
		"o4-mini": tokenizer.O200kBase, "gpt-5-nano": tokenizer.O200kBase, "openai/gpt-4o": tokenizer.O200kBase,
		"gpt-4": tokenizer.Cl100kBase, "gpt-3.5-turbo": tokenizer.Cl100kBase, "llama3.1:8b": tokenizer.Cl100kBase,
		"qwen2.5-7b-instruct": tokenizer.Cl100kBase,
	} {
		if got := encodingFor(model); got != want {
			t.Errorf("%s: %s, want %s", model, got, want)
		}
	}
}
