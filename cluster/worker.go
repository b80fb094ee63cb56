package cluster

import (
	"context"
	"crypto/ed25519"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/flowrun/flowrun/dsl"
	"github.com/flowrun/flowrun/engine"
	"github.com/flowrun/flowrun/errclass"
	"github.com/flowrun/flowrun/llm"
	"github.com/flowrun/flowrun/redact"
	"github.com/flowrun/flowrun/runtime"
)

// Job is the message that asks a worker to run one batch item.
type Job struct {
	Ticket
	Batch    string         `json:"batch"`
	Index    int            `json:"index"`
	Key      string         `json:"key"`
	Run      string         `json:"run"` // the item's run id, the same on every attempt
	Pipeline PipelineRef    `json:"pipeline"`
	Inputs   map[string]any `json:"inputs"`
	Auto     bool           `json:"auto,omitempty"`
	MaxLoops int            `json:"max_loops,omitempty"`
	// Models are the batch's model overrides, NAME=MODEL: the item runs
	// with them on whichever worker takes it.
	Models []string `json:"models,omitempty"`
	// CostCap: the run's model calls reserve from the batch's cost
	// ledger (its entry under Batch in the ledger bucket).
	CostCap bool `json:"cost_cap,omitempty"`
}

func resultKey(batch string, index int) string { return fmt.Sprintf("%s.%d", batch, index) }

// stop is what a coordinator's halt tells the workers, under the key
// <batch>.<session>: stop that session's items.
type stop struct {
	Ticket
	Reason string `json:"reason"`
}

// Result is how an item's run ended, as its worker recorded it.
type Result struct {
	Run     string            `json:"run"`
	Status  runtime.Status    `json:"status"`
	Outputs map[string]any    `json:"outputs,omitempty"`
	Error   string            `json:"error,omitempty"`
	Class   errclass.Class    `json:"class,omitempty"`
	Reason  string            `json:"reason,omitempty"`
	Steps   int               `json:"steps"`
	CostUSD float64           `json:"cost_usd,omitempty"`
	Tokens  int64             `json:"tokens,omitempty"`
	Pending *runtime.Question `json:"pending,omitempty"`
	Worker  string            `json:"worker"`
	Attempt uint64            `json:"attempt"` // the delivery that ran it to its end
}

// Worker pulls items and runs them.
type Worker struct {
	Options
	// Concurrency is how many items run at once; default 1.
	Concurrency int
	// CacheDir holds the pipelines fetched, one directory per hash;
	// default: flowrun/worker-pipelines under the user's cache directory
	// (or the temporary directory when there is none).
	CacheDir string
	// Engine builds what runs a job's pipeline here (*engine.Engine).
	Engine Engine
	// Log receives one line per item started and finished, and one per
	// message refused.
	Log io.Writer
	// AllowMCPStdio lets pipelines start MCP servers (local processes);
	// AllowMCPCommands lets them start only these commands.
	AllowMCPStdio    bool
	AllowMCPCommands []string
	// AllowEnv are the variables of this worker's environment a pipeline
	// may read (env:, an MCP server's values); by default none.
	AllowEnv []string
	// AllowKeyEnv are the variables a model's api_key_env may name beside
	// OPENAI_API_KEY; AllowEndpoints the base URLs a model may send its
	// key to beside this worker's own (OPENAI_BASE_URL, or OpenAI's).
	AllowKeyEnv    []string
	AllowEndpoints []string

	c        *conn
	mu       sync.Mutex         // guards pipelines and fetching them
	pipeline map[string]*loaded // by pipeline hash and model overrides

	stopMu  sync.Mutex
	stopped map[string]string         // by <batch>.<session>: why its coordinator halted it
	running map[*runningItem]struct{} // the items in flight
}

// Engine is what a worker runs pipelines with (*engine.Engine).
type Engine interface {
	// Share builds the services the runs of a pipeline share here (its
	// model client, which must draw on limits for its rate limits), or
	// says why this host cannot run it; called once per pipeline hash
	// and model overrides (NAME=MODEL, a job's).
	Share(p *dsl.Pipeline, limits llm.SharedLimits, models []string) (*engine.Shared, error)
}

// runningItem is an item in flight, which a halt of its batch stops.
type runningItem struct {
	session string // <batch>.<session>
	stop    context.CancelCauseFunc
}

type loaded struct {
	p      *dsl.Pipeline
	shared *engine.Shared
	unfit  *unfitError // this worker cannot run p, for good
}

