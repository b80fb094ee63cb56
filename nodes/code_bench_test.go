package nodes_test

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/flowrun/flowrun/internal/procstat"
	"github.com/flowrun/flowrun/internal/scoringbench"
	"github.com/flowrun/flowrun/nodes"
	"github.com/flowrun/flowrun/runtime"
	"github.com/flowrun/flowrun/sandbox"
)

// BenchmarkCodeMapScoring scores 1,000 candidate transforms against 4
// train pairs in a map of code nodes, at max_concurrency 2 and 8, and
// reports transforms per second, how many sandbox workers the run started
// (the sandbox's pool, not the map, decides that; a worker is replaced
// after 500 runs), and the rates of the same scoring done natively
// (FLOWRUN_BENCH_PYTHON, or python3) by as many subprocesses at once, one
// per candidate, and by a persistent multiprocessing pool of as many
// workers (scoringbench.NativePool), each run back to back with the map.
func BenchmarkCodeMapScoring(b *testing.B) {
	const n = 1000
	for _, conc := range []int{2, 8} {
		b.Run("max_concurrency="+strconv.Itoa(conc), func(b *testing.B) {
			var started atomic.Int64
			exe, err := os.Executable()
			if err != nil {
				b.Fatal(err)
			}
			sb := sandbox.New(sandbox.Options{WorkerCommand: func() *exec.Cmd {
				started.Add(1)
				cmd := exec.Command(exe)
				cmd.Env = []string{sandbox.WorkerEnv + "=1", "HOME=" + os.Getenv("HOME"), "XDG_CACHE_HOME=" + os.Getenv("XDG_CACHE_HOME")}
				return cmd
			}})
			defer sb.Close()
			if err := sb.Check(sandbox.Python); err != nil {
				b.Skip(err)
			}
			kinds := nodes.Kinds(nodes.Services{Sandbox: sb})
			p := load(b, fmt.Sprintf(`
version: 1
name: scoring
inputs:
  candidates: {type: array, items: {type: string}}
  pairs: {type: array}
nodes:
  - id: scores
    map:
      over: inputs.candidates
      max_concurrency: %d
      result: nodes.score.result
      body:
        - id: score
          code:
            language: python
            source: "${{ item }}"
            call: score
            args: [inputs.pairs]
outputs: {scores: nodes.scores}
`, conc), nil)
			inputs := map[string]any{"candidates": scoringbench.Candidates(n), "pairs": scoringbench.TrainPairs()}
			// One call first, so that the image and the compiled module are ready.
			if res := runtime.Run(context.Background(), kinds, p, map[string]any{"candidates": scoringbench.Candidates(1), "pairs": scoringbench.TrainPairs()}, runtime.Options{}); res.Status != runtime.StatusCompleted {
				b.Fatalf("status %s: %v", res.Status, res.Err)
			}
			native := nativeScoring(b, inputs["candidates"].([]any), conc)
			pool := nativePoolScoring(b, inputs, conc)
			var elapsed, parentCPU time.Duration
			b.ResetTimer()
			for range b.N {
				start, cpu := time.Now(), procstat.CPUTime()
				res := runtime.Run(context.Background(), kinds, p, inputs, runtime.Options{})
				elapsed += time.Since(start)
				parentCPU += procstat.CPUTime() - cpu
				if res.Status != runtime.StatusCompleted {
					b.Fatalf("status %s: %v", res.Status, res.Err)
				}
				if got := len(res.Outputs["scores"].([]any)); got != n {
					b.Fatalf("%d scores, want %d", got, n)
				}
			}
			b.ReportMetric(float64(n*b.N)/elapsed.Seconds(), "transforms/s")
			b.ReportMetric(float64(started.Load()), "workers")
			// The parent's share: the runtime, the nodes and the sandbox's
			// client, on the same two cores as the workers.
			b.ReportMetric(float64(parentCPU.Microseconds())/1000/float64(n*b.N), "parent_cpu_ms/transform")
			b.ReportMetric(native, "native_transforms/s")
			b.ReportMetric(pool, "pool_transforms/s")
		})
	}
}

// nativeScoring scores the candidates in python3 subprocesses, conc at a
// time, and returns transforms per second.
func nativeScoring(b *testing.B, candidates []any, conc int) float64 {
	py := benchPython()
	pairs, _ := json.Marshal(scoringbench.TrainPairs())
	next := make(chan string)
	var wg sync.WaitGroup
	start := time.Now()
	for range conc {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for src := range next {
				cmd := exec.Command(py, "-c", src+"\nimport json, sys\nprint(score(json.load(sys.stdin)))")
				cmd.Stdin = bytes.NewReader(pairs)
				if err := cmd.Run(); err != nil {
					b.Error(err)
				}
			}
		}()
	}
	for _, c := range candidates {
		next <- c.(string)
	}
	close(next)
	wg.Wait()
	return float64(len(candidates)) / time.Since(start).Seconds()
}

// nativePoolScoring scores the candidates in a native persistent
// multiprocessing pool of conc workers and returns transforms per second,
// timed by the pool itself once it has started.
func nativePoolScoring(b *testing.B, inputs map[string]any, conc int) float64 {
	job, _ := json.Marshal(inputs)
	cmd := exec.Command(benchPython(), "-c", scoringbench.NativePool, strconv.Itoa(conc))
	cmd.Stdin = bytes.NewReader(job)
	out, err := cmd.Output()
	if err != nil {
		b.Fatalf("the native pool: %v", err)
	}
	var seconds float64
	var n int
	if _, err := fmt.Sscan(string(out), &seconds, &n); err != nil || n != len(inputs["candidates"].([]any)) {
		b.Fatalf("the native pool printed %q", out)
	}
	return float64(n) / seconds
}

// benchPython is the native python3 the benchmarks compare with.
func benchPython() string {
	if py := os.Getenv("FLOWRUN_BENCH_PYTHON"); py != "" {
		return py
	}
	return "python3"
}
