// Package batch runs a pipeline over a dataset and scores each item.
//
// Guarantees: every item of a batch is one durable run in the store,
// linked to the batch before the run exists, and ends with exactly one
// result (its last). A batch interrupted at any point (Ctrl-C, a kill, its
// cost limit) resumes without running a finished item again and resumes
// each unfinished run from its checkpoints, so no finished node is paid for
// twice. A problem with one item (a malformed line, a missing field, a
// failing run) fails that item, named, and the rest of the batch runs. The
// engine starts every run of a batch, items and judges, on one set of
// services (engine.Shared), so a model's rpm, tpm and max_concurrency are
// one budget for the whole batch, and each run records how it was started;
// a judge's run is a child of the item's.
//
// A batch records its Settings with it, typed. PrepareResume and
// Runner.Resume continue a batch the same way for every front end: it
// keeps every recorded setting (its cost cap, concurrency, loop cap,
// models, NATS keys) that the resume does not give, refuses a changed
// pipeline or dataset unless told otherwise, and reruns failed items only
// when asked. The spend a cost cap weighs, the scores and the summaries
// are computed from the store, not from this process's memory, so a
// resumed batch counts what earlier attempts spent.
package batch

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"strings"
	"sync"
	"time"

	"github.com/flowrun/flowrun/budget"
	"github.com/flowrun/flowrun/dsl"
	"github.com/flowrun/flowrun/engine"
	"github.com/flowrun/flowrun/figures"
	"github.com/flowrun/flowrun/runtime"
	"github.com/flowrun/flowrun/store"
)

// ClassDataset is the error class of an item whose dataset entry is
// unusable: not JSON, the wrong number of CSV fields, a missing input.
const ClassDataset = "dataset"

// ClassScore is the error class of a completed item whose metrics could
// not all be computed.
const ClassScore = "score"

// Selection picks the items of a dataset a batch runs: those the filter
// accepts, then a sample, then the first Limit.
type Selection struct {
	Filter string // an expr-lang condition over item
	Sample int
	Seed   uint64
	Limit  int
}

// Select applies sel to items, keeping dataset order. Items whose entry
// is broken are kept whatever the filter says, so that they are reported.
func Select(items []*Item, sel Selection) ([]*Item, error) {
	out := items
	if sel.Filter != "" {
		cond, err := dsl.CompileCondition(sel.Filter)
		if err != nil {
			return nil, fmt.Errorf("--filter %q: %w", sel.Filter, err)
		}
		out = nil
		for _, it := range items {
			if it.Err != nil {
				out = append(out, it)
				continue
			}
			keep, err := cond.Match(it.Fields())
			if err != nil {
				return nil, fmt.Errorf("--filter %q on %s: %w", sel.Filter, it.Where, err)
			}
			if keep {
				out = append(out, it)
			}
		}
	}
	if sel.Sample > 0 && sel.Sample < len(out) {
		rng := rand.New(rand.NewPCG(sel.Seed, 0xba7c4))
		picked := rng.Perm(len(out))[:sel.Sample]
		keep := make([]bool, len(out))
		for _, i := range picked {
			keep[i] = true
		}
		var sampled []*Item
		for i, it := range out {
			if keep[i] {
				sampled = append(sampled, it)
			}
		}
		out = sampled
	}
	if sel.Limit > 0 && sel.Limit < len(out) {
		out = out[:sel.Limit]
	}
	return out, nil
}

