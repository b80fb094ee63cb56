// Package engine builds and runs pipelines for every front end: the CLI,
// the web UI, MCP serve, batch and cluster workers, flowrun test and
// cmd/bench start, resume, fork, answer and stop runs here, and nowhere
// else.
//
// Guarantees:
//   - Every run started is in the store before its first node runs, with
//     a checkpoint after each node (package durable executes it). Start,
//     Resume, Fork, Answer and Continue hand the run back (a *Run) as soon
//     as it is recorded; every reason it cannot start is their error.
//   - Along a run's path the pipeline file is read once (by its load),
//     its node kinds checked and its inputs prepared once, and its
//     secrets registered once.
//   - The secrets a run may meet (model API keys, base URL passwords, the
//     values of secret env: names; see package secret) are registered with
//     package redact before the run's first event, whoever starts it.
//   - Inputs from a remote caller (RunOptions.Remote) never make the run
//     read a host file outside the pipeline's directory, on this resume
//     or any later one.
//   - A run's model client, sandbox, MCP sessions and trace exporter are
//     made for it and end with it; those Share makes for many runs (a
//     batch's, a cluster worker's jobs of one pipeline) end with
//     Shared.Close, and the one sandbox of Options.ShareSandbox with Close.
//   - A model override names a model the pipeline declares, and a pipeline
//     that needs a model endpoint the environment does not give either
//     replays the cassette it ships (saying so on Options.Notices) or does
//     not start: no run fails at its first model call for want of one.
//   - Errors are typed (*ConfigError, *InputError, *HostError, store and
//     durable errors): a front end decides how each is shown.
//   - A run kept InMemory (a flowrun test case, a benchmark's run) is in
//     no store: nothing of it is recorded, no store is opened for it and
//     no file written, and it is not traced. Doubles stand in for the
//     services a test or benchmark replaces; the rest are the engine's, as
//     for any run, and so are the checks before it starts.
package engine

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"strings"
	"sync"
	"time"

	"github.com/flowrun/flowrun/budget"
	"github.com/flowrun/flowrun/dsl"
	"github.com/flowrun/flowrun/engine/internal/durable"
	"github.com/flowrun/flowrun/engine/internal/services"
	"github.com/flowrun/flowrun/engine/secret"
	"github.com/flowrun/flowrun/journal"
	"github.com/flowrun/flowrun/journal/sqlitejournal"
	"github.com/flowrun/flowrun/jsonvalue"
	"github.com/flowrun/flowrun/llm"
	"github.com/flowrun/flowrun/llmconf"
	"github.com/flowrun/flowrun/runtime"
	"github.com/flowrun/flowrun/store"
)

// Options configure an Engine. The zero value runs with the default store.
type Options struct {
	// Store is an open store the engine uses (and does not close);
	// without it, the store at StorePath is opened when first needed.
	Store     *store.Store
	StorePath string
	// Models are model overrides, NAME=MODEL, for every run.
	Models []string
	// Record names a cassette file every exchange of a run is recorded
	// into, written when the run ends; Replay a cassette every model
	// call is answered from.
	Record, Replay string
	// Cache answers identical model requests from the store's response
	// cache; CacheTTL makes older entries misses (0: no limit).
	Cache    bool
	CacheTTL time.Duration
	// OTLP is where traces of runs go (default: the OTEL_EXPORTER_OTLP_*
	// environment; none when that is unset too).
	OTLP string
	// Shared is the rate budget that runs share with other processes
	// (cluster workers).
	Shared llm.SharedLimits
	// NoEndpoint says runs need no model endpoint here (their model calls
	// happen elsewhere): no cassette fallback, no refusal.
	NoEndpoint bool
	// MaxAttempts is how many times one model turn is sent before a
	// recoverable error is returned (llm.Options.MaxAttempts; default 5).
	MaxAttempts int
	// LookupEnv reads the environment (default os.LookupEnv).
	LookupEnv func(string) (string, bool)
	// Notices receives one line per thing a person should know that is
	// not an error: a cassette replayed for want of an endpoint, a
	// cassette written, a trace export that failed. Default: nowhere.
	Notices io.Writer
	// ShareSandbox runs the code of every run in one sandbox, made at the
	// first run and stopped by Close, in place of one per run: runs at
	// once (flowrun test's cases) share its workers.
	ShareSandbox bool
}

