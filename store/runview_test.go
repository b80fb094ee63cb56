package store_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/flowrun/flowrun/batch/batchtest"
	"github.com/flowrun/flowrun/store"
)

// TestRunDuration: a finished run lasts to its end, an unfinished one to
// its last update.
func TestRunDuration(t *testing.T) {
	start := time.Date(2026, 11, 26, 10, 0, 0, 0, time.UTC)
	r := &store.Run{Started: start, Updated: start.Add(2 * time.Second)}
	if d := r.Duration(); d != 2*time.Second {
		t.Errorf("unfinished: %s, want 2s", d)
	}
	r.Finished = start.Add(3500 * time.Millisecond)
	if d, ms := r.Duration(), r.JSON()["duration_ms"]; d != 3500*time.Millisecond || ms != int64(3500) {
		t.Errorf("finished: %s, duration_ms %v; want 3.5s", d, ms)
	}
	if _, ok := r.JSON()["reason"]; ok {
		t.Errorf("a run without a reason has one in its JSON: %v", r.JSON())
	}
}

// TestHiddenBatchRuns: a listing without batch items counts the batch
// item runs it leaves out, under the same filters.
func TestHiddenBatchRuns(t *testing.T) {
	ctx := context.Background()
	st := batchtest.OpenStore(t)
	batchtest.Record(t, st, "b20261126T100000-aaaa", batchtest.Keys("t", 3), "PF.", 1, "")
	if err := st.CreateRun(ctx, &store.Run{ID: "r-alone", Pipeline: "other.yaml", PipelineName: "other"}); err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		q    store.RunQuery
		want int
	}{
		{store.RunQuery{}, 2},
		{store.RunQuery{Pipeline: "solve"}, 2},
		{store.RunQuery{Pipeline: "other"}, 0},
	} {
		if n, err := st.HiddenBatchRuns(ctx, c.q); err != nil || n != c.want {
			t.Errorf("%+v: %d hidden, %v; want %d", c.q, n, err, c.want)
		}
	}
}

// TestRunWithEvents: a run found by prefix comes with its timeline; an
// unknown one is the store's not-found error.
func TestRunWithEvents(t *testing.T) {
	ctx := context.Background()
	st := batchtest.OpenStore(t)
	batchtest.Record(t, st, "b20261126T100000-aaaa", batchtest.Keys("t", 1), "P", 1, "")
	r, events, err := st.RunWithEvents(ctx, "b20261126T100000-aaaa-r0")
	if err != nil || r.ID != "b20261126T100000-aaaa-r01" || len(events) == 0 {
		t.Fatalf("run %v, %d events, %v", r, len(events), err)
	}
	if _, _, err := st.RunWithEvents(ctx, "nope"); !errors.Is(err, store.ErrNotFound) {
		t.Errorf("unknown run: %v", err)
	}
}
