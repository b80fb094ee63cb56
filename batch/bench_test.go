package batch

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/flowrun/flowrun/dsl"
	"github.com/flowrun/flowrun/llm/llmtest"
	"github.com/flowrun/flowrun/runtime"
	"github.com/flowrun/flowrun/store"
)

const benchPipeline = `
version: 1
name: bench
models:
  default: {model: gpt-4.1-mini%s}
inputs:
  question: {type: string}
nodes:
  - id: answer
    llm: {prompt: "${{ inputs.question }}"}
outputs:
  answer: nodes.answer.text
score:
  exact: outputs.answer == item.expected
`

// benchBatch runs a batch of n items of benchPipeline (the model config
// gets extra) against the endpoint env points at, as flowrun batch does:
// one durable run per item in a SQLite store, eight at a time, scored.
func benchBatch(b *testing.B, n int, extra string, env func(string) (string, bool)) []*store.BatchItem {
	b.Helper()
	dir := b.TempDir()
	var lines strings.Builder
	for i := range n {
		fmt.Fprintf(&lines, "{\"question\": \"q%d\", \"expected\": \"ok\"}\n", i)
	}
	data := filepath.Join(dir, "d.jsonl")
	if err := os.WriteFile(data, []byte(lines.String()), 0o644); err != nil {
		b.Fatal(err)
	}
	path := filepath.Join(dir, "p.yaml")
	if err := os.WriteFile(path, []byte(fmt.Sprintf(benchPipeline, extra)), 0o644); err != nil {
		b.Fatal(err)
	}
	p, ds := dsl.Load(path)
	if p == nil {
		b.Fatal(ds)
	}
	st, err := store.Open(filepath.Join(dir, "runs.db"))
	if err != nil {
		b.Fatal(err)
	}
	defer st.Close()
	ctx := context.Background()
	b.ResetTimer()
	d, err := ReadDataset(data)
	if err != nil {
		b.Fatal(err)
	}
	r := &Runner{Store: st, Pipeline: p, Runs: share(b, engineFor(b, st, env), p), Scorer: NewScorer(p, nil), Concurrency: 8}
	bt := &store.Batch{Pipeline: path, PipelineHash: p.Hash, Dataset: data, DatasetHash: d.Hash}
	if err := r.Create(ctx, bt, d.Items, func(*store.Batch) {}); err != nil {
		b.Fatal(err)
	}
	status, reason, err := r.Run(ctx, bt, d.Items)
	if err != nil || status != runtime.StatusCompleted {
		b.Fatalf("batch %s (%s): %v", status, reason, err)
	}
	b.StopTimer()
	items, err := st.BatchItems(ctx, bt.ID)
	if err != nil {
		b.Fatal(err)
	}
	return items
}

// BenchmarkBatchOverhead is flowrun's own cost per item: b.N items through
// a one-llm-node pipeline against the in-process fake model answering at
// once (target: under 1 ms per item; bench/batch.sh runs 10,000 and
// reports the peak RSS).
func BenchmarkBatchOverhead(b *testing.B) {
	srv := llmtest.New(b)
	srv.Handle(func(llmtest.Request) llmtest.Reply {
		return llmtest.Reply{Text: "ok", Usage: llmtest.Usage{Prompt: 10, Completion: 1}}
	})
	items := benchBatch(b, b.N, "", srv.Env("sk-bench"))
	for _, it := range items {
		if it.Scores["exact"] != true {
			b.Fatalf("item %s: %+v", it.Key, it)
		}
	}
	b.ReportMetric(float64(b.Elapsed().Microseconds())/float64(b.N), "us/item")
}

// BenchmarkBatchThroughput runs a batch against the rate-limited fake
// server at FLOWRUN_BENCH_URL (bench/batch.sh starts one) with the model's
// rpm set to its limit, FLOWRUN_BENCH_RPM, and reports the requests per
// minute achieved as a fraction of it (target: at least 0.95) and the
// items that failed on a 429 (target: none). Run it with -benchtime=1x.
func BenchmarkBatchThroughput(b *testing.B) {
	url, rpm := os.Getenv("FLOWRUN_BENCH_URL"), os.Getenv("FLOWRUN_BENCH_RPM")
	if url == "" || rpm == "" {
		b.Skip("needs a rate-limited server: FLOWRUN_BENCH_URL and FLOWRUN_BENCH_RPM (bench/batch.sh sets them)")
	}
	limit, err := strconv.Atoi(rpm)
	if err != nil {
		b.Fatal(err)
	}
	n := limit / 2 // half a minute at the limit
	if s := os.Getenv("FLOWRUN_BENCH_ITEMS"); s != "" {
		n, _ = strconv.Atoi(s)
	}
	env := func(name string) (string, bool) {
		switch name {
		case "OPENAI_BASE_URL":
			return url, true
		case "OPENAI_API_KEY":
			return "sk-bench", true
		}
		return "", false
	}
	start := time.Now()
	items := benchBatch(b, n, fmt.Sprintf(", rpm: %d", limit), env)
	elapsed := time.Since(start)
	limited := 0
	for _, it := range items {
		if it.Status != runtime.StatusCompleted {
			limited++
			b.Logf("item %s %s: %s: %s", it.Key, it.Status, it.Class, it.Error)
		}
	}
	// n requests start 60/rpm s apart: the first at 0, the last at
	// (n-1)*60/rpm; the window the limit allows for them ends there.
	b.ReportMetric(float64(n-1)/elapsed.Minutes()/float64(limit), "rpm_fraction")
	b.ReportMetric(float64(limited), "failed_items")
	b.ReportMetric(float64(n), "items")
}
