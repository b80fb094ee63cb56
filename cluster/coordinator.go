package cluster

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"sync"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/flowrun/flowrun/dsl"
	"github.com/flowrun/flowrun/durable"
	"github.com/flowrun/flowrun/runtime"
	"github.com/flowrun/flowrun/store"
)

// Coordinator publishes a batch's items for workers and waits for their
// results, mirroring each finished run (record, events, checkpoints) into
// the local store so that batch show, compare, report and flowrun serve
// read it as they read a local batch's.
type Coordinator struct {
	Store    *store.Store
	Pipeline *dsl.Pipeline
	Auto     bool
	MaxLoops int

	c     *conn
	ref   PipelineRef
	batch string

	mu      sync.Mutex
	waiting map[string]chan *Result // by result key
	got     map[string]*Result      // results that came before their item asked
	failed  error                   // the results watch ended
	stop    context.CancelFunc
	wg      sync.WaitGroup
}

// Connect dials NATS, creates the streams and buckets if needed and
// uploads the pipeline's files.
func (co *Coordinator) Connect(ctx context.Context, o Options) error {
	if o.Name == "" {
		o.Name = "flowrun batch"
	}
	c, err := connect(ctx, o)
	if err != nil {
		return err
	}
	ref, err := c.uploadPipeline(ctx, co.Pipeline)
	if err != nil {
		c.nc.Close()
		return err
	}
	co.c, co.ref = c, ref
	return nil
}

