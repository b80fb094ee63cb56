package store_test

import (
	"context"
	"os"
	"path/filepath"
	"testing"

	"github.com/flowrun/flowrun/dsl"
	"github.com/flowrun/flowrun/nodes"
	"github.com/flowrun/flowrun/runtime"
	"github.com/flowrun/flowrun/store"
)

// memoryCheckpoints keeps checkpoints in a slice: the cost of building
// checkpoints without the cost of writing them.
type memoryCheckpoints struct{ cps []*runtime.Checkpoint }

func (m *memoryCheckpoints) Save(_ context.Context, cp *runtime.Checkpoint) error {
	m.cps = append(m.cps, cp)
	return nil
}

// BenchmarkLoopCheckpoints is the foundation's loop benchmark (a
// 10,000-iteration loop of a set and a branch node) with no checkpoints,
// with checkpoints kept in memory, and with a checkpoint written to the
// SQLite store after every node. It reports microseconds per node.
func BenchmarkLoopCheckpoints(b *testing.B) {
	const iterations = 10000
	dir := b.TempDir()
	path := filepath.Join(dir, "loop.yaml")
	src := `
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
`
	if err := os.WriteFile(path, []byte(src), 0o644); err != nil {
		b.Fatal(err)
	}
	p, ds := dsl.Load(path)
	if p == nil {
		b.Fatal(ds)
	}
	kinds := nodes.Kinds(nodes.Services{})
	const nodesPerRun = 1 + 2*iterations
	report := func(b *testing.B) {
		b.ReportMetric(float64(b.Elapsed().Microseconds())/float64(b.N*nodesPerRun), "us/node")
	}
	check := func(b *testing.B, res *runtime.Result) {
		if res.Status != runtime.StatusCompleted || res.Outputs["evens"] != iterations/2 {
			b.Fatalf("status %s outputs %v err %v", res.Status, res.Outputs, res.Err)
		}
	}
	b.Run("none", func(b *testing.B) {
		for range b.N {
			check(b, runtime.Run(context.Background(), kinds, p, nil, runtime.Options{}))
		}
		report(b)
	})
	b.Run("memory", func(b *testing.B) {
		for range b.N {
			check(b, runtime.Run(context.Background(), kinds, p, nil, runtime.Options{Checkpointer: &memoryCheckpoints{}}))
		}
		report(b)
	})
	b.Run("sqlite", func(b *testing.B) {
		s, err := store.Open(filepath.Join(b.TempDir(), "runs.db"))
		if err != nil {
			b.Fatal(err)
		}
		defer s.Close()
		ctx := context.Background()
		for i := range b.N {
			id := "bench-" + string(rune('a'+i%26)) + "-" + runtime.NewRunID()
			if err := s.CreateRun(ctx, &store.Run{ID: id, Pipeline: path, PipelineAbs: path, PipelineName: p.Name, PipelineHash: p.Hash}); err != nil {
				b.Fatal(err)
			}
			rec, err := s.Recorder(ctx, id)
			if err != nil {
				b.Fatal(err)
			}
			check(b, runtime.Run(ctx, kinds, p, nil, runtime.Options{RunID: id, Checkpointer: rec, Sink: rec}))
			if err := rec.Flush(ctx); err != nil {
				b.Fatal(err)
			}
		}
		report(b)
	})
}
