package nodes_test

import (
	"context"
	"net/http"
	"sync"
	"testing"
	"time"

	"github.com/openai/openai-go/v3"
	"github.com/openai/openai-go/v3/option"

	"github.com/flowrun/flowrun/llm"
	"github.com/flowrun/flowrun/nodes"
	"github.com/flowrun/flowrun/runtime"
)

// BenchmarkLLMMap runs 1,000 llm nodes in a map with max_concurrency 64
// against the in-process fake server, and the same 1,000 calls made by a
// bare openai-go loop on 64 goroutines, in the same run. It reports both
// rates and flowrun's time per call as a ratio of the bare loop's.
func BenchmarkLLMMap(b *testing.B) {
	const calls, workers = 1000, 64
	srv := okServer(b)
	p := load(b, `
version: 1
name: bench
models: {default: {model: gpt-4.1-mini}}
nodes:
  - id: fan
    map:
      over: 1..1000
      max_concurrency: 64
      body:
        - id: ask
          llm: {prompt: "item ${{ item }}"}
outputs: {n: len(nodes.fan)}
`, nil)
	// Both sides get the same connection pool, so the ratio is flowrun's own cost.
	transport := http.DefaultTransport.(*http.Transport).Clone()
	transport.MaxIdleConns, transport.MaxIdleConnsPerHost = 512, 256
	hc := &http.Client{Transport: transport}
	kinds := nodes.Kinds(nodes.Services{LLM: llm.New(llm.Options{Env: srv.Env(fakeKey), HTTPClient: hc})})
	client := openai.NewClient(option.WithBaseURL(srv.URL), option.WithAPIKey(fakeKey), option.WithMaxRetries(0), option.WithHTTPClient(hc))
	bare := func() {
		var wg sync.WaitGroup
		next := make(chan int)
		for range workers {
			wg.Add(1)
			go func() {
				defer wg.Done()
				for i := range next {
					_, err := client.Chat.Completions.New(context.Background(), openai.ChatCompletionNewParams{
						Model:    "gpt-4.1-mini",
						Messages: []openai.ChatCompletionMessageParamUnion{openai.UserMessage("item " + string(rune('0'+i%10)))},
					})
					if err != nil {
						b.Error(err)
					}
				}
			}()
		}
		for i := range calls {
			next <- i
		}
		close(next)
		wg.Wait()
	}
	var flowrunTime, bareTime time.Duration
	b.ResetTimer()
	for range b.N {
		start := time.Now()
		res := runtime.Run(context.Background(), kinds, p, nil, runtime.Options{})
		flowrunTime += time.Since(start)
		if res.Status != runtime.StatusCompleted {
			b.Fatalf("status %s: %v", res.Status, res.Err)
		}
		start = time.Now()
		bare()
		bareTime += time.Since(start)
	}
	n := float64(b.N * calls)
	b.ReportMetric(n/flowrunTime.Seconds(), "flowrun_calls/s")
	b.ReportMetric(n/bareTime.Seconds(), "openai-go_calls/s")
	b.ReportMetric(flowrunTime.Seconds()/bareTime.Seconds(), "time_ratio")
}
