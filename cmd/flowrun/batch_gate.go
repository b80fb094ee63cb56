package main

import (
	"context"
	"flag"
	"fmt"
	"io"
	"math/rand/v2"

	"github.com/flowrun/flowrun/batch"
	"github.com/flowrun/flowrun/batch/batchtext"
	"github.com/flowrun/flowrun/engine"
	"github.com/flowrun/flowrun/store"
)

// batchGate is flowrun batch's CI gate: --fail-under and --junit, read
// once the batch has ended.
type batchGate struct {
	batch.Gate
}

func (g *batchGate) register(fs *flag.FlagSet) {
	fs.Float64Var(&g.FailUnder, "fail-under", -1, "exit 1 when the primary pass rate is below `RATE` (0-1)")
	fs.StringVar(&g.JUnit, "junit", "", "write a JUnit XML report to `FILE`: one test case per item (per run with --repeat)")
}

func (g *batchGate) valid(stderr io.Writer) bool {
	if g.FailUnder > 1 {
		fmt.Fprintf(stderr, "flowrun batch: --fail-under %g: give a rate from 0 to 1, e.g. 0.8\n", g.FailUnder)
		return false
	}
	return true
}

// check applies the gate to batch b once it has ended with code; it
// returns the exit code.
func (g *batchGate) check(ctx context.Context, st *store.Store, b *store.Batch, code int, stderr io.Writer) int {
	res, err := g.Apply(ctx, st, b.ID, code == exitOK)
	if err != nil {
		return fail(stderr, "flowrun batch", err)
	}
	if res.JUnit != "" {
		fmt.Fprintf(stderr, "wrote %s\n", res.JUnit)
	}
	if res.Failed != nil {
		return fail(stderr, "flowrun batch: --fail-under", res.Failed)
	}
	return code
}

// compareGate is flowrun batch compare's CI gate.
type compareGate struct {
	batch.RegressionGate
}

func (g *compareGate) register(fs *flag.FlagSet) {
	fs.BoolVar(&g.FailOnRegression, "fail-on-regression", false, "exit 1 when B is significantly worse than A (McNemar mid-p below --alpha)")
	fs.Float64Var(&g.Alpha, "alpha", 0.05, "the significance `level` of --fail-on-regression")
	fs.IntVar(&g.MaxBroken, "max-broken", -1, "exit 1 when more than `N` items broke")
}

// untilDecidedFlags are flowrun batch's sequential comparison: run items
// in a random order against batch --compare-to until the test decides.
type untilDecidedFlags struct {
	compareTo string
	until     bool
	alpha     float64
	u         *batch.UntilDecided
}

func (f *untilDecidedFlags) register(fs *flag.FlagSet) {
	fs.StringVar(&f.compareTo, "compare-to", "", "the baseline `batch` A of --until-decided")
	fs.BoolVar(&f.until, "until-decided", false, "run the items in a random order and stop as soon as the sequential test against --compare-to decides (see docs/batch.md)")
	fs.Float64Var(&f.alpha, "alpha", 0.05, "the error `rate` of --until-decided: the chance of declaring a difference that is not there")
}

// setup makes r stop once the test against the baseline decides, running
// the items in an order drawn from seed (or a fresh seed, printed, when
// seeded is false). It returns false, having said why, on bad usage.
func (f *untilDecidedFlags) setup(ctx context.Context, st *store.Store, r *batch.Runner, seed uint64, seeded bool, stderr io.Writer) bool {
	if f.compareTo == "" && !f.until {
		return true
	}
	if f.compareTo == "" || !f.until {
		fmt.Fprintln(stderr, "flowrun batch: --until-decided and --compare-to go together: flowrun batch P --dataset D --compare-to A --until-decided")
		return false
	}
	a, err := st.FindBatch(ctx, f.compareTo)
	if err != nil {
		fmt.Fprintf(stderr, "flowrun batch: --compare-to: %s\n", explain(err))
		return false
	}
	if f.u, err = batch.NewUntilDecided(ctx, st, a, f.alpha); err != nil {
		fmt.Fprintf(stderr, "flowrun batch: --until-decided: %v\n", err)
		return false
	}
	if !seeded {
		seed = rand.Uint64()
	}
	r.Shuffle, r.OrderSeed, r.Decide = true, seed, f.u.Observe
	fmt.Fprintf(stderr, "items in a random order, seed %d (--seed %d repeats it); stopping once decided against batch %s at alpha %g\n", seed, seed, a.ID, f.alpha)
	return true
}

// report prints what the sequential test decided and what stopping
// saved; a batch stopped because the test decided exits 0.
func (f *untilDecidedFlags) report(ctx context.Context, st *store.Store, b *store.Batch, code int, stderr io.Writer) int {
	if f.u == nil {
		return code
	}
	o, err := f.u.Outcome(ctx, st, b)
	if err != nil {
		return fail(stderr, "flowrun batch", err)
	}
	batchtext.WriteSequential(stderr, o)
	if o.DecidedAfter == 0 {
		return code
	}
	return exitOK
}

// pairwiseFlags are flowrun batch compare's pairwise judge.
type pairwiseFlags struct {
	model, rubric string
	seed          uint64
	maxCostUSD    float64
}

func (f *pairwiseFlags) register(fs *flag.FlagSet) {
	fs.StringVar(&f.model, "judge", "", "ask `MODEL` (e.g. gpt-4.1, at OPENAI_BASE_URL) which of A's and B's outputs is better, item by item, shown in a random order")
	fs.StringVar(&f.rubric, "rubric", "", "what the --judge is to prefer (default: more correct, then more complete and clearer)")
	fs.Uint64Var(&f.seed, "seed", 25, "the `seed` of the order --judge shows the outputs in")
	fs.Float64Var(&f.maxCostUSD, "max-cost-usd", 0, "stop the --judge before a call that could take its spend past `USD` (0: no cap)")
}

// judge runs the pairwise judge over c when --judge was given; nil
// otherwise. Its runs are recorded in the store st reads, which compare
// opens to read only.
func (f *pairwiseFlags) judge(ctx context.Context, st *store.Store, c *batch.Comparison, stderr io.Writer) (*batch.Pairwise, error) {
	if f.model == "" {
		return nil, nil
	}
	eng, err := engine.New(engine.Options{StorePath: st.Path(), Notices: stderr})
	if err != nil {
		return nil, err
	}
	defer eng.Close()
	j := &batch.PairwiseJudge{Engine: eng, Model: f.model, Rubric: f.rubric, Seed: f.seed, MaxCostUSD: f.maxCostUSD}
	return j.Judge(ctx, st, c)
}