// Engine starts and continues runs.
type Engine struct {
	o Options

	storeOnce sync.Once
	st        *store.Store
	storeErr  error
	ownStore  bool
	// storeJournal records the runs in st: one for the store, so that of two
	// resumers of a run in this process only one wins.
	storeJournal *sqlitejournal.Journal

	notices sync.Mutex // one line at a time on Options.Notices
	runs    sync.WaitGroup
	sandbox sharedSandbox
}

// New checks o and makes an engine. It opens nothing yet.
func New(o Options) (*Engine, error) {
	if o.CacheTTL < 0 {
		return nil, &ConfigError{fmt.Errorf("cache TTL %s: give a positive duration such as 24h", o.CacheTTL)}
	}
	if o.LookupEnv == nil {
		o.LookupEnv = os.LookupEnv
	}
	if o.Notices == nil {
		o.Notices = io.Discard
	}
	if o.Store == nil && o.StorePath == "" {
		o.StorePath = store.DefaultPath()
	}
	return &Engine{o: o}, nil
}

// Store is the engine's store, opened on first use.
func (e *Engine) Store() (*store.Store, error) {
	e.storeOnce.Do(func() {
		if e.o.Store != nil {
			e.st = e.o.Store
		} else {
			e.st, e.storeErr = store.Open(e.o.StorePath)
			e.ownStore = e.storeErr == nil
		}
		if e.storeErr == nil {
			e.storeJournal = sqlitejournal.New(e.st)
		}
	})
	return e.st, e.storeErr
}

// Close waits for the runs the engine started to end and closes the
// store if the engine opened it.
func (e *Engine) Close() error {
	e.runs.Wait()
	e.sandbox.close()
	if e.ownStore {
		return e.st.Close()
	}
	return nil
}

// RunOptions say how one run runs.
type RunOptions struct {
	// Sink also receives every event, besides the store.
	Sink runtime.EventSink
	// OnDelta receives model text as it streams in; nil sends plain
	// requests to models set to stream: auto.
	OnDelta func(path, text string)
	Human   runtime.Human
	// Auto is the run's human policy: confirmations are accepted and asks
	// take their defaults. It is recorded with the run, so that every
	// resume goes on with it; a run given no Human is answered so.
	Auto bool
	// MaxLoops caps every loop at this many iterations (0: no cap).
	MaxLoops int
	// Remote: the inputs come from a remote caller (the web UI, MCP
	// serve), so no path in them is read outside the pipeline directory.
	Remote bool
	// Models are model overrides, NAME=MODEL, for this run, after the
	// engine's. A resume goes on with those the run recorded, these
	// (and the engine's) changing them.
	Models []string
	// Record, when set, receives this run's exchanges instead of
	// Options.Record's file: the caller writes it.
	Record *llm.Cassette
	// ChildOf makes a new run a child of this run or batch (a judge's of
	// what it judges): listed under it, never on its own (store.Run.ChildOf).
	ChildOf string
	// Ledger, when set, is the cost cap the run is part of: every model
	// call of the run reserves from it too (runtime.Options.Ledger).
	Ledger budget.Ledger
	// Journal, when set, keeps the run in place of the engine's store:
	// its checkpoints and events go there, and it goes on from the
	// checkpoints there of run ID (a cluster worker's item, which another
	// worker may have begun). Its record is the caller's: the engine's
	// store holds nothing of it.
	Journal journal.Log
	// ID, when set, is a new run's id (runtime.NewRunID), chosen by a
	// caller that records it elsewhere before the run exists: a batch
	// links its item to the run first, so that a kill in between leaves
	// a link to a run that never started, never a run no item knows.
	ID string
	// Doubles, when set, stand in for some of the services the engine
	// makes for the run (see Doubles).
	Doubles *Doubles
	// InMemory, when set, keeps the run in memory only, in place of the
	// store (see InMemory).
	InMemory *InMemory
}

// ConfigError says the engine's or a run's options do not fit the
// pipeline (an override of a model it does not declare, no model
// endpoint and no cassette, a cassette that does not load).
type ConfigError struct{ Err error }

func (e *ConfigError) Error() string { return e.Err.Error() }
func (e *ConfigError) Unwrap() error { return e.Err }

// InputError says the inputs given do not fit the pipeline.
type InputError struct{ Err error }

func (e *InputError) Error() string { return e.Err.Error() }
func (e *InputError) Unwrap() error { return e.Err }

// HostError says this host cannot run the pipeline (no Python for its
// sandbox, an MCP server it may not start).
type HostError struct{ Err error }

func (e *HostError) Error() string { return e.Err.Error() }
func (e *HostError) Unwrap() error { return e.Err }

