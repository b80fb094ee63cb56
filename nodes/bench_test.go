package nodes_test

import (
	"context"
	goruntime "runtime"
	"testing"

	"github.com/flowrun/flowrun/nodes"
	"github.com/flowrun/flowrun/runtime"
)

// BenchmarkLoopSetBranch measures the runtime's own cost per node: a
// 10,000-iteration loop whose body is a set node and a branch node, with no
// event sink. It reports ns and allocations per node executed.
func BenchmarkLoopSetBranch(b *testing.B) {
	p := load(b, `
version: 1
name: bench
state: {n: 0, evens: 0}
nodes:
  - id: spin
    loop:
      max_iterations: 10000
      until: state.n >= 10000
      body:
        - id: inc
          set: {n: state.n + 1}
        - id: route
          branch:
            - when: state.n % 2 == 0
              set: {evens: state.evens + 1}
              next: continue
outputs: {n: state.n, evens: state.evens}
`, nil)
	kinds := nodes.Kinds(nodes.Services{})
	const nodesPerRun = 1 + 2*10000
	var ms goruntime.MemStats
	goruntime.ReadMemStats(&ms)
	mallocs := ms.Mallocs
	b.ResetTimer()
	for range b.N {
		res := runtime.Run(context.Background(), kinds, p, nil, runtime.Options{})
		if res.Status != runtime.StatusCompleted || res.Outputs["evens"] != 5000 {
			b.Fatalf("status %s outputs %v err %v", res.Status, res.Outputs, res.Err)
		}
	}
	b.StopTimer()
	goruntime.ReadMemStats(&ms)
	b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N*nodesPerRun), "ns/node")
	b.ReportMetric(float64(ms.Mallocs-mallocs)/float64(b.N*nodesPerRun), "allocs/node")
}
