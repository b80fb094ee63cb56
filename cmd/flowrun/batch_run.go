package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"sync"
	"time"

	"github.com/flowrun/flowrun/batch"
	"github.com/flowrun/flowrun/batch/batchtext"
	"github.com/flowrun/flowrun/cluster"
	"github.com/flowrun/flowrun/dsl"
	"github.com/flowrun/flowrun/engine"
	"github.com/flowrun/flowrun/internal/termview"
	"github.com/flowrun/flowrun/jsonvalue"
	"github.com/flowrun/flowrun/runtime"
	"github.com/flowrun/flowrun/store"
)

// batchCommand is a subcommand of flowrun batch.
type batchCommand func(ctx context.Context, args []string, stdin io.Reader, stdout, stderr io.Writer) int

// batchCommands are flowrun batch's subcommands; flowrun batch PIPELINE
// (any other first argument) runs a new batch. Files that add
// subcommands register them here from an init function.
var batchCommands = map[string]batchCommand{
	"resume": batchResumeCmd,
}

func batchCmd(ctx context.Context, args []string, stdin io.Reader, stdout, stderr io.Writer) int {
	if len(args) > 0 {
		if sub, ok := batchCommands[args[0]]; ok {
			return sub(ctx, args[1:], stdin, stdout, stderr)
		}
	}
	return batchRunCmd(ctx, args, stdin, stdout, stderr)
}

// batchFlags are the flags of flowrun batch and batch resume that say how
// the items run.
type batchFlags struct {
	concurrency int
	maxCost     float64
	asJSON      bool
	auto        bool
	maxLoops    int
	storePath   *string
	models      modelFlags
	// remote is not a flag: the runs happen on workers (--nats), so this
	// process needs a model endpoint only for judge metrics.
	remote bool
}

func (f *batchFlags) register(fs *flag.FlagSet) {
	fs.IntVar(&f.concurrency, "concurrency", 8, "run `N` items at once (with --nats: keep at most N items queued or running on the workers; default no cap)")
	fs.Float64Var(&f.maxCost, "max-cost-usd", 0, "start an item only while the spend so far, what running items may still spend and one more item fit within `USD` (0: no limit); the batch stops, resumable")
	fs.BoolVar(&f.asJSON, "json", false, "print one JSON event per finished item, then a summary, on stdout")
	fs.BoolVar(&f.auto, "auto", false, "accept every confirmation and answer every ask with its default")
	fs.IntVar(&f.maxLoops, "max-loops", 0, "cap every loop at `N` iterations")
	f.storePath = storeFlag(fs)
	f.models.register(fs)
}