// Runner runs the items of a batch.
type Runner struct {
	Store    *store.Store
	Pipeline *dsl.Pipeline
	// Runs starts and resumes the batch's runs here, on one model client
	// for every run: one rate budget.
	Runs *engine.Shared
	// Auto answers the runs' questions by their defaults; else they wait,
	// as many runs at once cannot share one person's prompt.
	Auto     bool
	MaxLoops int
	// Models are the model overrides (NAME=MODEL) the batch runs with:
	// its Runs have them here; a cluster's jobs carry them to workers.
	Models []string
	Scorer *Scorer
	Map    map[string]string // --map input=field

	Concurrency int // items run at once; default 8
	// Repeat runs each item this many times (0 or 1: once), each a
	// distinct run recorded as the item's repeat 0, 1, ...
	Repeat int
	// MaxCostUSD caps the batch's spend (0: no limit): every model call
	// of every item, repeat and judge reserves its worst case from one
	// ledger before it is sent, so the batch never spends more on priced
	// models; a call the ledger refuses stops its item's run (resumable)
	// and the batch. The ledger is in this process, or, for items run
	// remotely, the one RemoteLedger opens.
	MaxCostUSD  float64
	RetryFailed bool // run failed items again (resuming their runs)
	// AllowChanged resumes item runs whose pipeline changed since they started.
	AllowChanged bool

	// Progress is told of each item as it finishes, one call at a time.
	Progress func(Progress)
	// RemoteSink, if set, also receives the events of every item run
	// Remote runs (engine.Shared.Sink traces them); items run at once call
	// it from several goroutines.
	RemoteSink runtime.EventSink
	// Remote, if set, runs each item's run elsewhere (a worker) instead of
	// in this process: it gets the item, linked to its run id, its inputs
	// and a sink for the run's events as they happen (its model spend
	// counts toward MaxCostUSD at once), and returns once the run has
	// ended and is in Store.
	Remote func(ctx context.Context, row *store.BatchItem, inputs map[string]any, sink runtime.EventSink) (*runtime.Result, error)
	// Shuffle, if set, runs the items in a random order drawn from
	// OrderSeed instead of dataset order.
	Shuffle   bool
	OrderSeed uint64
	// Decide, if set, sees each item's result as it finishes (one call at
	// a time) and returns why the batch may stop, or "": no item starts
	// after it returns a reason, and the items running finish.
	Decide func(row *store.BatchItem, passed bool) string
	// Halt, if set, is called once, with the batch's stop reason, when the
	// ledger refuses a call: a Remote then stops the items it runs (they
	// end stopped, resumable) and queues no more. Items run in this
	// process go on until their next call is refused.
	Halt func(reason string)
	// RemoteLedger, for a Remote batch with MaxCostUSD, opens the ledger
	// the remote runs reserve from, named name, of limit USD with spent
	// already spent, and returns how to read it.
	RemoteLedger func(ctx context.Context, name string, limit, spent float64) (Ledger, error)
}

// Ledger reads a batch's cost ledger: what it has settled and the first
// reservation it refused (nil while none was). *budget.Cap is one.
type Ledger interface {
	State(ctx context.Context) (spent float64, refused *budget.ExceededError, err error)
}

// Progress is the state of a batch as an item finishes.
type Progress struct {
	Item    *store.BatchItem
	Name    string // the item's run as views name it (see RunName)
	Where   string // the item's place in the dataset
	Total   int
	Done    int // items with a final result: completed or failed
	Passed  int // items passing the primary metric
	Failed  int
	Spent   float64 // USD, the whole batch's
	Started time.Time
	Ran     int // items finished by this process, for the rate
}

// Create records a new batch of the selected items; created is told once
// it has its id. Items whose entry is broken, or does not give the
// pipeline valid inputs, are recorded as failed with class "dataset" at
// once, and reported to Progress.
func (r *Runner) Create(ctx context.Context, b *store.Batch, items []*Item, created func(*store.Batch)) error {
	repeat := max(r.Repeat, 1)
	rows := make([]*store.BatchItem, 0, len(items)*repeat)
	for _, it := range items {
		for n := range repeat {
			rows = append(rows, &store.BatchItem{Index: it.Index, Repeat: n, Key: it.Key, Item: it.Fields()})
		}
	}
	b.ID = "b" + runtime.NewRunID()
	if err := r.Store.CreateBatch(ctx, b, rows); err != nil {
		return err
	}
	created(b)
	st := &batchState{r: r, b: b, total: len(rows), started: time.Now()}
	for i, it := range items {
		if _, err := r.inputs(it); err != nil {
			for _, row := range rows[i*repeat : (i+1)*repeat] {
				row.Status, row.Error, row.Class = runtime.StatusFailed, err.Error(), ClassDataset
				if err := r.Store.FinishItem(ctx, row); err != nil {
					return err
				}
				st.finished(row, it, 0)
			}
		}
	}
	return nil
}

func (r *Runner) inputs(it *Item) (map[string]any, error) {
	in, err := Inputs(r.Pipeline, it, r.Map)
	if err != nil {
		return nil, err
	}
	if _, err := runtime.PrepareInputs(r.Pipeline, in); err != nil {
		return nil, fmt.Errorf("%s: %w", it.Where, err)
	}
	return in, nil
}

