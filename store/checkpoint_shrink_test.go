package store_test

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"testing"

	"github.com/flowrun/flowrun/runtime"
	"github.com/flowrun/flowrun/store"
)

// TestConcurrentWritersAreNotTruncation: many runs written at once (a
// batch) make SQLite checkpoint the WAL from several connections, which
// shrinks the file by a few pages for a moment; the store must not take
// that for a truncated file and refuse every write after it.
func TestConcurrentWritersAreNotTruncation(t *testing.T) {
	ctx := context.Background()
	s := open(t)
	payload := strings.Repeat("x", 3000)
	var wg sync.WaitGroup
	errs := make(chan error, 8)
	for w := range 8 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range 250 {
				id := fmt.Sprintf("r%d-%d", w, i)
				err := s.CreateRun(ctx, &store.Run{ID: id, Pipeline: "p.yaml", PipelineAbs: "/x/p.yaml", PipelineName: "p",
					PipelineHash: "h", PipelineSrc: payload, Inputs: map[string]any{"i": i}})
				if err == nil {
					var rec *store.Recorder
					if rec, err = s.Recorder(ctx, id); err == nil {
						rec.Event(runtime.Event{Type: runtime.EventNodeStarted, Path: "n"})
						if err = rec.Save(ctx, &runtime.Checkpoint{Path: "n", Output: payload}); err == nil {
							err = rec.Flush(ctx)
						}
					}
				}
				if err == nil {
					err = s.Finish(ctx, id, store.Ending{Status: runtime.StatusCompleted, Outputs: map[string]any{"o": payload}})
				}
				if err != nil {
					errs <- err
					return
				}
			}
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}
}