// Start checks that p can run here with inputs, records a new run of it
// in the store and returns it as it starts: a nil Run says it did not
// start, and the error why. How it was started (model overrides, human
// policy, replay) is recorded with it: its resumes go on so.
func (e *Engine) Start(ctx context.Context, p *dsl.Pipeline, inputs map[string]any, o RunOptions) (*Run, error) {
	s, err := e.open(p, o, store.RunSpec{})
	if err != nil {
		return nil, err
	}
	return e.start(ctx, s, p, inputs, o)
}

// start records a new run of p on s's services and launches it.
func (e *Engine) start(ctx context.Context, s *services.Session, p *dsl.Pipeline, inputs map[string]any, o RunOptions) (*Run, error) {
	if o.InMemory != nil {
		return e.startInMemory(ctx, s, p, inputs, o)
	}
	if o.Journal != nil {
		return e.startLogged(ctx, s, p, inputs, o)
	}
	st, err := e.Store()
	if err != nil {
		s.Release()
		return nil, err
	}
	s.UseStore(st)
	id := o.ID
	if id == "" {
		id = runtime.NewRunID()
	}
	pr, err := e.runner(st, s, p, o).PrepareStart(ctx, id, p, inputs)
	if err != nil {
		s.Release()
		return nil, preparing(err)
	}
	return e.launch(ctx, s, pr), nil
}

// startLogged starts, or goes on with, run o.ID of p kept in o.Journal.
func (e *Engine) startLogged(ctx context.Context, s *services.Session, p *dsl.Pipeline, inputs map[string]any, o RunOptions) (*Run, error) {
	if o.ID == "" {
		s.Release()
		return nil, &ConfigError{errors.New("a run kept in a journal needs its id")}
	}
	r := e.runner(nil, s, p, o)
	r.Log = o.Journal
	pr, err := r.PrepareLogged(ctx, o.ID, p, inputs)
	if err != nil {
		s.Release()
		return nil, preparing(err)
	}
	return e.launch(ctx, s, pr), nil
}

// ResumeOptions say how to resume.
type ResumeOptions struct {
	RunOptions
	// AllowChanged resumes even if the pipeline changed since the run
	// started.
	AllowChanged bool
	// Edits change values before the run goes on, each written
	// state.NAME=VALUE (a state variable at the checkpoint it goes on
	// from) or inputs.NAME=VALUE (an input: forks only), read and checked
	// by ParseEdits; the run's run_started event records them.
	Edits []string
}

// Resume continues run from its last checkpoint; finished nodes are
// restored, not run again. It returns the run as it goes on, as Start
// does.
func (e *Engine) Resume(ctx context.Context, run string, o ResumeOptions) (*Run, error) {
	return e.resume(ctx, run, "", o, nil)
}

// Fork continues run from a snapshot label or checkpoint number (from) as
// a new run; run is left untouched.
func (e *Engine) Fork(ctx context.Context, run, from string, o ResumeOptions) (*Run, error) {
	if from == "" {
		return nil, errors.New("fork: name a snapshot or a checkpoint to fork from")
	}
	return e.resume(ctx, run, from, o, nil)
}

// resume goes on with run, on shared's services when it is not nil.
func (e *Engine) resume(ctx context.Context, run, from string, o ResumeOptions, shared *services.Session) (*Run, error) {
	st, err := e.Store()
	if err != nil {
		return nil, err
	}
	prev, p, err := durable.Load(ctx, st, run, o.AllowChanged)
	if err != nil {
		return nil, err
	}
	edits, err := ParseEdits(p, o.Edits)
	if err != nil {
		return nil, err
	}
	s := shared
	if s == nil {
		o.Auto = o.Auto || prev.Spec.Auto
		if o.MaxLoops == 0 {
			o.MaxLoops = prev.Spec.MaxLoops
		}
		if s, err = e.open(p, o.RunOptions, prev.Spec); err != nil {
			return nil, err
		}
	}
	s.UseStore(st)
	pr, err := e.runner(st, s, p, o.RunOptions).PrepareContinue(ctx, sqlitejournal.FromStore(prev), p, from, edits)
	if err != nil {
		s.Release()
		return nil, preparing(err)
	}
	return e.launch(ctx, s, pr), nil
}

