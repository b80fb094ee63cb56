package cluster

import (
	"context"
	"errors"
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
	co := &Coordinator{Store: r.Store, Pipeline: r.Pipeline, Auto: auto, MaxLoops: r.MaxLoops, Models: r.Models, Log: log}
	if err := co.Connect(ctx, o); err != nil {
		return nil, err
	}
	if window <= 0 {
		window = items
	}
	r.Concurrency, r.Remote, r.Halt, r.RemoteLedger = max(window, 1), co.Execute, co.Halt, co.OpenLedger
	return co, nil
}

// OpenLedger writes the cost ledger of the batch Follow follows, which
// the workers' runs of its items reserve from thereafter (see
// batch.Runner.RemoteLedger).
func (co *Coordinator) OpenLedger(ctx context.Context, name string, limit, spent float64) (batch.Ledger, error) {
	if co.batch == "" {
		return nil, errors.New("the coordinator follows no batch yet")
	}
	var l *kvLedger
	err := retry(ctx, "writing the cost ledger of batch "+co.batch, func(ctx context.Context) error {
		var err error
		l, err = createKVLedger(ctx, co.c.buckets[ledgerBucket], co.batch, name, limit, spent)
		return err
	})
	if err != nil {
		return nil, err
	}
	co.mu.Lock()
	co.costCap = true
	co.mu.Unlock()
	return l, nil
}