func batchRunCmd(ctx context.Context, args []string, stdin io.Reader, stdout, stderr io.Writer) int {
	fs := newFlagSet("batch", "flowrun batch PIPELINE --dataset D [flags]\n       flowrun batch resume BATCH [--retry-failed]\n\nRuns the pipeline once per dataset item (a durable run each) and scores\nevery item with the pipeline's score: section and --score. --label names the\nbatch for the views and comparisons (flowrun batch label BATCH TEXT renames it). Exit 0 when\nevery item has its result, 1 when the batch stopped, 2 on bad usage.")
	var bf batchFlags
	bf.register(fs)
	dataset := fs.String("dataset", "", "the items: a `path` to a .jsonl, .csv, .json or .yaml list, or a directory of .json files")
	var maps, scores inputFlags
	fs.Var(&maps, "map", "give input `INPUT=FIELD` the item's field FIELD (repeatable)")
	fs.Var(&scores, "score", "a metric `NAME=EXPR` over outputs, item and run (repeatable); replaces score: entries of the same name")
	limit := fs.Int("limit", 0, "run only the first `N` items (after --filter and --sample)")
	sample := fs.Int("sample", 0, "run a random sample of `N` items (deterministic: see --seed)")
	seed := fs.Uint64("seed", 0, "the sample's `seed`")
	filter := fs.String("filter", "", "run only the items for which this expr-lang `condition` over item holds, e.g. 'item.level == \"easy\"'")
	natsURL := fs.String("nats", "", "run the items on flowrun workers through the NATS JetStream server at `URL` (see docs/scale-out.md)")
	label := fs.String("label", "", "call the batch `TEXT` (\"shorter prompt\"): batches, batch show, compare, the report and the web UI show it")
	description := fs.String("description", "", "say in a `sentence` what the batch tries; shown with its label")
	repeat := fs.Int("repeat", 1, "run each item `N` times (distinct runs): batch show gives pass@N, pass^N and flaky items")
	var gate batchGate
	gate.register(fs)
	var seq untilDecidedFlags
	seq.register(fs)
	var sweeps inputFlags
	fs.Var(&sweeps, "sweep", "run one batch per value: `model.NAME=M1,M2` overrides model NAME as --model does (repeatable: every combination); with several PIPELINE files, one batch per file")
	planOnly := fs.Bool("plan", false, "print the most the batch can call and cost (every item's run × --repeat, per --sweep variant) against --max-cost-usd, and exit without running")
	replicas := natsReplicasFlag(fs)
	var nf natsFlags
	nf.register(fs, false)
	files, code, ok := parseFlags(fs, args, stdout, stderr)
	if !ok {
		return code
	}
	if len(files) == 0 || *dataset == "" {
		fmt.Fprintln(stderr, "flowrun batch: name a pipeline and a dataset: flowrun batch PIPELINE --dataset D (see flowrun batch --help)")
		return exitInvalid
	}
	if !gate.valid(stderr) {
		return exitInvalid
	}
	switch {
	case *repeat < 1:
		fmt.Fprintf(stderr, "flowrun batch: --repeat %d: give a number of runs per item, 1 or more\n", *repeat)
		return exitInvalid
	case *repeat > 1 && *natsURL != "":
		fmt.Fprintln(stderr, "flowrun batch: --repeat runs in this process only: drop --nats or --repeat")
		return exitInvalid
	case *repeat > 1 && seq.until:
		// The sequential test pairs items, and an item's repeats are not
		// independent items: counting each would overstate the evidence.
		fmt.Fprintln(stderr, "flowrun batch: --until-decided pairs each item once: drop --repeat")
		return exitInvalid
	}
	if *planOnly {
		return batchPlan(batchPlanArgs{files: files, sweeps: sweeps, dataset: *dataset, maps: maps, repeat: *repeat, bf: &bf,
			selection: batch.Selection{Filter: *filter, Sample: *sample, Seed: *seed, Limit: *limit}}, stdout, stderr)
	}
	baseModels := bf.models.models
	// abort says why a batch could not run and is its exit code.
	abort := func(code int, err error) (*store.Batch, int) {
		fmt.Fprintf(stderr, "flowrun batch: %v\n", err)
		return nil, code
	}
	runOne := func(file string, models []string) (*store.Batch, int) {
		bf.models.models = append(append(inputFlags(nil), baseModels...), models...)
		p := loadPipeline(file, stderr)
		if p == nil {
			return nil, exitInvalid
		}
		mapping, err := batch.ParseMap(p, maps)
		if err != nil {
			return abort(exitInvalid, err)
		}
		scorer, code := batchScorer(p, scores, stderr)
		if scorer == nil {
			return nil, code
		}
		d, items, err := batch.ReadSelected(*dataset, batch.Selection{Filter: *filter, Sample: *sample, Seed: *seed, Limit: *limit})
		if err != nil {
			return abort(exitInvalid, err)
		}
		bf.remote = *natsURL != ""
		var o cluster.Options
		if *natsURL != "" {
			if o, err = nf.options(*natsURL, false); err != nil {
				return abort(exitInvalid, err)
			}
			o.Replicas = *replicas
		}
		if bf.models.replay == "" && !bf.remote {
			if c := batch.OfflineCassette(*dataset, p, bf.models.models, os.LookupEnv); c != "" {
				bf.models.replay = c
				fmt.Fprintf(stderr, "no OPENAI_API_KEY or OPENAI_BASE_URL: replaying %s (offline)\n", c)
			}
		}
		settings := batch.Settings{Concurrency: bf.concurrency, MaxCostUSD: bf.maxCost, MaxLoops: bf.maxLoops, Auto: bf.auto,
			Repeat: *repeat, Limit: *limit, Sample: *sample, Seed: *seed, Filter: *filter, Map: mapping,
			Metrics: scorer.Names(), Primary: scorer.Primary, Expected: scorer.ItemFields(), Expects: scorer.Expectations(), Score: scores,
			Model: bf.models.models, Replay: absOrEmpty(bf.models.replay), DatasetAbs: absOrEmpty(*dataset)}
		st, err := store.Open(*bf.storePath)
		if err != nil {
			return abort(exitFailed, err)
		}
		defer st.Close()
		r, finish, code := batchRunner(p, settings, &bf, st, stderr)
		if r == nil {
			return nil, code
		}
		defer finish()
		r.Scorer = scorer
		if !seq.setup(ctx, st, r, *seed, given(fs, "seed"), stderr) {
			return nil, exitInvalid
		}
		view := newBatchView(r.Scorer, bf.asJSON, stdout, stderr)
		r.Progress = view.item
		b := batch.NewRecord(p, d)
		b.Label, b.Description = *label, *description
		created := view.start
		var followErr error
		if *natsURL != "" {
			window := 0
			if given(fs, "concurrency") {
				window = bf.concurrency
			}
			settings.Concurrency, settings.NATS = window, cluster.DisplayURL(*natsURL)
			co, err := remoteBatch(ctx, r, o, len(items), window, bf.auto, stderr)
			if err != nil {
				return abort(exitFailed, err)
			}
			defer co.Close()
			nf.record(&settings)
			created = func(b *store.Batch) {
				view.start(b)
				followErr = co.Follow(ctx, b.ID)
			}
		}
		if err := batch.SetSettings(b, settings); err != nil {
			return abort(exitFailed, err)
		}
		if err := errors.Join(r.Create(ctx, b, items, created), followErr); err != nil {
			return abort(exitFailed, err)
		}
		status, reason, err := r.Run(ctx, b, items)
		code = seq.report(ctx, st, b, batchEnded(ctx, "flowrun batch", r, b, view, status, reason, err), stderr)
		return b, gate.check(ctx, st, b, code, stderr)
	}
	if len(files) == 1 && len(sweeps) == 0 {
		_, code := runOne(files[0], nil)
		return code
	}
	if seq.until {
		fmt.Fprintln(stderr, "flowrun batch: --until-decided runs one batch: drop --sweep or the extra pipelines")
		return exitInvalid
	}
	return batchSweep(ctx, files, sweeps, *bf.storePath, bf.asJSON, runOne, stdout, stderr)
}