// Run runs every item of batch b that has no result yet: pending items
// start, items whose run started resume it. dataset gives the pending
// items' entries (by Index); it may be nil when none is pending. It
// returns how the batch ended: completed when every item has its result,
// else stopped with the reason.
func (r *Runner) Run(ctx context.Context, b *store.Batch, dataset []*Item) (status runtime.Status, reason string, err error) {
	rows, err := r.Store.BatchItems(ctx, b.ID)
	if err != nil {
		return "", "", err
	}
	byIndex := map[int]*Item{}
	for _, it := range dataset {
		byIndex[it.Index] = it
	}
	st := &batchState{r: r, b: b, total: len(rows), started: time.Now(), prior: map[slot]float64{},
		trajectory: r.Scorer != nil && r.Scorer.ReadsTrajectory()}
	var todo []*store.BatchItem
	for _, row := range rows {
		switch {
		case row.Status == runtime.StatusCompleted:
			st.done++
			st.spent += row.CostUSD
			if r.Scorer.Passed(row.Scores) {
				st.passed++
			}
		case row.Status == runtime.StatusFailed && !(r.RetryFailed && row.Class != ClassDataset):
			st.done++
			st.failed++
			st.spent += row.CostUSD
		default:
			// What the item's run spent before: its total replaces it when
			// the item finishes.
			if row.Run != "" {
				if run, err := r.Store.Run(ctx, row.Run); err == nil {
					st.spent += run.CostUSD
					st.prior[slotOf(row)] = run.CostUSD
				}
			}
			if row.Status == store.ItemPending && byIndex[row.Index] == nil {
				return "", "", fmt.Errorf("batch %s: item %s (index %d) is not in the dataset any more", b.ID, row.Key, row.Index)
			}
			todo = append(todo, row)
		}
	}

	if r.Shuffle {
		rng := rand.New(rand.NewPCG(r.OrderSeed, 0x5e9))
		rng.Shuffle(len(todo), func(i, j int) { todo[i], todo[j] = todo[j], todo[i] })
	}
	if err := st.openLedger(ctx); err != nil {
		return "", "", err
	}
	concurrency := r.Concurrency
	if concurrency <= 0 {
		concurrency = 8
	}
	slots := make(chan struct{}, concurrency)
	var wg sync.WaitGroup
	for _, row := range todo {
		select {
		case slots <- struct{}{}:
		case <-ctx.Done():
		}
		if ctx.Err() != nil {
			break
		}
		if st.stopped() || st.exhausted(ctx) {
			<-slots
			break
		}
		sink := &spendSink{st: st}
		wg.Add(1)
		go func() {
			defer wg.Done()
			defer func() { <-slots }()
			st.runItem(ctx, row, byIndex[row.Index], sink)
		}()
	}
	wg.Wait()
	return st.outcome(ctx)
}

// batchState is what a batch's workers share.
type batchState struct {
	r       *Runner
	b       *store.Batch
	started time.Time
	prior   map[slot]float64 // what an item's run had spent when the batch resumed
	// trajectory says whether a metric reads the run's trajectory: only
	// then are an item's events read back to score it.
	trajectory bool

	mu                          sync.Mutex
	total, done, passed, failed int
	ran                         int
	spent                       float64 // finished items' cost plus what running items have spent so far
	waiting                     []string
	stop                        string
	storeErr                    error
	refused                     *budget.ExceededError // the ledger's refusal that stopped the batch

	halt sync.Once

	// ledger is the batch's cost ledger (nil without a cap); local is it
	// when it is in this process, where the runs reserve from it.
	ledger Ledger
	local  *budget.Cap
}

// openLedger opens the batch's cost ledger, with what the batch has
// spent before.
func (st *batchState) openLedger(ctx context.Context) error {
	r := st.r
	if r.MaxCostUSD <= 0 {
		return nil
	}
	name := batchCap(r.MaxCostUSD)
	if r.Remote == nil {
		st.local = budget.New(name, r.MaxCostUSD, st.spent, nil)
		st.ledger = st.local
		return nil
	}
	if r.RemoteLedger == nil {
		return fmt.Errorf("batch %s: a cost cap on items run remotely needs a shared ledger", st.b.ID)
	}
	l, err := r.RemoteLedger(ctx, name, r.MaxCostUSD, st.spent)
	if err != nil {
		return fmt.Errorf("batch %s: opening its cost ledger: %w", st.b.ID, err)
	}
	st.ledger = l
	return nil
}

// batchCap names a batch's cost cap of usd in what it says: the amount
// as every amount reads (a cap of 5e-05 is "$0.000050"), and no flag, as
// the front end that set it says how.
func batchCap(usd float64) string { return capName + figures.USD(usd) }

const capName = "the batch's cost cap of "