// Run pulls and runs items until ctx ends (SIGTERM): it then fetches no
// more, stops the runs in flight at their next node and hands their items
// back for another worker to resume, and returns.
func (w *Worker) Run(ctx context.Context) error {
	if w.Name == "" {
		host, _ := os.Hostname()
		w.Name = fmt.Sprintf("flowrun-worker %s/%d", host, os.Getpid())
	}
	if w.CacheDir == "" {
		base, err := os.UserCacheDir()
		if err != nil {
			base = os.TempDir()
		}
		w.CacheDir = filepath.Join(base, "flowrun", "worker-pipelines")
	}
	c, err := connect(ctx, w.Options)
	if err != nil {
		return err
	}
	defer c.nc.Close()
	c.refused = &refusals{log: func(line string) { logLine(w.Log, line) }}
	c.hide = &endpoints{}
	w.c, w.pipeline = c, map[string]*loaded{}
	w.stopped, w.running = map[string]string{}, map[*runningItem]struct{}{}
	cons, err := w.consumer(ctx)
	if err != nil {
		return fmt.Errorf("the workers' consumer on %s: %w", itemsStream, err)
	}
	// Heartbeats keep to the consumer's AckWait, whoever made it.
	if made := cons.CachedInfo().Config.AckWait; made != w.ackWait() {
		w.logf("the workers' consumer redelivers after %s, set when it was made; this worker's %s is not used", made, w.ackWait())
		w.AckWait = made
	}
	stops, err := followBucket(ctx, c.js, stopsBucket, ">")
	if err != nil {
		return fmt.Errorf("watching for halted batches: %w", err)
	}
	var wg sync.WaitGroup
	wg.Go(func() { w.watchStops(stops) })
	for range max(w.Concurrency, 1) {
		wg.Go(func() { w.pull(ctx, cons) })
	}
	wg.Wait()
	for _, l := range w.pipeline {
		if l.shared != nil {
			l.shared.Close()
		}
	}
	return nil
}

// consumer binds the workers' consumer, creating it with this worker's
// AckWait when it is missing and this credential may.
func (w *Worker) consumer(ctx context.Context) (jetstream.Consumer, error) {
	var cons jetstream.Consumer
	err := retry(ctx, "binding the workers' consumer", func(ctx context.Context) error {
		var err error
		cons, err = w.c.js.Consumer(ctx, itemsStream, workerConsumer)
		if errors.Is(err, jetstream.ErrConsumerNotFound) {
			cons, err = w.c.js.CreateConsumer(ctx, itemsStream, workerConsumerConfig(w.ackWait()))
			if errors.Is(err, jetstream.ErrConsumerExists) {
				cons, err = w.c.js.Consumer(ctx, itemsStream, workerConsumer)
			}
			if err != nil && w.c.denials.refused("$JS.API.CONSUMER.CREATE."+itemsStream+"."+workerConsumer+"."+itemsSubject+">") {
				err = ErrNotSetUp
			}
		}
		return err
	})
	return cons, err
}

// watchStops follows the halted sessions until the worker stops, stopping
// the running items of each. A stop holds until it expires: one deleted
// from the bucket still holds here.
func (w *Worker) watchStops(stops *bucketFollower) {
	for {
		key, value, err := stops.next()
		if err != nil {
			return
		}
		if value == nil {
			continue
		}
		var st stop
		body, _, err := w.coordinators().open(stopsBucket, key, value)
		if err == nil {
			err = json.Unmarshal(body, &st)
		}
		if err == nil {
			err = st.check(time.Now())
		}
		if err == nil && !strings.HasSuffix(key, "."+st.Session) {
			err = fmt.Errorf("it is stored under %s but stops session %s", key, st.Session)
		}
		if err != nil {
			w.c.refused.report("stops", fmt.Sprintf("refused the stop %s: %v", key, err))
			continue
		}
		w.stopMu.Lock()
		w.stopped[key] = st.Reason
		for it := range w.running {
			if it.session == key {
				it.stop(&runtime.StopError{Reason: st.Reason})
			}
		}
		w.stopMu.Unlock()
	}
}

