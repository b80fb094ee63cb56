package sandbox

import (
	"context"
	"encoding/json"
	"os/exec"
	"slices"
	"strings"
	"testing"
	"time"
)

// arcTransformGo is arcTransform written in Go.
const arcTransformGo = `package main

func transform(grid [][]int) [][]int {
	h, w := len(grid), len(grid[0])
	counts := map[int]int{}
	for _, row := range grid {
		for _, v := range row {
			counts[v]++
		}
	}
	background, best := 0, -1
	for v, n := range counts {
		if n > best || (n == best && v < background) {
			background, best = v, n
		}
	}
	seen := make([][]bool, h)
	for i := range seen {
		seen[i] = make([]bool, w)
	}
	type object struct {
		colour int
		cells  [][2]int
	}
	var objects []object
	for r := 0; r < h; r++ {
		for c := 0; c < w; c++ {
			if seen[r][c] || grid[r][c] == background {
				continue
			}
			o := object{colour: grid[r][c]}
			queue := [][2]int{{r, c}}
			seen[r][c] = true
			for len(queue) > 0 {
				p := queue[0]
				queue = queue[1:]
				o.cells = append(o.cells, p)
				for _, d := range [][2]int{{1, 0}, {-1, 0}, {0, 1}, {0, -1}} {
					nr, nc := p[0]+d[0], p[1]+d[1]
					if nr >= 0 && nr < h && nc >= 0 && nc < w && !seen[nr][nc] && grid[nr][nc] == o.colour {
						seen[nr][nc] = true
						queue = append(queue, [2]int{nr, nc})
					}
				}
			}
			objects = append(objects, o)
		}
	}
	largest := 0
	for _, o := range objects {
		largest = max(largest, len(o.cells))
	}
	out := make([][]int, h)
	for r := range out {
		out[r] = make([]int, w)
		for c := range out[r] {
			out[r][c] = background
		}
	}
	for _, o := range objects {
		paint := o.colour%9 + 1
		if len(o.cells) == largest {
			paint = o.colour
		}
		for _, p := range o.cells {
			out[p[0]][p[1]] = paint
		}
	}
	return out
}
`

// BenchmarkARCTransform runs a typical ARC transform on a 30x30 grid as a
// native python3 subprocess (the baseline), in the sandbox warm (a live
// worker) and cold (a new sandbox, so a new worker process loading the
// interpreter from the compilation cache), and as Go in the sandbox, all
// in the same run. It reports each one's median time as a ratio of the
// native subprocess's.
func BenchmarkARCTransform(b *testing.B) {
	s := New(Options{CacheDir: sharedCache(b)})
	defer s.Close()
	needPython(b, s)
	py := python3(b)
	grid := arcGrid()
	in, _ := json.Marshal(grid)
	ctx := context.Background()
	native := func() {
		cmd := exec.Command(py, "-c", arcTransform+"\nimport json, sys\nprint(json.dumps(transform(json.load(sys.stdin))))")
		cmd.Stdin = strings.NewReader(string(in))
		if err := cmd.Run(); err != nil {
			b.Fatal(err)
		}
	}
	run := func(sb *Sandbox, lang, src string) {
		res, err := sb.Run(ctx, Request{Language: lang, Source: src, Call: "transform", Args: []any{grid}})
		if err != nil || !res.OK {
			b.Fatalf("%v %+v", err, res)
		}
	}
	// Warm up: the Go build, both compiled modules, one live worker each.
	run(s, Python, arcTransform)
	run(s, Go, arcTransformGo)
	var tNative, tWarm, tCold, tGo []time.Duration
	b.ResetTimer()
	for range b.N {
		t0 := time.Now()
		native()
		t1 := time.Now()
		run(s, Python, arcTransform)
		t2 := time.Now()
		cold := New(Options{CacheDir: sharedCache(b)})
		run(cold, Python, arcTransform)
		cold.Close()
		t3 := time.Now()
		run(s, Go, arcTransformGo)
		t4 := time.Now()
		tNative = append(tNative, t1.Sub(t0))
		tWarm = append(tWarm, t2.Sub(t1))
		tCold = append(tCold, t3.Sub(t2))
		tGo = append(tGo, t4.Sub(t3))
	}
	reportAgainstNative(b, tNative, tWarm)
	b.ReportMetric(median(tCold)/median(tNative), "cold_x_native")
	b.ReportMetric(median(tCold)/1e6, "cold_ms")
	b.ReportMetric(median(tGo)/median(tNative), "go_x_native")
}

// BenchmarkCancellationDesign measures the choice behind the worker
// processes: running the ARC transform in-process with wazero's
// WithCloseOnContextDone (which can stop a busy guest in place) against
// without it (the workers' setting; a busy guest is stopped by killing its
// process). It reports the slowdown the option would cost every run.
func BenchmarkCancellationDesign(b *testing.B) {
	s := New(Options{CacheDir: sharedCache(b)})
	defer s.Close()
	needPython(b, s)
	ctx := context.Background()
	j, res, err := s.prepare(ctx, Request{Language: Python, Source: arcTransform, Call: "transform", Args: []any{arcGrid()}, Limits: Limits{}.withDefaults()})
	if err != nil || res != nil {
		b.Fatal(err, res)
	}
	measure := func(closeOnDone bool) time.Duration {
		h := &host{closeOnDone: closeOnDone}
		defer h.close(ctx)
		if r, fatal := h.run(ctx, j, func() {}); fatal != nil || r.Error != nil {
			b.Fatalf("%s %+v", fatal, r)
		}
		start := time.Now()
		for range b.N {
			h.run(ctx, j, func() {})
		}
		return time.Since(start)
	}
	b.ResetTimer()
	without := measure(false)
	with := measure(true)
	b.ReportMetric(float64(without.Milliseconds())/float64(b.N), "ms_without")
	b.ReportMetric(float64(with.Milliseconds())/float64(b.N), "ms_with")
	b.ReportMetric(float64(with)/float64(without), "slowdown")
}