// remoteBatch makes r run its items on flowrun workers through the NATS
// server o names (see cluster.DriveBatch).
func remoteBatch(ctx context.Context, r *batch.Runner, o cluster.Options, items, window int, auto bool, log io.Writer) (*cluster.Coordinator, error) {
	if o.Insecure {
		fmt.Fprintln(log, "flowrun batch: warning: --nats-insecure: jobs go out unsigned, and results, events and costs are accepted from anyone who can publish on the server")
	}
	co, err := cluster.DriveBatch(ctx, r, o, items, window, auto, log)
	return co, clusterHint(err)
}

func absOrEmpty(path string) string {
	if path == "" {
		return ""
	}
	abs, _ := filepath.Abs(path)
	return abs
}

// batchScorer builds the metrics: the pipeline's score: with --score
// NAME=EXPR merged in.
func batchScorer(p *dsl.Pipeline, scores []string, stderr io.Writer) (*batch.Scorer, int) {
	scorer, err := batch.ParseScorer(p, scores)
	var bad *dsl.LoadError
	switch {
	case errors.As(err, &bad):
		fmt.Fprintln(stderr, diagnosticsText(bad.Diagnostics))
		return nil, exitInvalid
	case err != nil:
		fmt.Fprintf(stderr, "flowrun batch: %v\n", err)
		return nil, exitInvalid
	}
	return scorer, exitOK
}

// batchRunner builds one model client for every run of the batch, so
// that its rate limits hold batch-wide, and a runner on st that runs the
// items as s says.
func batchRunner(p *dsl.Pipeline, s batch.Settings, bf *batchFlags, st *store.Store, stderr io.Writer) (*batch.Runner, func(), int) {
	if s.MaxCostUSD > 0 || p.Limits.MaxCostUSD > 0 {
		warnUnpriced(stderr, "flowrun batch", p, s.Model)
	}
	o := bf.models.options("", stderr)
	o.Store, o.NoEndpoint = st, bf.remote
	eng, err := engine.New(o)
	var sh *engine.Shared
	if err == nil {
		sh, err = eng.Share(p, nil, nil)
	}
	if err != nil {
		return nil, nil, fail(stderr, "flowrun batch", err)
	}
	r := batch.NewRunner(st, p, sh, s)
	r.RemoteSink = sh.Sink
	return r, func() { sh.Close(); eng.Close() }, exitOK
}

