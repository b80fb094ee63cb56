package nodes_test

import (
	"context"
	"path/filepath"
	"testing"
	"time"

	"github.com/flowrun/flowrun/engine"
	"github.com/flowrun/flowrun/llm"
	"github.com/flowrun/flowrun/llm/llmtest"
	"github.com/flowrun/flowrun/nodes"
	"github.com/flowrun/flowrun/runtime"
	"github.com/flowrun/flowrun/store"
)

// BenchmarkModelNodeCache runs a loop of 200 identical llm nodes as
// `flowrun run` does (engine.Runner, a SQLite run store, its events and
// checkpoints) three ways in each iteration: every call live to the
// in-process fake server, every call answered from the response cache,
// and live again with no store. It reports µs per llm node for each, the
// live/hit ratio, and the store's share (events and checkpoints) of a live
// node.
//
//	go test ./nodes -run '^$' -bench ModelNodeCache -benchtime 20x -count 5
func BenchmarkModelNodeCache(b *testing.B) {
	const steps = 200
	srv := okServer(b)
	p := load(b, `
version: 1
name: bench
models: {default: {model: gpt-4.1-mini, temperature: 0, stream: false}}
state: {n: 0}
nodes:
  - id: steps
    loop:
      max_iterations: 200
      until: state.n >= 200
      body:
        - id: ask
          llm: {prompt: "Say ok."}
          set: {n: state.n + 1}
outputs: {n: state.n}
`, nil)
	st, err := store.Open(filepath.Join(b.TempDir(), "runs.db"))
	if err != nil {
		b.Fatal(err)
	}
	defer st.Close()
	live := llm.New(llm.Options{Env: srv.Env(fakeKey)})
	cached := llm.New(llm.Options{Env: srv.Env(fakeKey), CacheDefault: llm.CacheOn})
	cached.UseCache(st)
	liveRunner := &engine.Runner{Store: st, Kinds: nodes.Kinds(nodes.Services{LLM: live})}
	hitRunner := &engine.Runner{Store: st, Kinds: nodes.Kinds(nodes.Services{LLM: cached})}
	run := func(r *engine.Runner) time.Duration {
		start := time.Now()
		res, err := r.Start(context.Background(), p, nil)
		if err != nil || res.Status != runtime.StatusCompleted || res.Outputs["n"] != steps {
			b.Fatalf("run: %v %+v", err, res)
		}
		return time.Since(start)
	}
	run(hitRunner) // fills the cache: one request, then hits
	var liveTime, hitTime, bareTime time.Duration
	b.ResetTimer()
	for range b.N {
		before := srv.Calls()
		hitTime += run(hitRunner)
		if srv.Calls() != before {
			b.Fatalf("%d requests reached the server on cache hits", srv.Calls()-before)
		}
		liveTime += run(liveRunner)
		start := time.Now()
		res := runtime.Run(context.Background(), nodes.Kinds(nodes.Services{LLM: live}), p, nil, runtime.Options{})
		if res.Status != runtime.StatusCompleted {
			b.Fatalf("status %s: %v", res.Status, res.Err)
		}
		bareTime += time.Since(start)
	}
	perNode := func(d time.Duration) float64 { return float64(d.Nanoseconds()) / 1e3 / float64(b.N*steps) }
	b.ReportMetric(perNode(liveTime), "live_us/node")
	b.ReportMetric(perNode(hitTime), "hit_us/node")
	b.ReportMetric(liveTime.Seconds()/hitTime.Seconds(), "live/hit")
	b.ReportMetric(perNode(liveTime-bareTime), "store_us/node")
}

// okServer is a fake server answering every request "ok", closed when b
// ends.
func okServer(b *testing.B) *llmtest.Server {
	srv := llmtest.New(nil)
	b.Cleanup(srv.Close)
	srv.Handle(func(llmtest.Request) llmtest.Reply {
		return llmtest.Reply{Text: "ok", Usage: llmtest.Usage{Prompt: 10, Completion: 2}}
	})
	return srv
}
