package main

import (
	"context"
	"flag"
	"fmt"
	"io"
	"math"
	"math/rand/v2"
	"os"
	"sort"
	"strings"

	"github.com/flowrun/flowrun/batch"
	"github.com/flowrun/flowrun/figures"
	"github.com/flowrun/flowrun/llm"
	"github.com/flowrun/flowrun/store"
)

// batchGate is flowrun batch's CI gate: --fail-under and --junit, read
// once the batch has ended.
type batchGate struct {
	failUnder float64
	junit     string
}

func (g *batchGate) register(fs *flag.FlagSet) {
	fs.Float64Var(&g.failUnder, "fail-under", -1, "exit 1 when the primary pass rate is below `RATE` (0-1)")
	fs.StringVar(&g.junit, "junit", "", "write a JUnit XML report to `FILE`: one test case per item (per run with --repeat)")
}

func (g *batchGate) valid(stderr io.Writer) bool {
	if g.failUnder > 1 {
		fmt.Fprintf(stderr, "flowrun batch: --fail-under %g: give a rate from 0 to 1, e.g. 0.8\n", g.failUnder)
		return false
	}
	return true
}

// check writes the JUnit report and applies --fail-under to batch b once
// it has ended with code; it returns the exit code.
func (g *batchGate) check(ctx context.Context, st *store.Store, b *store.Batch, code int, stderr io.Writer) int {
	if g.junit == "" && g.failUnder < 0 {
		return code
	}
	recorded, err := st.Batch(ctx, b.ID)
	if err != nil {
		return fail(stderr, "flowrun batch", err)
	}
	s, err := batch.Summarize(ctx, st, recorded)
	if err != nil {
		return fail(stderr, "flowrun batch", err)
	}
	if g.junit != "" {
		if err := writeJUnitFile(g.junit, s); err != nil {
			return fail(stderr, "flowrun batch", err)
		}
		fmt.Fprintf(stderr, "wrote %s\n", g.junit)
	}
	if g.failUnder >= 0 && code == exitOK {
		if err := batch.CheckPassRate(s, g.failUnder); err != nil {
			return fail(stderr, "flowrun batch: --fail-under", err)
		}
	}
	return code
}

func writeJUnitFile(path string, s *batch.Summary) error {
	f, err := os.Create(path)
	if err != nil {
		return fmt.Errorf("writing %s: %w", path, err)
	}
	if err := batch.WriteJUnit(f, s); err != nil {
		f.Close()
		return err
	}
	if err := f.Close(); err != nil {
		return fmt.Errorf("writing %s: %w", path, err)
	}
	return nil
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

// printRepeats prints, for a batch whose items ran several times, each
// item's pass@N and pass^N with its class, and each metric's spread.
func printRepeats(w io.Writer, r *batch.RepeatSummary) {
	if r == nil {
		return
	}
	fmt.Fprintf(w, "\nrepeats    %d items: %d always pass, %d always fail, %d flaky\n", len(r.Items), r.AlwaysPass, r.AlwaysFail, r.Flaky)
	fmt.Fprintf(w, "  pass@N   %s\n  pass^N   %s\n", rateText(&r.PassAt), rateText(&r.PassAll))
	names := make([]string, 0, len(r.Metrics))
	for n := range r.Metrics {
		names = append(names, n)
	}
	sort.Strings(names)
	for _, n := range names {
		m := r.Metrics[n]
		fmt.Fprintf(w, "  %-8s mean %.4g, sd %.4g across items, sd %.4g within an item\n", n, m.Mean, m.SD, r.Within[n])
	}
	for _, it := range r.Items {
		fmt.Fprintf(w, "  %-30s %d/%d passed  pass@%d %-5t pass^%d %-5t %s\n", it.Key, it.Passed, it.Runs, it.Runs, it.PassAt, it.Runs, it.PassAll, it.Class)
	}
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
	t := o.Test
	if o.DecidedAfter == 0 {
		fmt.Fprintf(stderr, "sequential test: not decided after %d matched items (%d fixed, %d broken): no difference shown at alpha %g\n", o.Matched, t.Fixed, t.Broken, o.Alpha)
		return code
	}
	fmt.Fprintf(stderr, "sequential test: %s than batch %s after %d items (%d fixed, %d broken; likelihood ratio %.3g >= %.3g)\n",
		t.Decision, o.Baseline, o.DecidedAfter, t.Fixed, t.Broken, math.Exp(t.LogLR), 1/o.Alpha)
	fmt.Fprintf(stderr, "saved: %d of %d items not run, about %s\n", o.ItemsSaved, o.ItemsRun+o.ItemsSaved, figures.USD(o.CostSavedUSD))
	return exitOK
}

// pairwiseFlags are flowrun batch compare's pairwise judge.
type pairwiseFlags struct {
	model, rubric string
	seed          uint64
}

func (f *pairwiseFlags) register(fs *flag.FlagSet) {
	fs.StringVar(&f.model, "judge", "", "ask `MODEL` (e.g. gpt-4.1, at OPENAI_BASE_URL) which of A's and B's outputs is better, item by item, shown in a random order")
	fs.StringVar(&f.rubric, "rubric", "", "what the --judge is to prefer (default: more correct, then more complete and clearer)")
	fs.Uint64Var(&f.seed, "seed", 25, "the `seed` of the order --judge shows the outputs in")
}

// judge runs the pairwise judge over c when --judge was given; nil
// otherwise.
func (f *pairwiseFlags) judge(ctx context.Context, st *store.Store, c *batch.Comparison) (*batch.Pairwise, error) {
	if f.model == "" {
		return nil, nil
	}
	j := &batch.PairwiseJudge{Client: llm.New(llm.Options{}), Model: f.model, Rubric: f.rubric, Seed: f.seed}
	return j.Judge(ctx, st, c)
}

func printPairwise(w io.Writer, p *batch.Pairwise) {
	if p == nil {
		return
	}
	verdict := "no clear winner"
	if p.Better != "" {
		verdict = strings.ToUpper(p.Better) + " is better"
	}
	fmt.Fprintf(w, "\njudge %s (order drawn from seed %d): A %d, B %d, tie %d; sign test p = %.4g: %s; %s\n",
		p.Model, p.Seed, p.WinsA, p.WinsB, p.Ties, p.PValue, verdict, figures.USD(p.CostUSD))
	for _, v := range p.Items {
		first := "A"
		if v.BFirst {
			first = "B"
		}
		fmt.Fprintf(w, "  %-24s %-4s (%s shown first) %s\n", v.Key, strings.ToUpper(v.Winner), first, clip(firstLine(v.Reasoning), 80))
	}
	if len(p.Skipped) > 0 {
		fmt.Fprintf(w, "  not judged (not completed in both): %s\n", strings.Join(p.Skipped, ", "))
	}
}
