package cluster

import (
	"context"
	"io"

	"github.com/flowrun/flowrun/batch"
)

// DriveBatch connects a coordinator to the server o names and makes r
// run its items on the workers there. At most window of its items (0:
// all of them) are queued or running at once; the workers' own
// concurrency sets the pace within it. A spend reaching r's cost cap
// halts the batch on every worker. log receives the refused messages
// (see Coordinator.Log); Close the coordinator when the batch is done.
func DriveBatch(ctx context.Context, r *batch.Runner, o Options, items, window int, auto bool, log io.Writer) (*Coordinator, error) {
	co := &Coordinator{Store: r.Store, Pipeline: r.Pipeline, Auto: auto, MaxLoops: r.MaxLoops, Log: log}
	if err := co.Connect(ctx, o); err != nil {
		return nil, err
	}
	if window <= 0 {
		window = items
	}
	r.Concurrency, r.Remote, r.Halt = max(window, 1), co.Execute, co.Halt
	return co, nil
}
