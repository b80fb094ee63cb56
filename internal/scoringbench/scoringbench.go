// Package scoringbench is the workload of the sandbox's scoring
// benchmarks (BenchmarkCodeMapScoring in nodes, BenchmarkCallInWorker in
// sandbox): candidate ARC transforms in Python, the train pairs they are
// scored on, and the native baseline an ARC harness written in Python
// uses, a persistent multiprocessing pool that exec()s each candidate.
// Every benchmark that compares with another scores the same programs.
package scoringbench

import "fmt"

// Candidate is the i-th candidate transform: a Python source whose
// score(pairs) runs its transform on every train pair's input and returns
// the fraction of cells it gets right. Every candidate's source differs,
// as a population's do, so that nothing keyed by source (a compile
// cache, say) can make a benchmark faster than a real search would be;
// they behave as ten (k only matters modulo 10 on 10x10 grids).
func Candidate(i int) string {
	return fmt.Sprintf(`
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
`, i)
}

// Candidates are the first n candidates.
func Candidates(n int) []any {
	out := make([]any, n)
	for i := range out {
		out[i] = Candidate(i)
	}
	return out
}

// TrainPairs are four 10x10 train pairs, as JSON values.
func TrainPairs() []any {
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

// NativePool is the native baseline, run as `python3 -c NativePool
// WORKERS` with {"candidates": [...], "pairs": [...]} on stdin: a
// persistent multiprocessing pool of WORKERS processes that exec()s each
// candidate in a fresh dict and calls its score, with no isolation at
// all. The pool is started and warmed before the clock starts, as a
// harness keeps it across generations; it prints the scoring's seconds.
const NativePool = `
import json, sys, time, multiprocessing as mp
def run(src):
    scope = {}
    exec(src, scope)
    return scope["score"](PAIRS)
def init(pairs):
    global PAIRS
    PAIRS = pairs
if __name__ == "__main__":
    job = json.load(sys.stdin)
    with mp.Pool(int(sys.argv[1]), init, (job["pairs"],)) as pool:
        pool.map(run, job["candidates"][:8])
        t = time.perf_counter()
        scores = pool.map(run, job["candidates"])
        print(time.perf_counter() - t, len(scores))
`