// track registers an item in flight, unless its session is halted;
// untrack ends it.
func (w *Worker) track(ctx context.Context, job Job) (itemCtx context.Context, untrack func(), halted string) {
	session := job.Batch + "." + job.Session
	w.stopMu.Lock()
	defer w.stopMu.Unlock()
	if why, ok := w.stopped[session]; ok {
		return nil, nil, why
	}
	itemCtx, stop := context.WithCancelCause(ctx)
	it := &runningItem{session: session, stop: stop}
	w.running[it] = struct{}{}
	return itemCtx, func() {
		w.stopMu.Lock()
		delete(w.running, it)
		w.stopMu.Unlock()
		stop(nil)
	}, ""
}

// pull runs one item at a time: a worker holds no message it is not
// running, so a dying worker strands nothing but its running items.
func (w *Worker) pull(ctx context.Context, cons jetstream.Consumer) {
	for ctx.Err() == nil {
		wait, cancel := context.WithTimeout(ctx, 2*time.Second)
		batch, err := cons.Fetch(1, jetstream.FetchContext(wait))
		if err != nil {
			cancel()
			w.logf("fetching an item: %v", err)
			sleep(ctx, time.Second)
			continue
		}
		for msg := range batch.Messages() {
			w.item(ctx, msg)
		}
		cancel()
		if err := batch.Error(); err != nil && ctx.Err() == nil && !errors.Is(err, context.DeadlineExceeded) && !errors.Is(err, jetstream.ErrNoMessages) {
			w.logf("fetching an item: %v", err)
			sleep(ctx, time.Second)
		}
	}
}

func sleep(ctx context.Context, d time.Duration) {
	select {
	case <-time.After(d):
	case <-ctx.Done():
	}
}

func (w *Worker) logf(format string, args ...any) { logLine(w.Log, fmt.Sprintf(format, args...)) }

// logLine writes a time-stamped line to log, if there is one.
func logLine(log io.Writer, line string) {
	if log != nil {
		fmt.Fprintf(log, "%s %s\n", time.Now().UTC().Format("15:04:05.000"), line)
	}
}

// item runs one job to its result, or hands it back. A job no trusted
// coordinator signed is never run: it is reported and dropped.
func (w *Worker) item(ctx context.Context, msg jetstream.Msg) {
	bg := context.WithoutCancel(ctx)
	if _, err := w.coordinators().msg(msg.Subject(), msg.Headers(), msg.Data()); err != nil {
		// Dropped, not handed back: a job going round the workers would
		// keep their slots busy. batch resume queues a dropped item again.
		w.c.refused.report("jobs", fmt.Sprintf("refused the job on %s, not run: %v", msg.Subject(), err))
		_ = msg.Term()
		return
	}
	var job Job
	if err := json.Unmarshal(msg.Data(), &job); err != nil {
		w.logf("dropping a message on %s that is not a job: %v", msg.Subject(), err)
		_ = msg.Term()
		return
	}
	key := resultKey(job.Batch, job.Index)
	md, err := msg.Metadata()
	if err == nil && msg.Subject() != itemsSubject+key {
		err = fmt.Errorf("it is for item %s", key)
	}
	if err == nil {
		err = job.check(time.Now())
	}
	if err == nil {
		err = w.take(bg, job.Nonce, md.Sequence.Stream)
	}
	if err != nil && !errors.Is(err, errReplayed) && transient(err) {
		w.logf("item %s: %v; handing it back", key, err)
		_ = msg.NakWithDelay(time.Second)
		return
	}
	if err != nil {
		w.c.refused.report("jobs", fmt.Sprintf("refused the job on %s, not run: %v", msg.Subject(), err))
		_ = msg.Term()
		return
	}
	attempt := md.NumDelivered
	if w.recorded(bg, key) {
		// Its result was recorded by an earlier attempt killed before its ack.
		_ = msg.DoubleAck(bg)
		return
	}
	w.logf("item %s (%s) attempt %d: run %s", key, job.Key, attempt, job.Run)
	l, err := w.load(ctx, job.Pipeline, job.Models)
	var unfit *unfitError
	if errors.As(err, &unfit) || ctx.Err() != nil {
		// Another worker may have what this one lacks; the batch waits
		// for one, and this log says why.
		w.logf("item %s: %v; handing it back", key, err)
		_ = msg.NakWithDelay(time.Second)
		// Leave the next items to the others for a while.
		sleep(ctx, 5*time.Second)
		return
	}
	itemCtx, untrack, halted := w.track(ctx, job)
	if halted != "" {
		// Its coordinator's next session queues it again.
		w.logf("item %s: batch %s stopped (%s); dropping it", key, job.Batch, halted)
		_ = msg.Term()
		return
	}
	if w.refused(ctx, job) {
		// Its batch's coordinator halts the batch for the refusal: until
		// its stop arrives, starting the item would only be refused again.
		untrack()
		w.logf("item %s: the cost ledger of batch %s refused a call; handing it back", key, job.Batch)
		_ = msg.NakWithDelay(time.Second)
		return
	}
	stop := w.heartbeat(msg)
	res := w.execute(itemCtx, job, l, err)
	stop()
	// A run that ended before the halt reached it keeps its result; one
	// the batch's cost ledger stopped is halted, as its coordinator halts
	// the batch.
	halt := res.Status == runtime.StatusStopped && ((itemCtx.Err() != nil && ctx.Err() == nil) || w.refused(bg, job))
	untrack()
	switch {
	case ctx.Err() != nil:
		// Stopped by SIGTERM: the checkpoints are stored, another worker resumes.
		w.logf("item %s handed back", key)
		_ = msg.Nak()
		return
	case halt:
		// Its batch stopped: the checkpoints are stored, and it resumes
		// when the batch does.
		w.logf("item %s stopped: %s", key, res.Reason)
		_ = msg.Nak()
		return
	}
	res.Worker, res.Attempt = w.Name, attempt
	if err := w.record(bg, key, res); err != nil {
		w.logf("item %s: %v; handing it back", key, err)
		_ = msg.Nak()
		return
	}
	_ = msg.DoubleAck(bg)
	w.logf("item %s %s", key, res.Status)
}