// Answer resumes run, which waits on a question, with answer, after
// checking it against the question's schema (ParseAnswer and ReadAnswer
// read one from text), and returns it as it goes on. Any further question
// goes to o.Human.
func (e *Engine) Answer(ctx context.Context, run string, answer any, o ResumeOptions) (*Run, error) {
	st, err := e.Store()
	if err != nil {
		return nil, err
	}
	r, err := st.Run(ctx, run)
	if err != nil {
		return nil, err
	}
	q := r.Pending
	if q == nil {
		return nil, &InputError{fmt.Errorf("run %s is %s, not waiting for an answer", run, r.Status)}
	}
	if err := checkAnswer(q, answer); err != nil {
		return nil, &InputError{err}
	}
	o.Human = &given{path: q.Path, value: answer, then: o.Human}
	return e.Resume(ctx, run, o)
}

// checkAnswer says whether answer fits q's schema (text when it has none).
func checkAnswer(q *runtime.Question, answer any) error {
	if err := jsonvalue.Validate(schemaOf(q), answer); err != nil {
		return fmt.Errorf("the answer does not match the question's schema: %w", err)
	}
	return nil
}

// Stop asks the run, wherever it runs, to stop at once with reason; it
// ends stopped and resumable.
func (e *Engine) Stop(ctx context.Context, run, reason string) error {
	if _, err := e.Store(); err != nil {
		return err
	}
	return e.storeJournal.RequestStop(ctx, run, reason)
}

// Shared is one model client, sandbox and set of MCP sessions that many
// runs share, so that its rate limits hold across them (a batch's items
// and their judges, a cluster worker's jobs).
type Shared struct {
	// Sink is where the events of runs that run elsewhere (a batch's
	// items on cluster workers) go to be traced; nil when runs are not
	// traced. Those Start and Resume run are traced already.
	Sink runtime.EventSink
	e    *Engine
	s    *services.Session
}

// Share builds the services that runs of p share, drawing on limits for
// rate limits when it is not nil, with models (NAME=MODEL) overriding
// the engine's (a cluster job's, as its batch was started): a *HostError
// says this host cannot run p. Close ends them.
func (e *Engine) Share(p *dsl.Pipeline, limits llm.SharedLimits, models []string) (*Shared, error) {
	if limits == nil {
		limits = e.o.Shared
	}
	s, err := e.openShared(p, RunOptions{Models: models}, store.RunSpec{}, limits)
	if err != nil {
		return nil, err
	}
	if err := s.Kinds.Check(p); err != nil {
		s.End()
		return nil, &HostError{err}
	}
	s.Shared = true
	return &Shared{Sink: s.Traces(), e: e, s: s}, nil
}

// Start is Engine.Start on the shared services, as Share made them: o's
// Models, Record and OnDelta, which make a run's own services, are not
// the run's.
func (sh *Shared) Start(ctx context.Context, p *dsl.Pipeline, inputs map[string]any, o RunOptions) (*Run, error) {
	return sh.e.start(ctx, sh.s, p, inputs, o)
}

// Resume is Engine.Resume on the shared services: the run goes on as
// they and o say (a batch's settings), in place of the models, cassette,
// human policy and loop cap it recorded, and records that.
func (sh *Shared) Resume(ctx context.Context, run string, o ResumeOptions) (*Run, error) {
	return sh.e.resume(ctx, run, "", o, sh.s)
}

// Close ends the shared services; the runs on them have ended.
func (sh *Shared) Close() { sh.s.End() }

// Human is what answers questions when nobody is there to: with auto,
// each confirmation is accepted and each ask takes its default; else
// every question makes the run wait.
func (e *Engine) Human(auto bool) runtime.Human {
	if !auto {
		return nil
	}
	return autoHuman{}
}

type autoHuman struct{}

func (autoHuman) Answer(_ context.Context, q runtime.Question) (any, bool, error) {
	a, ok := runtime.AutoAnswer(q)
	return a, ok, nil
}

// given answers the question at path once with value; every other
// question goes to then (none: the run waits).
type given struct {
	path  string
	value any
	then  runtime.Human

	mu   sync.Mutex
	used bool
}

func (g *given) Answer(ctx context.Context, q runtime.Question) (any, bool, error) {
	g.mu.Lock()
	if !g.used && q.Path == g.path {
		g.used = true
		g.mu.Unlock()
		return g.value, true, nil
	}
	g.mu.Unlock()
	if g.then == nil {
		return nil, false, nil
	}
	return g.then.Answer(ctx, q)
}