// StoppedByCap says whether a batch stopped for reason stopped for its
// cost cap: resuming it spends only with a higher cap.
func StoppedByCap(reason string) bool { return strings.HasPrefix(reason, capName) }

// exhausted says whether the batch must stop for its cost cap: its
// ledger refused a call, has nothing left or cannot be read. A remote
// batch is halted.
func (st *batchState) exhausted(ctx context.Context) bool {
	if st.ledger == nil {
		return false
	}
	spent, refused, err := st.ledger.State(ctx)
	switch {
	case err != nil:
		// Whether the ledger refused a call cannot be told, and workers
		// hand back the items of a batch whose ledger refused until the
		// batch halts: stop (resumable) rather than wait for them.
		st.stopFor(fmt.Sprintf("reading the batch's cost ledger: %v", err), nil)
		return true
	case refused == nil && spent < st.r.MaxCostUSD-budget.Slack:
		return false
	case refused == nil:
		refused = &budget.ExceededError{Cap: batchCap(st.r.MaxCostUSD), Limit: st.r.MaxCostUSD, Spent: spent}
	}
	st.stopFor(refused.Error(), refused)
	return true
}

// stopFor stops the batch for why, the ledger's refusal if it was one,
// unless it stopped already, and halts the items run remotely.
func (st *batchState) stopFor(why string, refused *budget.ExceededError) {
	st.mu.Lock()
	if st.stop == "" {
		st.stop, st.refused = why, refused
	}
	why = st.stop
	st.mu.Unlock()
	if st.r.Halt != nil {
		st.halt.Do(func() { st.r.Halt(why) })
	}
}

// runLedger is what the batch's runs in this process reserve from, nil
// when they reserve from none.
func (st *batchState) runLedger() budget.Ledger {
	if st.local == nil {
		return nil
	}
	return st.local
}

// slot is one run of a batch: an item's index and its repeat.
type slot struct{ index, repeat int }

func slotOf(row *store.BatchItem) slot { return slot{row.Index, row.Repeat} }

func (st *batchState) stopped() bool {
	st.mu.Lock()
	defer st.mu.Unlock()
	return st.stop != ""
}

func (st *batchState) setStop(why string) {
	st.mu.Lock()
	defer st.mu.Unlock()
	if st.stop == "" {
		st.stop = why
	}
}

// spendSink counts an item's model spend into the batch's as it happens.
type spendSink struct {
	st      *batchState
	counted float64 // guarded by st.mu
}

func (s *spendSink) Event(e runtime.Event) {
	if e.Type == runtime.EventModelTurn && e.Turn != nil && e.Turn.CostUSD > 0 {
		s.st.mu.Lock()
		s.st.spent += e.Turn.CostUSD
		s.counted += e.Turn.CostUSD
		s.st.mu.Unlock()
	}
	if e.Type == runtime.EventRunFinished && e.Status == runtime.StatusStopped && s.st.r.Remote != nil {
		// A run the remote ledger refused halts the batch. Read with the
		// run's last event, after the events of every run that started
		// before it, so that the halt finds those running.
		s.st.exhausted(context.Background())
	}
}

// remoteSink gives the events of a run that runs elsewhere to the
// batch's RemoteSink, and counts its spend.
type remoteSink struct{ *spendSink }

func (s remoteSink) Event(e runtime.Event) {
	if s.st.r.RemoteSink != nil {
		s.st.r.RemoteSink.Event(e)
	}
	s.spendSink.Event(e)
}

