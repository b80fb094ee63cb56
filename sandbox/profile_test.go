//go:build unix

package sandbox

import (
	"context"
	"syscall"
	"testing"
	"time"

	"github.com/flowrun/flowrun/internal/scoringbench"
)

// BenchmarkCallInWorker runs warm calls the way a worker does (host.run),
// in this process and without the pipe to the parent, so that a CPU
// profile (-cpuprofile) shows where a call's time goes inside the worker;
// the gap to BenchmarkWarmCall is the parent's side and the pipe. It
// reports, for the trivial function and for one candidate of the scoring
// map, milliseconds per call between the job and its report (ms/call),
// and with the work the worker does after the report, closing the call's
// instance and making the next one (ms/cycle), the CPU time of a cycle
// (user and system, which other processes on a loaded machine move less
// than the wall clock) and its page faults: the pages of the image a call
// writes, each copied for it.
func BenchmarkCallInWorker(b *testing.B) {
	s := New(Options{CacheDir: sharedCache(b)})
	defer s.Close()
	needPython(b, s)
	ctx := context.Background()
	cases := []struct {
		name string
		req  Request
	}{
		{"trivial", Request{Language: Python, Source: "def f():\n    return 1\n", Call: "f"}},
		{"scoring", Request{Language: Python, Source: scoringbench.Candidate(3), Call: "score", Args: []any{scoringbench.TrainPairs()}}},
	}
	for _, c := range cases {
		b.Run(c.name, func(b *testing.B) {
			c.req.Limits = c.req.Limits.withDefaults()
			j, res, err := s.prepare(ctx, c.req)
			if err != nil || res != nil {
				b.Fatal(err, res)
			}
			h := &host{}
			defer h.close(ctx)
			if r, fatal := h.run(ctx, j, func() {}); fatal != nil || r.Error != nil || r.ColdStart != "" {
				b.Fatalf("%v %+v", fatal, r)
			}
			h.prepareNext(ctx, j)
			b.ResetTimer()
			var calls time.Duration
			faults, cpu := usage()
			start := time.Now()
			for range b.N {
				t0 := time.Now()
				if r, fatal := h.run(ctx, j, func() {}); fatal != nil || r.Error != nil {
					b.Fatalf("%v %+v", fatal, r)
				}
				calls += time.Since(t0)
				h.prepareNext(ctx, j)
			}
			b.ReportMetric(float64(calls.Microseconds())/1000/float64(b.N), "ms/call")
			b.ReportMetric(float64(time.Since(start).Microseconds())/1000/float64(b.N), "ms/cycle")
			faultsAfter, cpuAfter := usage()
			b.ReportMetric(float64(faultsAfter-faults)/float64(b.N), "faults/cycle")
			b.ReportMetric(float64((cpuAfter-cpu).Microseconds())/1000/float64(b.N), "cpu_ms/cycle")
		})
	}
}

// usage is how many page faults this process has taken that needed no
// disk, and the CPU time it has used.
func usage() (int64, time.Duration) {
	var u syscall.Rusage
	_ = syscall.Getrusage(syscall.RUSAGE_SELF, &u)
	return u.Minflt, time.Duration(u.Utime.Nano() + u.Stime.Nano())
}