// refused says whether the job's batch has a cost ledger that refused a
// call.
func (w *Worker) refused(ctx context.Context, job Job) bool {
	if !job.CostCap {
		return false
	}
	_, refused, err := (&kvLedger{kv: w.c.buckets[ledgerBucket], key: job.Batch}).State(ctx)
	return err == nil && refused != nil
}

// errReplayed says a job was taken before from another message: a copy
// of a signed job published again.
var errReplayed = errors.New("a worker took this job before, from another message: it is a replayed copy")

// take records that this worker takes the job with nonce from the
// message at stream sequence seq. The record is created once, for good
// (the server refuses a second one and lets no one delete it), so a
// redelivery of the same message goes on and a copy is refused.
func (w *Worker) take(ctx context.Context, nonce string, seq uint64) error {
	subject := takenSubject + nonce
	record := []byte(strconv.FormatUint(seq, 10))
	return retry(ctx, "recording the job "+nonce+" as taken", func(ctx context.Context) error {
		_, err := w.c.js.Publish(ctx, subject, record, jetstream.WithExpectLastSequencePerSubject(0))
		var apiErr *jetstream.APIError
		if err == nil || !errors.As(err, &apiErr) {
			return err
		}
		msg, err := w.c.taken.GetLastMsgForSubject(ctx, subject)
		if err != nil {
			return err
		}
		if string(msg.Data) != string(record) {
			return errReplayed
		}
		return nil
	})
}

// resultKeyOf is where this worker records an item's result: under the
// item's key and its own key id, so that no one without its key can take
// the place first.
func (w *Worker) resultKeyOf(item string) string {
	if w.Signer == nil {
		return item + ".unsigned"
	}
	return item + "." + w.Signer.id
}

// recorded says whether this worker's key holds a result of the item.
func (w *Worker) recorded(ctx context.Context, item string) bool {
	key := w.resultKeyOf(item)
	e, err := w.c.results.Get(ctx, key)
	if err != nil {
		return false
	}
	_, _, err = w.own().open(resultsBucket, key, e.Value())
	return err == nil
}

// own trusts this worker's key alone.
func (w *Worker) own() trust {
	t := trust{keys: Keys{}, insecure: w.Signer == nil}
	if w.Signer != nil {
		t.keys[w.Signer.id] = w.Signer.key.Public().(ed25519.PublicKey)
	}
	return t
}

