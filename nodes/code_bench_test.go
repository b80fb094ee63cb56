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

	"github.com/flowrun/flowrun/nodes"
	"github.com/flowrun/flowrun/runtime"
	"github.com/flowrun/flowrun/sandbox"
)

// scoringCandidates are n candidate ARC transforms, each a Python source
// whose score(pairs) runs its transform on every train pair's input and
// returns the fraction of cells it gets right.
func scoringCandidates(n int) []any {
	out := make([]any, n)
	for i := range out {
		out[i] = fmt.Sprintf(`
def transform(grid):
    k = %d
    h, w = len(grid), len(grid[0])
    return [[(grid[r][c] + k) %% 10 if grid[r][c] else grid[(r + k) %% h][c] for c in range(w)] for r in range(h)]

def score(pairs):
    right = total = 0
    for p in pairs:
        got = transform(p["input"])
        for row, want in zip(got, p["output"]):
            right += sum(a == b for a, b in zip(row, want))
            total += len(want)
    return right / total
`, i%10)
	}
	return out
}

// trainPairs are four 10x10 train pairs.
func trainPairs() []any {
	var pairs []any
	for p := range 4 {
		in, out := make([]any, 10), make([]any, 10)
		for r := range 10 {
			a, b := make([]any, 10), make([]any, 10)
			for c := range 10 {
				a[c] = (r*c + p) % 3
				b[c] = (r*c + p + 1) % 3
			}
			in[r], out[r] = a, b
		}
		pairs = append(pairs, map[string]any{"input": in, "output": out})
	}
	return pairs
}

// BenchmarkCodeMapScoring scores 1,000 candidate transforms against 4
// train pairs in a map of code nodes, at max_concurrency 2 and 8, and
// reports transforms per second, how many sandbox workers the run started
// (the sandbox's pool, not the map, decides that; a worker is replaced
// after 500 runs), and the rate of the same scoring done by native
// python3 subprocesses (FLOWRUN_BENCH_PYTHON, or python3), as many at once.
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
			inputs := map[string]any{"candidates": scoringCandidates(n), "pairs": trainPairs()}
			// One call first, so that the image and the compiled module are ready.
			if res := runtime.Run(context.Background(), kinds, p, map[string]any{"candidates": scoringCandidates(1), "pairs": trainPairs()}, runtime.Options{}); res.Status != runtime.StatusCompleted {
				b.Fatalf("status %s: %v", res.Status, res.Err)
			}
			native := nativeScoring(b, inputs["candidates"].([]any), conc)
			var elapsed time.Duration
			b.ResetTimer()
			for range b.N {
				start := time.Now()
				res := runtime.Run(context.Background(), kinds, p, inputs, runtime.Options{})
				elapsed += time.Since(start)
				if res.Status != runtime.StatusCompleted {
					b.Fatalf("status %s: %v", res.Status, res.Err)
				}
				if got := len(res.Outputs["scores"].([]any)); got != n {
					b.Fatalf("%d scores, want %d", got, n)
				}
			}
			b.ReportMetric(float64(n*b.N)/elapsed.Seconds(), "transforms/s")
			b.ReportMetric(float64(started.Load()), "workers")
			b.ReportMetric(native, "native_transforms/s")
		})
	}
}

// nativeScoring scores the candidates in python3 subprocesses, conc at a
// time, and returns transforms per second.
func nativeScoring(b *testing.B, candidates []any, conc int) float64 {
	py := os.Getenv("FLOWRUN_BENCH_PYTHON")
	if py == "" {
		py = "python3"
	}
	pairs, _ := json.Marshal(trainPairs())
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