// runItem starts or resumes one item's run, scores it and records the
// result; sink counts its spend.
func (st *batchState) runItem(ctx context.Context, row *store.BatchItem, it *Item, sink *spendSink) {
	r := st.r
	started := time.Now()
	res, err := st.execute(ctx, row, it, sink)
	if err == nil && r.Remote == nil && st.refusedAtOnce(ctx, row, res) {
		return
	}
	bg := context.WithoutCancel(ctx)
	row.DurationMS = float64(time.Since(started).Microseconds()) / 1000
	row.Scores, row.Reasoning, row.Checks, row.Error, row.Class = nil, nil, nil, "", ""
	var de *datasetError
	switch {
	case err != nil && errors.As(err, &de):
		row.Status, row.Error, row.Class = runtime.StatusFailed, de.err.Error(), ClassDataset
	case err != nil:
		row.Status, row.Error, row.Class = runtime.StatusFailed, err.Error(), string(runtime.ClassOf(err))
	default:
		row.Status, row.CostUSD, row.Tokens = res.Status, res.CostUSD, int(res.Tokens)
		switch res.Status {
		case runtime.StatusCompleted:
			if r.Scorer == nil {
				break
			}
			env := &dsl.ScoreEnv{Outputs: res.Outputs, Item: row.Item,
				Run: dsl.ScoreRun{CostUSD: res.CostUSD, Tokens: int(res.Tokens), DurationMS: row.DurationMS, Status: string(res.Status)}}
			if st.trajectory {
				if err := Trajectory(ctx, r.Store, r.Pipeline, res.RunID, &env.Run); err != nil {
					row.Error, row.Class = err.Error(), ClassScore
					break
				}
			}
			judge := func(ctx context.Context, p *dsl.Pipeline, in map[string]any) (*runtime.Result, error) {
				o := st.runOptions(sink)
				o.ChildOf = res.RunID
				return wait(r.Runs.Start(ctx, p, in, o))
			}
			scored, serr := r.Scorer.Score(ctx, env, judge)
			row.Scores, row.Reasoning, row.Checks = scored.Scores, scored.Reasoning, scored.Checks
			row.CostUSD, row.Tokens = row.CostUSD+scored.CostUSD, row.Tokens+scored.Tokens
			if serr != nil {
				row.Error, row.Class = serr.Error(), scoreClass(serr)
			}
		case runtime.StatusFailed:
			row.Error, row.Class = errText(res.Err), string(runtime.ClassOf(res.Err))
		case runtime.StatusStopped:
			row.Error, row.Class = res.Reason, string(runtime.StatusStopped)
		case runtime.StatusWaiting:
			row.Error, row.Class = res.Pending.Text, string(runtime.StatusWaiting)
		}
	}
	if ferr := r.Store.FinishItem(bg, row); ferr != nil {
		st.mu.Lock()
		st.storeErr = errors.Join(st.storeErr, ferr)
		st.mu.Unlock()
	}
	st.mu.Lock()
	counted := sink.counted + st.prior[slotOf(row)]
	st.mu.Unlock()
	st.finished(row, it, counted)
	if st.r.Remote != nil {
		st.exhausted(bg)
	}
}

// refusedAtOnce says whether the batch's ledger refused the item's run
// before it spent anything in this attempt: the item then has no result
// (its run resumes with the batch), rather than a stopped one that the
// pass rates would count. (An item run remotely keeps the stopped result
// its worker recorded, as a halted one does.)
func (st *batchState) refusedAtOnce(ctx context.Context, row *store.BatchItem, res *runtime.Result) bool {
	if res.Status != runtime.StatusStopped || !st.exhausted(ctx) {
		return false
	}
	st.mu.Lock()
	defer st.mu.Unlock()
	return st.refused != nil && res.CostUSD <= st.prior[slotOf(row)]+budget.Slack
}

func errText(err error) string {
	if err == nil {
		return ""
	}
	return err.Error()
}

// datasetError is an item whose entry cannot give the pipeline inputs.
type datasetError struct{ err error }

func (e *datasetError) Error() string { return e.err.Error() }

// runOptions say how the engine runs a run of the batch whose spend sink
// counts.
func (st *batchState) runOptions(sink *spendSink) engine.RunOptions {
	return engine.RunOptions{Sink: sink, Auto: st.r.Auto, MaxLoops: st.r.MaxLoops, Ledger: st.runLedger()}
}

// execute starts the item's run, or resumes the run it already has; sink
// counts its spend. A run already finished (the batch was killed before
// recording it) is read back from the store, not run again.
func (st *batchState) execute(ctx context.Context, row *store.BatchItem, it *Item, sink *spendSink) (*runtime.Result, error) {
	r := st.r
	if r.Remote != nil {
		return st.remote(ctx, row, it, remoteSink{sink})
	}
	o := st.runOptions(sink)
	if row.Run != "" {
		prev, err := r.Store.Run(ctx, row.Run)
		switch {
		case err == nil && (prev.Status == runtime.StatusCompleted || (prev.Status == runtime.StatusFailed && !r.RetryFailed)):
			res := &runtime.Result{RunID: prev.ID, Status: prev.Status, Outputs: prev.Outputs, CostUSD: prev.CostUSD, Tokens: int64(prev.Tokens)}
			if prev.Error != "" {
				res.Err = errors.New(prev.Error)
			}
			return res, nil
		case err == nil:
			return wait(r.Runs.Resume(ctx, row.Run, engine.ResumeOptions{RunOptions: o, AllowChanged: r.AllowChanged}))
		case !errors.Is(err, store.ErrNotFound):
			return nil, err
		}
		// Linked, but killed before the run was recorded: start it now.
	}
	in, err := st.link(ctx, row, it)
	if err != nil {
		return nil, err
	}
	o.ID = row.Run
	return wait(r.Runs.Start(ctx, r.Pipeline, in, o))
}