// batchEnded prints how a batch's run ended (cmd names the command for
// an error) and returns the exit code.
func batchEnded(ctx context.Context, cmd string, r *batch.Runner, b *store.Batch, view *batchView, status runtime.Status, reason string, err error) int {
	view.end()
	if err != nil {
		fmt.Fprintf(view.stderr, "%s: %v\n", cmd, err)
		return exitFailed
	}
	rows, err := r.Store.BatchItems(context.WithoutCancel(ctx), b.ID)
	if err != nil {
		fmt.Fprintf(view.stderr, "%s: %v\n", cmd, err)
		return exitFailed
	}
	view.summary(status, reason, rows)
	if status != runtime.StatusCompleted {
		return exitFailed
	}
	return exitOK
}

func batchResumeCmd(ctx context.Context, args []string, stdin io.Reader, stdout, stderr io.Writer) int {
	fs := newFlagSet("batch resume", "flowrun batch resume BATCH [--retry-failed] [flags]\n\nContinues a batch (an id, a prefix of one, or last): items with a result\nare kept, started runs resume from their checkpoints, pending items start.\nFlags given here replace those the batch started with.")
	var bf batchFlags
	bf.register(fs)
	retry := fs.Bool("retry-failed", false, "also run the failed items again, each resuming its run (the failed node runs again)")
	allowChanged := fs.Bool("allow-changed", false, "resume even if the pipeline changed since the batch started")
	natsURL := fs.String("nats", "", "run the items on flowrun workers through the NATS server at `URL` (default: the one the batch ran with, if any)")
	var nf natsFlags
	nf.register(fs, false)
	ids, code, ok := parseFlags(fs, args, stdout, stderr)
	if !ok {
		return code
	}
	if len(ids) != 1 {
		fmt.Fprintln(stderr, "flowrun batch resume: name one batch (an id, a prefix, or last)")
		return exitInvalid
	}
	o := batch.ResumeOptions{RetryFailed: *retry, AllowChanged: *allowChanged, Overrides: batch.Overrides{
		Concurrency: ifGiven(fs, "concurrency", &bf.concurrency), MaxCostUSD: ifGiven(fs, "max-cost-usd", &bf.maxCost),
		MaxLoops: ifGiven(fs, "max-loops", &bf.maxLoops), Auto: ifGiven(fs, "auto", &bf.auto),
		Model: ifGiven(fs, "model", (*[]string)(&bf.models.models)), Replay: ifGiven(fs, "replay", &bf.models.replay),
		NATS: ifGiven(fs, "nats", natsURL), NATSCreds: ifGiven(fs, "nats-creds", &nf.Creds), NATSCA: ifGiven(fs, "nats-ca", &nf.CA),
		NATSSign: ifGiven(fs, "nats-sign", &nf.Sign), NATSTrustWorker: ifGiven(fs, "nats-trust-worker", &nf.TrustWorker),
		NATSInsecure: ifGiven(fs, "nats-insecure", &nf.Insecure)}}
	st, err := store.Open(*bf.storePath)
	if err != nil {
		fmt.Fprintf(stderr, "flowrun batch resume: %v\n", err)
		return exitFailed
	}
	defer st.Close()
	res, err := batch.PrepareResume(ctx, st, ids[0], o)
	if err != nil {
		fmt.Fprintf(stderr, "flowrun batch resume: %s\n", explain(err))
		return exitInvalid
	}
	s := res.Settings
	nf.use(s)
	var co cluster.Options
	if s.NATS != "" {
		if co, err = nf.options(s.NATS, false); err != nil {
			fmt.Fprintf(stderr, "flowrun batch resume: %v\n", err)
			return exitInvalid
		}
	}
	bf.models.replay, bf.models.models, bf.remote = s.Replay, s.Model, s.NATS != ""
	r, finish, code := batchRunner(res.Pipeline, s, &bf, st, stderr)
	if r == nil {
		return code
	}
	defer finish()
	view := newBatchView(res.Scorer, bf.asJSON, stdout, stderr)
	r.Progress = view.item
	var coord *cluster.Coordinator
	defer func() {
		if coord != nil {
			coord.Close()
		}
	}()
	status, reason, err := r.Resume(ctx, res, func() error {
		if s.NATS != "" {
			c, err := remoteBatch(ctx, r, co, len(res.Rows), res.Window, s.Auto, stderr)
			if err != nil {
				return err
			}
			coord = c
			if err := c.Follow(ctx, res.Batch.ID); err != nil {
				return err
			}
		}
		view.start(res.Batch)
		return nil
	})
	var busy *store.InProgressError
	if errors.As(err, &busy) {
		fmt.Fprintf(stderr, "flowrun batch resume: batch %s is running in process %d\n", res.Batch.ID, busy.PID)
		return exitFailed
	}
	return batchEnded(ctx, "flowrun batch resume", r, res.Batch, view, status, reason, err)
}