// runner records and runs p on s as o says.
func (e *Engine) runner(st *store.Store, s *services.Session, p *dsl.Pipeline, o RunOptions) *durable.Runner {
	human := o.Human
	if human == nil {
		human = e.Human(o.Auto)
	}
	spec := store.RunSpec{Auto: o.Auto, MaxLoops: o.MaxLoops, Replay: s.Replay}
	// Shared services may override models that a run of another
	// pipeline (a judge's) does not declare: a resume of it would refuse
	// them.
	for name, id := range s.Services.Models {
		if p.Models[name] != nil {
			if spec.Models == nil {
				spec.Models = map[string]string{}
			}
			spec.Models[name] = id
		}
	}
	r := &durable.Runner{Store: st, Kinds: s.Kinds, Sink: s.WithTraces(o.Sink), Human: human, MaxLoops: o.MaxLoops,
		RemoteInputs: o.Remote, LookupEnv: e.o.LookupEnv, Spec: spec, ChildOf: o.ChildOf, Ledger: o.Ledger}
	if st != nil {
		r.Journal = e.storeJournal
	}
	if o.Doubles != nil {
		r.Clock = o.Doubles.Clock
	}
	return r
}

// notice writes one line to Options.Notices; runs may end at once.
func (e *Engine) notice(format string, args ...any) {
	e.notices.Lock()
	defer e.notices.Unlock()
	fmt.Fprintf(e.o.Notices, format+"\n", args...)
}

// ErrNoEndpoint says a pipeline calls a model with neither a key nor an
// endpoint to go to, and ships no cassette to replay.
var ErrNoEndpoint = services.ErrNoEndpoint

// NeedsEndpoint reports whether p, with the NAME=MODEL overrides of
// --model, calls a model that has neither a key nor an endpoint to go to
// in the environment lookupEnv reads. An override that is not valid is
// left out here: the run refuses it with its reason.
func NeedsEndpoint(p *dsl.Pipeline, models []string, lookupEnv func(string) (string, bool)) bool {
	m, err := overrides(p, nil, models)
	if err != nil {
		m = nil
	}
	return services.NeedsEndpoint(p, m, lookupEnv)
}

// open builds the services for a run of p that goes on as recorded (a
// resumed run's spec; none for a new run).
func (e *Engine) open(p *dsl.Pipeline, o RunOptions, recorded store.RunSpec) (*services.Session, error) {
	return e.openShared(p, o, recorded, e.o.Shared)
}

// openShared builds the services for runs of p, drawing on limits for
// rate limits. A run goes on with the model overrides and the cassette
// it recorded, unless it is given others.
func (e *Engine) openShared(p *dsl.Pipeline, o RunOptions, recorded store.RunSpec, limits llm.SharedLimits) (*services.Session, error) {
	models, err := overrides(p, recorded.Models, e.o.Models, o.Models)
	if err != nil {
		return nil, &ConfigError{err}
	}
	secret.Register(p, e.o.LookupEnv)
	replay := e.o.Replay
	if o.Doubles != nil && o.Doubles.Replay != "" {
		replay = o.Doubles.Replay
	}
	if replay == "" {
		replay = recorded.Replay
	}
	s, err := services.Open(p, services.Options{Models: models, Replay: replay, NoEndpoint: e.o.NoEndpoint,
		Record: o.Record, RecordTo: e.o.Record, Cache: e.o.Cache, CacheTTL: e.o.CacheTTL, OTLP: e.o.OTLP, Untraced: o.InMemory != nil,
		Limits: limits, MaxAttempts: e.o.MaxAttempts, LookupEnv: e.o.LookupEnv,
		OnDelta: o.OnDelta, Notice: e.notice, Doubles: e.doubles(o.Doubles)})
	if err != nil {
		return nil, &ConfigError{err}
	}
	return s, nil
}

// overrides reads NAME=MODEL overrides of models p declares, over those
// recorded (a run's, as it goes on).
func overrides(p *dsl.Pipeline, recorded map[string]string, lists ...[]string) (map[string]string, error) {
	out := map[string]string{}
	for name, id := range recorded {
		lists = append([][]string{{name + "=" + id}}, lists...)
	}
	for _, list := range lists {
		for _, kv := range list {
			name, id, ok := strings.Cut(kv, "=")
			if !ok || name == "" || id == "" {
				return nil, fmt.Errorf("model override %q: write it as NAME=MODEL", kv)
			}
			m, declared := p.Models[name]
			if !declared {
				return nil, fmt.Errorf("model override %q: the pipeline declares no model %q", kv, name)
			}
			if _, err := llmconf.Override(m, id); err != nil {
				return nil, fmt.Errorf("model override %q: %w", kv, err)
			}
			out[name] = id
		}
	}
	return out, nil
}
