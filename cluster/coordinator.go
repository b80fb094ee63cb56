package cluster

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/flowrun/flowrun/dsl"
	"github.com/flowrun/flowrun/engine"
	"github.com/flowrun/flowrun/runtime"
	"github.com/flowrun/flowrun/store"
)

// Coordinator publishes a batch's items for workers and waits for their
// results, mirroring each finished run (record, events, checkpoints) into
// the local store so that batch show, compare, report and flowrun serve
// read it as they read a local batch's. It passes each item's events on
// as its worker publishes them, so that the batch's spend is known while
// items run, and Halt stops the batch on every worker.
type Coordinator struct {
	Store    *store.Store
	Pipeline *dsl.Pipeline
	Auto     bool
	MaxLoops int
	// Models are the batch's model overrides (NAME=MODEL), which every
	// job carries: its worker runs the item with them.
	Models []string
	// StopWait bounds how long a halted batch waits for each running item
	// to stop on its worker (a worker that died never says); default 30s.
	StopWait time.Duration
	// Log receives a line for each message refused: a result, event or
	// checkpoint that no trusted worker signed.
	Log io.Writer

	c       *conn
	mirrors *engine.Mirror // the batch's runs in Store
	ref     PipelineRef
	batch   string
	session string // this coordinator's publishes, told apart from an earlier one's
	costCap bool   // the batch's runs reserve from its ledger (OpenLedger)

	mu      sync.Mutex
	waiting map[string]chan *Result // by result key
	got     map[string]*Result      // results that came before their item asked
	runs    map[string]*liveRun     // by run id: the items waiting for their result
	failed  error                   // the results watch ended
	halting string                  // why Halt stopped the batch
	haltErr error                   // telling the workers, or emptying the queue, failed
	halted  chan struct{}           // closed once the workers are told and the queue is empty
	pubMu   sync.RWMutex            // held to publish; Halt takes it to purge after the last publish
	stop    context.CancelFunc
	events  jetstream.MessagesContext
	wg      sync.WaitGroup
}

// liveRun is an item waiting for its result, whose events are passed on
// and recorded in the local store as they come.
type liveRun struct {
	sink    runtime.EventSink
	inputs  map[string]any
	mu      sync.Mutex // held while an event is passed on
	closed  bool       // its Execute returned: pass nothing more on
	started bool       // an event of this attempt came
	over    bool
	ended   chan struct{}   // closed at its run_finished event
	rec     *store.Recorder // its timeline in the local store, from its first event on
	seq     uint64          // the stream sequence of the last event rec holds
	seen    map[string]bool // the message ids of the events passed on: a copy is not
	failed  bool            // recording failed: the run is mirrored whole when it ends
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
	c.refused = &refusals{log: func(line string) { logLine(co.Log, line) }}
	ref, err := c.uploadPipeline(ctx, co.Pipeline)
	if err != nil {
		c.nc.Close()
		return err
	}
	mirrors, err := engine.NewMirror(co.Store, co.Pipeline, engine.RunOptions{Auto: co.Auto, MaxLoops: co.MaxLoops, Models: co.Models})
	if err != nil {
		c.nc.Close()
		return err
	}
	co.c, co.ref, co.mirrors = c, ref, mirrors
	return nil
}