// Follow starts watching the results of batch; call it once the batch
// has its id, before its items are published, and Close when done.
func (co *Coordinator) Follow(ctx context.Context, batch string) error {
	ctx, cancel := context.WithCancel(ctx)
	w, err := co.c.results.Watch(ctx, batch+".*")
	if err != nil {
		cancel()
		return fmt.Errorf("watching the results of batch %s: %w", batch, err)
	}
	co.batch, co.stop = batch, cancel
	co.waiting, co.got = map[string]chan *Result{}, map[string]*Result{}
	// Results already there (a resumed batch) are known before any item
	// is published again.
	ready := make(chan struct{})
	co.wg.Go(func() {
		defer func() { _ = w.Stop() }()
		for {
			select {
			case e, ok := <-w.Updates():
				if !ok {
					co.end(fmt.Errorf("the watch of batch %s's results ended", batch))
					return
				}
				if e == nil {
					close(ready)
					continue
				}
				if e.Operation() != jetstream.KeyValuePut {
					continue
				}
				var res Result
				if err := json.Unmarshal(e.Value(), &res); err != nil {
					res = Result{Status: runtime.StatusFailed, Error: fmt.Sprintf("the result in JetStream is not JSON: %v", err)}
				}
				co.deliver(e.Key(), &res)
			case <-ctx.Done():
				co.end(ctx.Err())
				return
			}
		}
	})
	select {
	case <-ready:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

func (co *Coordinator) deliver(key string, res *Result) {
	co.mu.Lock()
	defer co.mu.Unlock()
	if ch := co.waiting[key]; ch != nil {
		delete(co.waiting, key)
		ch <- res
		return
	}
	co.got[key] = res
}

func (co *Coordinator) end(err error) {
	co.mu.Lock()
	defer co.mu.Unlock()
	co.failed = err
	for k, ch := range co.waiting {
		close(ch)
		delete(co.waiting, k)
	}
}

// Close stops following and disconnects.
func (co *Coordinator) Close() {
	if co.stop != nil {
		co.stop()
	}
	co.wg.Wait()
	if co.c != nil {
		co.c.nc.Close()
	}
}

// Execute publishes one item and waits for its result; it is the batch
// runner's Remote. The item's run is then mirrored into the local store.
func (co *Coordinator) Execute(ctx context.Context, row *store.BatchItem, inputs map[string]any) (*runtime.Result, error) {
	key := resultKey(row.Batch, row.Index)
	ch := make(chan *Result, 1)
	queued := true
	co.mu.Lock()
	switch {
	case co.got[key] != nil:
		ch <- co.got[key]
		delete(co.got, key)
		queued = false
	case co.failed != nil:
		err := co.failed
		co.mu.Unlock()
		return nil, err
	default:
		co.waiting[key] = ch
	}
	co.mu.Unlock()
	if queued {
		if err := co.publish(ctx, row, key, inputs); err != nil {
			co.forget(key)
			return nil, err
		}
	}
	var res *Result
	select {
	case r, ok := <-ch:
		if !ok {
			co.mu.Lock()
			err := co.failed
			co.mu.Unlock()
			return nil, fmt.Errorf("item %s: %w", row.Key, err)
		}
		res = r
	case <-ctx.Done():
		co.forget(key)
		// The item stays queued; its workers go on.
		return &runtime.Result{RunID: row.Run, Status: runtime.StatusStopped, Reason: "interrupted"}, nil
	}
	if err := co.mirror(context.WithoutCancel(ctx), row.Run, inputs, res); err != nil {
		return nil, fmt.Errorf("item %s: mirroring its run %s into %s: %w", row.Key, row.Run, co.Store.Path(), err)
	}
	out := &runtime.Result{RunID: row.Run, Status: res.Status, Outputs: res.Outputs, Reason: res.Reason, Steps: res.Steps,
		CostUSD: res.CostUSD, Tokens: res.Tokens, Pending: res.Pending}
	if res.Error != "" {
		out.Err = runtime.Errorf(res.Class, "%s", res.Error)
	}
	return out, nil
}

// publish queues the item's job. An item still queued or running since an
// earlier attempt at the batch is not queued twice, even past the
// stream's dedup window.
func (co *Coordinator) publish(ctx context.Context, row *store.BatchItem, key string, inputs map[string]any) error {
	data, err := json.Marshal(Job{Batch: row.Batch, Index: row.Index, Key: row.Key, Run: row.Run, Pipeline: co.ref,
		Inputs: inputs, Auto: co.Auto, MaxLoops: co.MaxLoops})
	if err != nil {
		return fmt.Errorf("item %s: encoding its job: %w", row.Key, err)
	}
	subject := itemsSubject + key
	return retry(ctx, "publishing item "+row.Key, func(ctx context.Context) error {
		_, err := co.c.items.GetLastMsgForSubject(ctx, subject)
		if err == nil {
			return nil
		}
		if !errors.Is(err, jetstream.ErrMsgNotFound) {
			return err
		}
		_, err = co.c.js.Publish(ctx, subject, data, jetstream.WithMsgID(key))
		return err
	})
}

func (co *Coordinator) forget(key string) {
	co.mu.Lock()
	defer co.mu.Unlock()
	delete(co.waiting, key)
}

// mirror copies a finished item run from JetStream into the local store.
func (co *Coordinator) mirror(ctx context.Context, runID string, inputs map[string]any, res *Result) error {
	in, err := runtime.PrepareInputs(co.Pipeline, inputs)
	if err != nil {
		in = inputs
	}
	// A coordinator killed while mirroring left a prefix of the run's
	// events and checkpoints: the rest is added, nothing twice.
	var haveEvents, haveCheckpoints int
	if _, err := co.Store.Run(ctx, runID); err == nil {
		evs, err := co.Store.Events(ctx, runID)
		if err != nil {
			return err
		}
		cps, err := co.Store.Checkpoints(ctx, runID, 0)
		if err != nil {
			return err
		}
		haveEvents, haveCheckpoints = len(evs), len(cps)
	} else {
		rec, err := durable.NewRunRecord(runID, co.Pipeline, in)
		if err != nil {
			return err
		}
		if err := co.Store.CreateRun(ctx, rec); err != nil {
			return err
		}
	}
	evs, err := co.c.loadEvents(ctx, runID)
	if err != nil {
		return err
	}
	cps, err := co.c.loadCheckpoints(ctx, runID)
	if err != nil {
		return err
	}
	r, err := co.Store.Recorder(ctx, runID)
	if err != nil {
		return err
	}
	for _, e := range evs[min(haveEvents, len(evs)):] {
		r.Event(e)
	}
	for _, cp := range cps[min(haveCheckpoints, len(cps)):] {
		if err := r.Save(ctx, cp); err != nil {
			return err
		}
	}
	if err := r.Flush(ctx); err != nil {
		return err
	}
	return co.Store.Finish(ctx, runID, ending(res))
}

func ending(res *Result) store.Ending {
	end := store.Ending{Status: res.Status, Outputs: res.Outputs, Error: res.Error, Reason: res.Reason, Steps: res.Steps,
		CostUSD: res.CostUSD, Tokens: int(res.Tokens)}
	if res.Pending != nil {
		b, _ := json.Marshal(res.Pending)
		_ = json.Unmarshal(b, &end.Pending)
	}
	return end
}