// record creates the item's result once. A value someone else put under
// this worker's key first is reported and replaced.
func (w *Worker) record(ctx context.Context, item string, res *Result) error {
	body, err := json.Marshal(res)
	if err != nil {
		body, _ = json.Marshal(&Result{Run: res.Run, Status: runtime.StatusFailed, Error: fmt.Sprintf("encoding the result: %v", err),
			Worker: res.Worker, Attempt: res.Attempt})
	}
	key := w.resultKeyOf(item)
	data, err := seal(w.Signer, resultsBucket, key, w.c.hide.scrub(redact.JSON(body)))
	if err != nil {
		return fmt.Errorf("signing the result of %s: %w", item, err)
	}
	return retry(ctx, "recording the result of "+item, func(ctx context.Context) error {
		_, err := w.c.results.Create(ctx, key, data)
		if !errors.Is(err, jetstream.ErrKeyExists) {
			return err
		}
		e, err := w.c.results.Get(ctx, key)
		if err != nil {
			return err
		}
		if _, _, err := w.own().open(resultsBucket, key, e.Value()); err == nil {
			return nil // an earlier attempt's
		}
		w.c.refused.report("results", fmt.Sprintf("replaced a result of item %s that this worker did not sign", item))
		_, err = w.c.results.Update(ctx, key, data, e.Revision())
		return err
	})
}

// heartbeat tells JetStream the item is still being worked on, a few
// times per AckWait, until stop is called.
func (w *Worker) heartbeat(msg jetstream.Msg) (stop func()) {
	done := make(chan struct{})
	var wg sync.WaitGroup
	wg.Go(func() {
		t := time.NewTicker(w.ackWait() / 3)
		defer t.Stop()
		for {
			select {
			case <-t.C:
				_ = msg.InProgress()
			case <-done:
				return
			}
		}
	})
	return func() { close(done); wg.Wait() }
}

// unfitError says this worker cannot run a pipeline that loads (no model
// endpoint in its environment, no Python for its sandbox): the item goes
// back to the queue instead of failing.
type unfitError struct{ err error }

func (e *unfitError) Error() string { return "this worker cannot run the pipeline: " + e.err.Error() }
func (e *unfitError) Unwrap() error { return e.err }

// execute runs or resumes the job's run through the engine, kept in the
// cluster's log: it goes on from the checkpoints there, whichever worker
// stored them. loadErr is why its pipeline l could not be loaded.
func (w *Worker) execute(ctx context.Context, job Job, l *loaded, loadErr error) *Result {
	failed := func(err error) *Result {
		return &Result{Run: job.Run, Status: runtime.StatusFailed, Error: err.Error(), Class: runtime.ClassOf(err)}
	}
	if loadErr != nil {
		return failed(loadErr)
	}
	// The rule for a remote caller's inputs keeps a job to its own files:
	// a path input must be data or inside the pipeline's directory, and a
	// node reads no file outside it; neither says whether a file exists
	// on this host.
	o := engine.RunOptions{ID: job.Run, Journal: w.c.log, Remote: true, Auto: job.Auto, MaxLoops: job.MaxLoops}
	if job.CostCap {
		o.Ledger = &kvLedger{kv: w.c.buckets[ledgerBucket], key: job.Batch}
	}
	run, err := l.shared.Start(ctx, l.p, job.Inputs, o)
	if err != nil {
		return failed(err)
	}
	res := run.Wait()
	out := &Result{Run: job.Run, Status: res.Status, Outputs: res.Outputs, Reason: res.Reason, Steps: res.Steps,
		CostUSD: res.CostUSD, Tokens: res.Tokens, Pending: res.Pending}
	if res.Err != nil {
		out.Error, out.Class = res.Err.Error(), runtime.ClassOf(res.Err)
	}
	return out
}

// load fetches and loads a job's pipeline, and builds the services its
// runs share with models, once per hash and models.
func (w *Worker) load(ctx context.Context, ref PipelineRef, models []string) (*loaded, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	key := ref.Hash + "\x00" + strings.Join(models, "\x00")
	if l := w.pipeline[key]; l != nil {
		if l.unfit != nil {
			return nil, l.unfit
		}
		return l, nil
	}
	p, err := w.c.fetchPipeline(ctx, w.CacheDir, ref)
	if err == nil {
		err = w.allowed(p)
	}
	if err != nil {
		return nil, err
	}
	w.c.hide.add(p)
	dsl.Walk(p, func(q *dsl.Pipeline, _ *dsl.Node) { w.c.hide.add(q) })
	shared, err := w.Engine.Share(p, &sharedLimits{c: w.c}, models)
	if err != nil {
		w.pipeline[key] = &loaded{unfit: &unfitError{err}}
		return nil, w.pipeline[key].unfit
	}
	l := &loaded{p: p, shared: shared}
	w.pipeline[key] = l
	return l, nil
}
