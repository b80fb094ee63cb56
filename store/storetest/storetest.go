// Package storetest fills a run store as a busy one is filled: many runs
// of several pipelines in every end state, and batches whose items are
// runs, for the tests and benchmarks of what lists them.
package storetest

import (
	"context"
	"fmt"

	"github.com/flowrun/flowrun/runtime"
	"github.com/flowrun/flowrun/store"
)

// Pipelines are the names the runs of Fill take in turn.
var Pipelines = []string{"alpha", "beta", "gamma"}

// Ends are the statuses the runs of Fill end with in turn.
var Ends = []runtime.Status{runtime.StatusCompleted, runtime.StatusFailed, runtime.StatusStopped, runtime.StatusCompleted}

// Fill records runs runs (run i: id RunID(i), pipeline Pipelines[i%3],
// status Ends[i%4], input topic "topic i") and then batches batches of
// pipeline "alpha" with items items each (batch k: id BatchID(k); item j:
// input topic "item k.j", a run that completes when j is even and fails
// otherwise).
func Fill(ctx context.Context, st *store.Store, runs, batches, items int) error {
	for i := range runs {
		if err := record(ctx, st, RunID(i), Pipelines[i%len(Pipelines)], fmt.Sprintf("topic %d", i), Ends[i%len(Ends)]); err != nil {
			return err
		}
	}
	for k := range batches {
		b := &store.Batch{ID: BatchID(k), Pipeline: "alpha.yaml", PipelineAbs: "/p/alpha.yaml", PipelineName: "alpha", Dataset: "data.jsonl"}
		var its []*store.BatchItem
		for j := range items {
			its = append(its, &store.BatchItem{Index: j, Key: fmt.Sprint(j), Item: map[string]any{"topic": fmt.Sprintf("item %d.%d", k, j)}})
		}
		if err := st.CreateBatch(ctx, b, its); err != nil {
			return err
		}
		for j, it := range its {
			id := fmt.Sprintf("%s-item%04d", b.ID, j)
			status := runtime.StatusCompleted
			if j%2 == 1 {
				status = runtime.StatusFailed
			}
			if err := record(ctx, st, id, "alpha", it.Item["topic"].(string), status); err != nil {
				return err
			}
			if err := st.StartItem(ctx, b.ID, j, 0, id); err != nil {
				return err
			}
			it.Status, it.Run, it.CostUSD, it.Tokens = status, id, 0.001, 10
			if err := st.FinishItem(ctx, it); err != nil {
				return err
			}
		}
		if err := st.FinishBatch(ctx, b.ID, runtime.StatusCompleted, ""); err != nil {
			return err
		}
	}
	return nil
}

// RunID is the id of Fill's run i.
func RunID(i int) string { return fmt.Sprintf("20260101T000000-run%05d", i) }

// BatchID is the id of Fill's batch k.
func BatchID(k int) string { return fmt.Sprintf("20260101T000000-batch%03d", k) }

func record(ctx context.Context, st *store.Store, id, pipeline, topic string, status runtime.Status) error {
	r := &store.Run{ID: id, Pipeline: pipeline + ".yaml", PipelineAbs: "/p/" + pipeline + ".yaml", PipelineName: pipeline,
		Inputs: map[string]any{"topic": topic}}
	if err := st.CreateRun(ctx, r); err != nil {
		return err
	}
	return st.Finish(ctx, id, store.Ending{Status: status, CostUSD: 0.002, Tokens: 20, Steps: 1})
}