// BenchmarkWarmCall runs a trivial function on a live worker (what a call
// costs beyond the code's own work) and in a native python3 subprocess.
func BenchmarkWarmCall(b *testing.B) {
	s := New(Options{CacheDir: sharedCache(b)})
	defer s.Close()
	needPython(b, s)
	py := python3(b)
	const src = "def f():\n    return 1\n"
	ctx := context.Background()
	run := func() {
		res, err := s.Run(ctx, Request{Language: Python, Source: src, Call: "f"})
		if err != nil || !res.OK {
			b.Fatalf("%v %+v", err, res)
		}
	}
	run()
	var tNative, tWarm []time.Duration
	b.ResetTimer()
	for range b.N {
		t0 := time.Now()
		if err := exec.Command(py, "-c", src+"print(f())").Run(); err != nil {
			b.Fatal(err)
		}
		t1 := time.Now()
		run()
		tNative = append(tNative, t1.Sub(t0))
		tWarm = append(tWarm, time.Since(t1))
	}
	reportAgainstNative(b, tNative, tWarm)
}

// arcTransformNumpy is arcTransform as a model that knows numpy writes it.
const arcTransformNumpy = `import numpy as np
from collections import deque

def transform(grid):
    g = np.asarray(grid)
    h, w = g.shape
    background = int(np.bincount(g.ravel()).argmax())
    seen = g == background
    out = np.full_like(g, background)
    objects = []
    for r, c in zip(*np.nonzero(~seen)):
        if seen[r, c]:
            continue
        colour, cells, queue = int(g[r, c]), [], deque([(r, c)])
        seen[r, c] = True
        while queue:
            cr, cc = queue.popleft()
            cells.append((cr, cc))
            for nr, nc in ((cr + 1, cc), (cr - 1, cc), (cr, cc + 1), (cr, cc - 1)):
                if 0 <= nr < h and 0 <= nc < w and not seen[nr, nc] and g[nr, nc] == colour:
                    seen[nr, nc] = True
                    queue.append((nr, nc))
        objects.append((colour, cells))
    largest = max((len(cells) for _, cells in objects), default=0)
    for colour, cells in objects:
        rows, cols = zip(*cells)
        out[list(rows), list(cols)] = colour if len(cells) == largest else colour % 9 + 1
    return out.tolist()
`

// BenchmarkARCTransformNumpy is BenchmarkARCTransform's warm call with
// the transform written with numpy, against a native python3 subprocess
// importing numpy too. It is skipped where either Python lacks numpy.
func BenchmarkARCTransformNumpy(b *testing.B) {
	s := New(Options{CacheDir: sharedCache(b)})
	defer s.Close()
	needPython(b, s)
	py := python3(b)
	if err := exec.Command(py, "-c", "import numpy").Run(); err != nil {
		b.Skipf("%s has no numpy: %v", py, err)
	}
	grid := arcGrid()
	in, _ := json.Marshal(grid)
	ctx := context.Background()
	res, err := s.Run(ctx, Request{Language: Python, Source: arcTransformNumpy, Call: "transform", Args: []any{grid}})
	if err != nil {
		b.Fatal(err)
	}
	if !res.OK {
		b.Skipf("the sandbox's Python cannot run the numpy transform: %s", res.Error.Message)
	}
	var tNative, tWarm []time.Duration
	b.ResetTimer()
	for range b.N {
		t0 := time.Now()
		cmd := exec.Command(py, "-c", arcTransformNumpy+"\nimport json, sys\nprint(json.dumps(transform(json.load(sys.stdin))))")
		cmd.Stdin = strings.NewReader(string(in))
		if err := cmd.Run(); err != nil {
			b.Fatal(err)
		}
		t1 := time.Now()
		if res, err := s.Run(ctx, Request{Language: Python, Source: arcTransformNumpy, Call: "transform", Args: []any{grid}}); err != nil || !res.OK {
			b.Fatalf("%v %+v", err, res)
		}
		tNative = append(tNative, t1.Sub(t0))
		tWarm = append(tWarm, time.Since(t1))
	}
	reportAgainstNative(b, tNative, tWarm)
}

// reportAgainstNative reports the median native and warm times and their
// ratio. Medians, as the machines these run on are shared: one run stalled
// by another process's burst would move a mean far.
func reportAgainstNative(b *testing.B, native, warm []time.Duration) {
	b.ReportMetric(median(native)/1e6, "native_ms")
	b.ReportMetric(median(warm)/1e6, "warm_ms")
	b.ReportMetric(median(warm)/median(native), "warm_x_native")
}

// median is the middle of ds in nanoseconds.
func median(ds []time.Duration) float64 {
	s := slices.Clone(ds)
	slices.Sort(s)
	if len(s) == 0 {
		return 0
	}
	return float64(s[len(s)/2]+s[(len(s)-1)/2]) / 2
}