// wait waits for run, which started unless err says why not, to end.
func wait(run *engine.Run, err error) (*runtime.Result, error) {
	if err != nil {
		return nil, err
	}
	return run.Wait(), nil
}

// remote has r.Remote run the item, linked to its run id.
func (st *batchState) remote(ctx context.Context, row *store.BatchItem, it *Item, sink runtime.EventSink) (*runtime.Result, error) {
	in, err := st.link(ctx, row, it)
	if err != nil {
		return nil, err
	}
	return st.r.Remote(ctx, row, in, sink)
}

// link gives an item that has no run yet its run id, recorded before the
// run exists, and returns the run's inputs.
func (st *batchState) link(ctx context.Context, row *store.BatchItem, it *Item) (map[string]any, error) {
	if it == nil {
		return nil, &datasetError{fmt.Errorf("item %s: its run %s was never recorded and the dataset entry is gone", row.Key, row.Run)}
	}
	in, err := st.r.inputs(it)
	if err != nil {
		return nil, &datasetError{err}
	}
	if row.Run == "" {
		id := runtime.NewRunID()
		if err := st.r.Store.StartItem(ctx, row.Batch, row.Index, row.Repeat, id); err != nil {
			return nil, err
		}
		row.Run = id
	}
	return in, nil
}

// finished counts an item's result and reports progress; counted is
// what the batch's spend already holds of the item's cost.
func (st *batchState) finished(row *store.BatchItem, it *Item, counted float64) {
	st.mu.Lock()
	defer st.mu.Unlock()
	// The run's total replaces what its turns added as they happened.
	st.spent += row.CostUSD - counted
	st.ran++
	passed := row.Status == runtime.StatusCompleted && st.r.Scorer.Passed(row.Scores)
	switch row.Status {
	case runtime.StatusCompleted:
		st.done++
		if passed {
			st.passed++
		}
	case runtime.StatusFailed:
		st.done++
		st.failed++
	case runtime.StatusWaiting:
		st.waiting = append(st.waiting, row.Run)
	}
	if st.r.Decide != nil && finished(row.Status) && st.stop == "" {
		st.stop = st.r.Decide(row, passed)
	}
	if st.r.Progress == nil {
		return
	}
	where := row.Key
	if it != nil {
		where = it.Where
	}
	st.r.Progress(Progress{Item: row, Name: RunName(row.Key, row.Repeat, st.r.Repeat > 1), Where: where, Total: st.total, Done: st.done,
		Passed: st.passed, Failed: st.failed, Spent: st.spent, Started: st.started, Ran: st.ran})
}

// outcome records how this attempt at the batch ended.
func (st *batchState) outcome(ctx context.Context) (status runtime.Status, reason string, err error) {
	st.mu.Lock()
	defer st.mu.Unlock()
	status = runtime.StatusCompleted
	switch {
	case st.storeErr != nil:
		status, reason = runtime.StatusFailed, "recording results: "+st.storeErr.Error()
	case st.refused != nil:
		// Told with what the batch spent in the end: the calls in flight
		// when the ledger refused one settled since.
		final := *st.refused
		if spent, _, err := st.ledger.State(context.WithoutCancel(ctx)); err == nil {
			final.Spent = spent
		}
		status, reason = runtime.StatusStopped, final.Error()
	case st.stop != "":
		status, reason = runtime.StatusStopped, st.stop
	case ctx.Err() != nil:
		status, reason = runtime.StatusStopped, "interrupted"
	case st.done < st.total && len(st.waiting) > 0:
		status, reason = runtime.StatusStopped, fmt.Sprintf("%d item(s) wait for an answer (runs %s)", len(st.waiting), strings.Join(st.waiting, ", "))
	case st.done < st.total:
		status, reason = runtime.StatusStopped, fmt.Sprintf("%d item(s) have no result yet", st.total-st.done)
	}
	err = st.r.Store.FinishBatch(context.WithoutCancel(ctx), st.b.ID, status, reason)
	if st.storeErr != nil {
		err = errors.Join(st.storeErr, err)
	}
	return status, reason, err
}