// Follow starts watching the results and events of batch under a new
// session, which no earlier attempt's stop holds; call it once the batch
// has its id, before its items are published, and Close when done.
func (co *Coordinator) Follow(ctx context.Context, batch string) error {
	ctx, cancel := context.WithCancel(ctx)
	co.batch, co.stop, co.session = batch, cancel, runtime.NewRunID()
	co.waiting, co.got, co.runs = map[string]chan *Result{}, map[string]*Result{}, map[string]*liveRun{}
	co.halted = make(chan struct{})
	// An earlier attempt's stop holds for its own session only.
	cons, err := co.c.js.OrderedConsumer(ctx, runsStream, jetstream.OrderedConsumerConfig{
		FilterSubjects: []string{evSubject + ">"}, DeliverPolicy: jetstream.DeliverNewPolicy})
	if err == nil {
		co.events, err = cons.Messages(followExpiry)
	}
	if err != nil {
		cancel()
		return fmt.Errorf("following the events of batch %s: %w", batch, err)
	}
	co.wg.Go(func() {
		for {
			msg, err := co.events.Next()
			if err != nil {
				return
			}
			co.event(msg)
		}
	})
	results, err := followBucket(ctx, co.c.js, resultsBucket, batch+".>")
	if err != nil {
		cancel()
		return err
	}
	co.wg.Go(func() {
		for {
			key, value, err := results.next()
			if ctx.Err() != nil {
				co.end(ctx.Err())
				return
			}
			if err != nil {
				co.end(fmt.Errorf("following the results of batch %s: %w", batch, err))
				return
			}
			if value == nil {
				continue // a deleted or purged result
			}
			if item, res := co.result(key, value); res != nil {
				co.deliver(item, res)
			}
		}
	})
	// Results already there (a resumed batch) are known before any item
	// is published again.
	select {
	case <-results.ready:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

// result reads a result a worker recorded under key (<item key>.<its
// signer>): one that a trusted worker did not sign, for the item key it
// is under, is refused and reported.
func (co *Coordinator) result(key string, value []byte) (item string, res *Result) {
	i := strings.LastIndexByte(key, '.')
	if i < 0 {
		co.c.refused.report("results", fmt.Sprintf("refused the result %s: not a flowrun result key", key))
		return "", nil
	}
	item, tag := key[:i], key[i+1:]
	body, signer, err := co.c.workers.open(resultsBucket, key, value)
	if err == nil && !co.c.workers.insecure && signer != tag {
		err = fmt.Errorf("it is stored under key %s but signed by key %s", tag, signer)
	}
	if err != nil {
		co.c.refused.report("results", fmt.Sprintf("refused the result of item %s: %v", item, err))
		return "", nil
	}
	res = &Result{}
	if err := json.Unmarshal(body, res); err != nil {
		res = &Result{Status: runtime.StatusFailed, Error: fmt.Sprintf("the result in JetStream is not JSON: %v", err)}
	}
	return item, res
}

// event passes an event on to the item whose run published it.
func (co *Coordinator) event(msg jetstream.Msg) {
	co.mu.Lock()
	lr := co.runs[strings.TrimPrefix(msg.Subject(), evSubject)]
	co.mu.Unlock()
	if lr == nil {
		return
	}
	var seq uint64
	if md, err := msg.Metadata(); err == nil {
		seq = md.Sequence.Stream
	}
	lr.mu.Lock()
	defer lr.mu.Unlock()
	if lr.closed {
		return
	}
	e, ok := co.c.log.DecodeEvent(msg.Subject(), seq, msg.Headers(), msg.Data(), lr.seen)
	if !ok {
		return
	}
	lr.started = true
	if lr.sink != nil {
		lr.sink.Event(e)
	}
	if seq > 0 {
		co.record(lr, strings.TrimPrefix(msg.Subject(), evSubject), seq, e)
	}
	if e.Type == runtime.EventRunFinished && !lr.over {
		lr.over = true
		close(lr.ended)
	}
}

// record adds a running item's event to its run in the local store, so
// that batch show and flowrun serve show the run as it goes. The first
// one copies what the run stored before (an earlier attempt's timeline
// and checkpoints, and events published before the coordinator followed).
func (co *Coordinator) record(lr *liveRun, run string, seq uint64, e runtime.Event) {
	if lr.failed {
		return
	}
	if lr.rec == nil {
		ctx := context.Background()
		last, err := co.copyRun(ctx, run, lr.inputs, true)
		if err == nil {
			lr.rec, err = co.Store.Recorder(ctx, run)
		}
		if err != nil {
			lr.failed = true
			return
		}
		lr.seq = last
	}
	if seq > lr.seq {
		lr.rec.Event(e)
		lr.seq = seq
	}
}

// close passes no more of the item's events on, and commits those
// recorded.
func (lr *liveRun) close() {
	lr.mu.Lock()
	defer lr.mu.Unlock()
	lr.closed = true
	if lr.rec != nil {
		_ = lr.rec.Flush(context.Background())
		lr.rec = nil
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
	if co.events != nil {
		co.events.Stop()
	}
	co.wg.Wait()
	if co.c != nil {
		co.c.nc.Close()
	}
}

// Halt stops the batch, once, for why: no item is published any more,
// and the workers are told (through a key they watch) to stop this
// session's running items at their next node, leaving them resumable,
// and to drop its queued ones. It returns at once; each waiting Execute
// then returns its item stopped, after its run has stopped on its
// worker. A later Follow of the batch starts a session the stop does not
// hold.
func (co *Coordinator) Halt(why string) {
	co.mu.Lock()
	defer co.mu.Unlock()
	if co.halting != "" {
		return
	}
	co.halting = why
	co.wg.Go(func() {
		ctx := context.Background()
		co.pubMu.Lock()
		key := co.batch + "." + co.session
		body, _ := json.Marshal(stop{Ticket: newTicket(co.session, time.Now()), Reason: why})
		sealed, err := seal(co.c.signer, stopsBucket, key, body)
		if err == nil {
			err = retry(ctx, "telling the workers that batch "+co.batch+" stopped", func(ctx context.Context) error {
				_, err := co.c.stops.Put(ctx, key, sealed)
				return err
			})
		}
		co.pubMu.Unlock()
		co.mu.Lock()
		co.haltErr = err
		co.mu.Unlock()
		close(co.halted)
	})
}

var errHalted = errors.New("the batch is halted")

// Execute publishes one item and waits for its result; it is the batch
// runner's Remote. The item's run is then mirrored into the local store.
func (co *Coordinator) Execute(ctx context.Context, row *store.BatchItem, inputs map[string]any, sink runtime.EventSink) (*runtime.Result, error) {
	key := resultKey(row.Batch, row.Index)
	ch := make(chan *Result, 1)
	lr := &liveRun{sink: sink, inputs: inputs, ended: make(chan struct{}), seen: map[string]bool{}}
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
	case co.halting != "":
		why := co.halting
		co.mu.Unlock()
		return &runtime.Result{RunID: row.Run, Status: runtime.StatusStopped, Reason: why}, nil
	default:
		co.waiting[key] = ch
		co.runs[row.Run] = lr
	}
	co.mu.Unlock()
	defer co.forget(key, row.Run, lr)
	if queued {
		err := co.publish(ctx, row, key, inputs)
		if errors.Is(err, errHalted) {
			return co.stopped(ctx, row, inputs, lr)
		}
		if err != nil {
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
	case <-co.halted:
		if res = co.awaitStop(ctx, lr, ch, itemsSubject+key); res == nil {
			return co.stopped(ctx, row, inputs, lr)
		}
	case <-ctx.Done():
		// The item stays queued; its workers go on.
		return &runtime.Result{RunID: row.Run, Status: runtime.StatusStopped, Reason: "interrupted"}, nil
	}
	lr.close()
	out := &runtime.Result{RunID: row.Run, Status: res.Status, Outputs: res.Outputs, Reason: res.Reason, Steps: res.Steps,
		CostUSD: res.CostUSD, Tokens: res.Tokens, Pending: res.Pending}
	if res.Error != "" {
		out.Err = runtime.Errorf(res.Class, "%s", res.Error)
	}
	if err := co.mirror(context.WithoutCancel(ctx), out, inputs); err != nil {
		return nil, fmt.Errorf("item %s: mirroring its run %s into %s: %w", row.Key, row.Run, co.Store.Path(), err)
	}
	return out, nil
}

// awaitStop waits, after a halt, for an item's run that was seen running
// to stop on its worker, and for the job on subject of one not seen to
// leave the work queue; it returns the item's result if the run ended
// before it could be stopped.
func (co *Coordinator) awaitStop(ctx context.Context, lr *liveRun, ch chan *Result, subject string) *Result {
	lr.mu.Lock()
	started := lr.started
	lr.mu.Unlock()
	wait := co.StopWait
	if wait <= 0 {
		wait = 30 * time.Second
	}
	if !started {
		// A worker may have run it before the halt with its events still
		// on their way, spending: once its job has left the queue, its
		// worker is done with it and what the run did is in JetStream.
		for deadline := time.Now().Add(wait); time.Now().Before(deadline); time.Sleep(50 * time.Millisecond) {
			if queued, err := co.queued(ctx, subject); err == nil && !queued {
				break
			}
		}
		return nil
	}
	timer := time.NewTimer(wait)
	defer timer.Stop()
	select {
	case <-lr.ended:
		// A run that completed records its result just after its last event.
		select {
		case r, ok := <-ch:
			if ok {
				return r
			}
		case <-time.After(time.Second):
		}
	case r, ok := <-ch:
		if ok {
			return r
		}
	case <-timer.C:
	}
	return nil
}

// stopped ends an item halted before it finished: what its run did so
// far is mirrored, and it resumes from there when the batch does.
func (co *Coordinator) stopped(ctx context.Context, row *store.BatchItem, inputs map[string]any, lr *liveRun) (*runtime.Result, error) {
	co.mu.Lock()
	why, err := co.halting, co.haltErr
	co.mu.Unlock()
	if err != nil {
		return nil, fmt.Errorf("item %s: %w", row.Key, err)
	}
	res := &runtime.Result{RunID: row.Run, Status: runtime.StatusStopped, Reason: why}
	lr.close()
	bg := context.WithoutCancel(ctx)
	evs, _, err := co.c.log.EventsSeq(bg, row.Run)
	if err == nil && len(evs) == 0 {
		return res, nil // no worker ran it
	}
	if err == nil {
		_, err = co.copyRun(bg, row.Run, inputs, false)
	}
	if err == nil {
		res.CostUSD, err = runCost(bg, co.Store, row.Run, evs)
	}
	if err == nil {
		err = co.mirrors.Finish(bg, res)
	}
	if err != nil {
		return nil, fmt.Errorf("item %s: mirroring its run %s into %s: %w", row.Key, row.Run, co.Store.Path(), err)
	}
	return res, nil
}

// runCost is what a stopped run spent: the total the run_finished event
// of its last attempt tells, which its ledger settled (a call the stop
// cut short at its reservation included), or, when that attempt's worker
// died before it finished, every turn paid that reached the store.
func runCost(ctx context.Context, st *store.Store, run string, evs []runtime.Event) (float64, error) {
	for _, e := range slices.Backward(evs) {
		if e.Type == runtime.EventRunFinished {
			return e.CostUSD, nil
		}
		if e.Type == runtime.EventRunStarted {
			break
		}
	}
	cost, _, err := st.SpentSoFar(ctx, run)
	return cost, err
}

// publish queues the item's job, bound to this session. An item still
// queued or running since an earlier attempt at the batch is not queued
// twice, even past the stream's dedup window, unless that attempt was
// halted; after a halt, nothing is queued.
func (co *Coordinator) publish(ctx context.Context, row *store.BatchItem, key string, inputs map[string]any) error {
	co.pubMu.RLock()
	defer co.pubMu.RUnlock()
	co.mu.Lock()
	halting, costCap := co.halting, co.costCap
	co.mu.Unlock()
	if halting != "" {
		return errHalted
	}
	data, err := json.Marshal(Job{Ticket: newTicket(co.session, time.Now()), Batch: row.Batch, Index: row.Index, Key: row.Key, Run: row.Run,
		Pipeline: co.ref, Inputs: inputs, Auto: co.Auto, MaxLoops: co.MaxLoops, Models: co.Models, CostCap: costCap})
	if err != nil {
		return fmt.Errorf("item %s: encoding its job: %w", row.Key, err)
	}
	subject := itemsSubject + key
	return retry(ctx, "publishing item "+row.Key, func(ctx context.Context) error {
		if queued, err := co.queued(ctx, subject); queued || err != nil {
			return err
		}
		// The id dedups this coordinator's retries only: an item a halt
		// removed from the queue is queued again by the next one.
		_, err = co.c.js.PublishMsg(ctx, signMsg(co.c.signer, subject, key+"."+co.session, data))
		return err
	})
}

// queued says whether a job that workers will still run waits on subject:
// one of a session that was halted, or that has expired, is dropped by
// the workers that take it.
func (co *Coordinator) queued(ctx context.Context, subject string) (bool, error) {
	msg, err := co.c.items.GetLastMsgForSubject(ctx, subject)
	if errors.Is(err, jetstream.ErrMsgNotFound) {
		return false, nil
	}
	if err != nil {
		return false, err
	}
	var job Job
	if json.Unmarshal(msg.Data, &job) != nil || job.check(time.Now()) != nil {
		return false, nil
	}
	if job.Session == co.session {
		return true, nil
	}
	_, err = co.c.stops.Get(ctx, job.Batch+"."+job.Session)
	if errors.Is(err, jetstream.ErrKeyNotFound) {
		return true, nil
	}
	return false, err
}

func (co *Coordinator) forget(key, run string, lr *liveRun) {
	co.mu.Lock()
	delete(co.waiting, key)
	if co.runs[run] == lr {
		delete(co.runs, run)
	}
	co.mu.Unlock()
	lr.close()
}

// mirror copies a finished item run from JetStream into the local store.
func (co *Coordinator) mirror(ctx context.Context, res *runtime.Result, inputs map[string]any) error {
	if _, err := co.copyRun(ctx, res.RunID, inputs, false); err != nil {
		return err
	}
	return co.mirrors.Finish(ctx, res)
}

// copyRun brings the local store's copy of a run up to date with
// JetStream, creating the run there if it is missing (held by this
// process), and returns the stream sequence of the last event copied.
// With claim, a run the store has as ended is marked running again.
func (co *Coordinator) copyRun(ctx context.Context, runID string, inputs map[string]any, claim bool) (uint64, error) {
	evs, last, err := co.c.log.EventsSeq(ctx, runID)
	if err != nil {
		return 0, err
	}
	cps, err := co.c.log.Checkpoints(ctx, runID, 0)
	if err != nil {
		return 0, err
	}
	return last, co.mirrors.Copy(ctx, runID, inputs, evs, cps, claim)
}
