package main

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/flowrun/flowrun/llm/llmtest"
	"github.com/flowrun/flowrun/sandbox"
)

// scaleOutCheck is the Python step of scaleOutPipeline.
const scaleOutCheck = `    code:
      language: python
      source: |
        def check(text):
            return sum(i * i for i in range(20000)) > 0 and len(text) > 0
      call: check
      args: [nodes.ask.text]
`

// scaleOutPipeline is a latency-bound item with a CPU step: a model call,
// a Python check in the sandbox, a second model call.
const scaleOutPipeline = `
version: 1
name: scaleout
models: {default: {model: gpt-4.1-mini}}
inputs:
  id: {type: string}
nodes:
  - id: ask
    llm: {prompt: "solve ${{ inputs.id }}"}
  - id: check
` + scaleOutCheck + `  - id: answer
    llm: {prompt: "answer ${{ inputs.id }} ${{ nodes.check.result }}"}
outputs:
  ok: nodes.check.result
`

// noSandboxStep makes scaleOutPipeline purely latency-bound: the Python
// step becomes a set node.
var noSandboxStep = strings.NewReplacer(scaleOutCheck, "    set: {}\n", "nodes.check.result", "true")

func benchEnv(name string, def int) int {
	if v, err := strconv.Atoi(os.Getenv(name)); err == nil && v >= 0 {
		return v
	}
	return def
}

// BenchmarkClusterScaleOut measures items per minute of one batch run by
// 1, 2 and 4 worker processes through an embedded NATS server, and by one
// local flowrun batch with a single worker's concurrency, against the fake
// model answering after FLOWRUN_BENCH_LATENCY_MS (default 300), with a
// Python step per item unless FLOWRUN_BENCH_SANDBOX=0. Each
// configuration runs a warm-up batch first (the sandbox compiles Python
// once per process). bench/scaleout.sh derives the scaling ratios and the
// coordination overhead per item.
func BenchmarkClusterScaleOut(b *testing.B) {
	if err := sandbox.New(sandbox.Options{}).Check(sandbox.Python); err != nil {
		b.Skipf("needs Python in the sandbox: %v", err)
	}
	items := benchEnv("FLOWRUN_BENCH_ITEMS", 32)
	source := scaleOutPipeline
	if os.Getenv("FLOWRUN_BENCH_SANDBOX") == "0" {
		source = noSandboxStep.Replace(source)
	}
	latency := time.Duration(benchEnv("FLOWRUN_BENCH_LATENCY_MS", 300)) * time.Millisecond
	const perWorker = 2
	srv := llmtest.New(nil)
	defer srv.Close()
	srv.Handle(func(llmtest.Request) llmtest.Reply {
		return llmtest.Reply{Text: "the answer", Delay: latency, Usage: llmtest.Usage{Prompt: 20, Completion: 3}}
	})
	env := []string{"OPENAI_BASE_URL=" + srv.URL, "OPENAI_API_KEY=sk-bench"}
	dir := b.TempDir()
	pipeline := filepath.Join(dir, "scaleout.yaml")
	if err := os.WriteFile(pipeline, []byte(source), 0o644); err != nil {
		b.Fatal(err)
	}
	dataset := func(n int) string {
		var lines []string
		for i := range n {
			lines = append(lines, fmt.Sprintf(`{"id": "i%d"}`, i))
		}
		path := filepath.Join(dir, fmt.Sprintf("items-%d.jsonl", n))
		if err := os.WriteFile(path, []byte(strings.Join(lines, "\n")), 0o644); err != nil {
			b.Fatal(err)
		}
		return path
	}
	warm, timed := dataset(2*perWorker*4), dataset(items)
	batch := func(b *testing.B, data string, extra ...string) {
		args := append([]string{"batch", pipeline, "--dataset", data, "--store", filepath.Join(b.TempDir(), "runs.db")}, extra...)
		cmd := benchProcess(env, args...)
		if out, err := cmd.CombinedOutput(); err != nil {
			b.Fatalf("flowrun %s: %v\n%s", strings.Join(args, " "), err, out)
		}
	}
	measure := func(b *testing.B, extra ...string) {
		batch(b, warm, extra...)
		b.ResetTimer()
		for range b.N {
			batch(b, timed, extra...)
		}
		b.StopTimer()
		b.ReportMetric(float64(items*b.N)/b.Elapsed().Minutes(), "items/min")
	}
	b.Run("local", func(b *testing.B) { measure(b, "--concurrency", strconv.Itoa(perWorker)) })
	for _, n := range []int{1, 2, 4} {
		b.Run(fmt.Sprintf("workers=%d", n), func(b *testing.B) {
			ns := startNATS(b)
			for range n {
				startBenchWorker(b, env, ns.url(), perWorker)
			}
			measure(b, append([]string{"--nats", ns.url()}, coordinatorKeys(b)...)...)
		})
	}
}

func benchProcess(env []string, args ...string) *exec.Cmd {
	cmd := exec.Command(os.Args[0], args...)
	cmd.Env = append(append(os.Environ(), "FLOWRUN_TEST_AS_CLI=1", "GORACE=atexit_sleep_ms=0"), env...)
	return cmd
}

// startBenchWorker starts a worker and waits until it pulls items; it is
// killed when the benchmark ends.
func startBenchWorker(b *testing.B, env []string, url string, concurrency int) {
	cmd := benchProcess(env, append([]string{"worker", "--nats", url, "--concurrency", strconv.Itoa(concurrency), "--cache-dir", b.TempDir()}, workerKeys(b)...)...)
	ready := &readyWriter{said: "pulling items", ready: make(chan struct{})}
	cmd.Stderr = ready
	if err := cmd.Start(); err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { _ = cmd.Process.Kill(); _ = cmd.Wait() })
	select {
	case <-ready.ready:
	case <-time.After(durDeadline):
		b.Fatal("the worker did not start pulling items")
	}
}

// readyWriter closes ready once a write contains said.
type readyWriter struct {
	said  string
	ready chan struct{}
	once  sync.Once
}

func (w *readyWriter) Write(p []byte) (int, error) {
	if strings.Contains(string(p), w.said) {
		w.once.Do(func() { close(w.ready) })
	}
	return len(p), nil
}
