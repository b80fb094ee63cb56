package llm

import (
	"context"
	"sync"
	"testing"

	"github.com/openai/openai-go/v3"
	"github.com/openai/openai-go/v3/option"

	"github.com/flowrun/flowrun/llm/llmtest"
	"github.com/flowrun/flowrun/llmconf"
)

// The pair of benchmarks measures the layer's overhead per call: b.N calls
// from 64 workers to the fake server, through Client.Complete and through
// bare openai-go with the same HTTP transport.
//
//	go test ./llm -run '^$' -bench 'Calls' -benchtime 1000x

const benchWorkers = 64

func benchServer(b *testing.B) *llmtest.Server {
	srv := llmtest.New(b)
	srv.Handle(func(llmtest.Request) llmtest.Reply {
		return llmtest.Reply{Text: "ok", Usage: llmtest.Usage{Prompt: 20, Completion: 2}}
	})
	return srv
}

func inWorkers(b *testing.B, call func() error) {
	jobs := make(chan struct{})
	var wg sync.WaitGroup
	for range benchWorkers {
		wg.Go(func() {
			for range jobs {
				if err := call(); err != nil {
					b.Error(err)
				}
			}
		})
	}
	b.ResetTimer()
	for range b.N {
		jobs <- struct{}{}
	}
	close(jobs)
	wg.Wait()
	b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "calls/s")
}

func BenchmarkCallsFlowrun(b *testing.B) {
	srv := benchServer(b)
	c := New(Options{Env: srv.Env(fakeKey)})
	m := &llmconf.Model{Name: "default", Model: "gpt-4.1-mini", MaxConcurrency: benchWorkers}
	req := Request{Key: Key{Node: "map/llm"}, Model: m, Messages: []Message{{Role: RoleSystem, Text: "Be brief."}, {Role: RoleUser, Text: "Say ok."}}}
	inWorkers(b, func() error {
		_, err := c.Complete(context.Background(), req)
		return err
	})
}

func BenchmarkCallsBareOpenAI(b *testing.B) {
	srv := benchServer(b)
	client := openai.NewClient(option.WithBaseURL(srv.URL+"/"), option.WithAPIKey(fakeKey),
		option.WithMaxRetries(0), option.WithHTTPClient(defaultHTTPClient()))
	params := openai.ChatCompletionNewParams{
		Model:    "gpt-4.1-mini",
		Messages: []openai.ChatCompletionMessageParamUnion{openai.SystemMessage("Be brief."), openai.UserMessage("Say ok.")},
	}
	inWorkers(b, func() error {
		_, err := client.Chat.Completions.New(context.Background(), params)
		return err
	})
}