// given says whether flag name was given on the command line.
func given(fs *flag.FlagSet, name string) bool {
	found := false
	fs.Visit(func(f *flag.Flag) { found = found || f.Name == name })
	return found
}

// ifGiven is v when the flag name was given on the command line, else nil.
func ifGiven[T any](fs *flag.FlagSet, name string, v *T) *T {
	if !given(fs, name) {
		return nil
	}
	return v
}

// batchView shows a batch's progress: on a terminal one live line, redrawn,
// with each failure printed above it; elsewhere one plain line per item;
// with --json one JSON event per item on stdout.
type batchView struct {
	b      *store.Batch
	scorer *batch.Scorer
	asJSON bool
	stdout io.Writer
	stderr io.Writer
	term   *os.File // the terminal for the live line; nil when none

	mu   sync.Mutex
	drew bool
}

func newBatchView(scorer *batch.Scorer, asJSON bool, stdout, stderr io.Writer) *batchView {
	v := &batchView{scorer: scorer, asJSON: asJSON, stdout: stdout, stderr: stderr}
	if f, ok := termview.FileOf(stderr); ok && !asJSON && termview.IsTerminal(f) {
		v.term = f
	}
	return v
}

// start announces the batch, once it has its id.
func (v *batchView) start(b *store.Batch) {
	v.b = b
	if !v.asJSON {
		fmt.Fprintf(v.stderr, "batch %s: %s over %s\n", v.b.ID, v.b.Pipeline, v.b.Dataset)
	}
}

func (v *batchView) item(p batch.Progress) {
	v.mu.Lock()
	defer v.mu.Unlock()
	switch {
	case v.asJSON:
		writeEvent(v.stdout, batch.NewItemEvent(v.b.ID, p))
		return
	case v.term == nil:
		batchtext.WriteItem(v.stderr, p, v.scorer)
		return
	case batchtext.ItemFailed(p.Item):
		v.clearLine()
		batchtext.WriteFailure(v.stderr, p)
	}
	fmt.Fprint(v.term, "\r\x1b[K"+termview.Printable(batchtext.ProgressLine(p, v.scorer.Primary, time.Since(p.Started))))
	v.drew = true
}

// clearLine removes the live line so that a message can take its place.
func (v *batchView) clearLine() {
	if v.drew {
		fmt.Fprint(v.term, "\r\x1b[K")
		v.drew = false
	}
}

func (v *batchView) end() {
	v.mu.Lock()
	defer v.mu.Unlock()
	if v.term != nil && v.drew {
		fmt.Fprintln(v.term)
		v.drew = false
	}
}

// summary prints the batch's totals (the figures batch show gives):
// stderr for people, or a last JSON line on stdout.
func (v *batchView) summary(status runtime.Status, reason string, rows []*store.BatchItem) {
	s := batch.Ended(v.b, status, reason, rows)
	if v.asJSON {
		writeEvent(v.stdout, batch.NewFinishedEvent(s))
		return
	}
	batchtext.WriteEnded(v.stderr, s)
	if reason == "" {
		return
	}
	fmt.Fprintf(v.stderr, "stopped: %s\n", reason)
	if s.Items.Waiting > 0 {
		fmt.Fprintf(v.stderr, "To answer: flowrun resume RUN --answer ... for each waiting run, or resume the batch with --auto: flowrun batch resume %s --auto\n", v.b.ID)
	}
	if batch.StoppedByCap(reason) {
		fmt.Fprintf(v.stderr, "To continue: flowrun batch resume %s --max-cost-usd USD (a higher cap, or 0 for none)\n", v.b.ID)
		return
	}
	fmt.Fprintf(v.stderr, "To continue: flowrun batch resume %s\n", v.b.ID)
}

// writeEvent prints one JSON line (see termview.JSON).
func writeEvent(w io.Writer, v any) {
	b, err := jsonvalue.Marshal(v)
	if err != nil {
		return
	}
	_, _ = w.Write(append(termview.JSON(b), '\n'))
}
