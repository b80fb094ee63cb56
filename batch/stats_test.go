package batch

import (
	"math"
	"math/rand/v2"
	"sort"
	"testing"
)

// binomialHalf is P(X = x) for X ~ Binomial(n, 1/2), computed through
// lgamma: independent of the big-integer sums under test.
func binomialHalf(n, x int) float64 {
	ln, _ := math.Lgamma(float64(n + 1))
	lx, _ := math.Lgamma(float64(x + 1))
	lnx, _ := math.Lgamma(float64(n - x + 1))
	return math.Exp(ln - lx - lnx - float64(n)*math.Ln2)
}

// TestMcNemarMidP checks the mid-p value against Fagerland, Lydersen and
// Laake's (2013) worked example (1 and 7 discordant pairs: exact 0.070,
// mid-p 0.039) and against its definition summed term by term:
// 2·(P(X < k) + P(X = k)/2), k the smaller count.
func TestMcNemarMidP(t *testing.T) {
	if got := McNemarMidP(1, 7); !near(got, 10.0/256) || !near(McNemar(1, 7), 18.0/256) {
		t.Errorf("1 vs 7: mid-p %.6f (want 10/256 = 0.0391), exact %.6f", got, McNemar(1, 7))
	}
	for _, c := range [][2]int{{8, 2}, {2, 8}, {0, 6}, {3, 1}, {20, 5}, {12, 11}, {0, 1}, {40, 25}} {
		n, k := c[0]+c[1], min(c[0], c[1])
		want := binomialHalf(n, k)
		for x := range k {
			want += 2 * binomialHalf(n, x)
		}
		if got := McNemarMidP(c[0], c[1]); math.Abs(got-min(1, want)) > 1e-12 {
			t.Errorf("McNemarMidP(%d, %d) = %.12g, want %.12g", c[0], c[1], got, want)
		}
		if McNemarMidP(c[0], c[1]) > McNemar(c[0], c[1]) {
			t.Errorf("mid-p of %v above the exact p", c)
		}
	}
	if McNemarMidP(0, 0) != 1 || McNemarMidP(4, 4) != 1 {
		t.Error("no discordant pairs, or an even split, must give 1")
	}
}

// TestPairedBootstrap checks the resampled interval against the exact
// bootstrap distribution, enumerated over all 5^5 equally likely resamples
// of five pairs, and that a seed fixes the interval.
func TestPairedBootstrap(t *testing.T) {
	a := []float64{1, 0, 0.3, 2, 0.5}
	b := []float64{1.1, 0.7, 0.1, 3.3, 0.6} // differences 0.1 0.7 -0.2 1.3 0.1
	d := make([]float64, len(a))
	for i := range a {
		d[i] = b[i] - a[i]
	}
	var exact []float64
	var walk func(depth int, sum float64)
	walk = func(depth int, sum float64) {
		if depth == len(d) {
			exact = append(exact, sum/float64(len(d)))
			return
		}
		for _, x := range d {
			walk(depth+1, sum+x)
		}
	}
	walk(0, 0)
	sort.Float64s(exact)
	got := PairedBootstrap(a, b, 40000, 7)
	if !near(got.Estimate, 0.4) {
		t.Errorf("estimate %v, want the mean difference 0.4", got.Estimate)
	}
	wantLow, wantHigh := Percentile(exact, 2.5), Percentile(exact, 97.5)
	if math.Abs(got.Low-wantLow) > 0.03 || math.Abs(got.High-wantHigh) > 0.03 {
		t.Errorf("interval [%.4f, %.4f], exact bootstrap [%.4f, %.4f]", got.Low, got.High, wantLow, wantHigh)
	}
	if again := PairedBootstrap(a, b, 40000, 7); again != got {
		t.Errorf("same seed gave %v then %v", got, again)
	}
	if (PairedBootstrap(nil, nil, 100, 1) != Interval{}) {
		t.Error("no pairs must give an empty interval")
	}
	// Equal sides: every resample's difference is 0.
	if z := PairedBootstrap(a, a, 1000, 1); z != (Interval{}) {
		t.Errorf("identical sides gave %v", z)
	}
}

// TestItemsForPower checks Connor's formula against a value worked by
// hand and, by simulation with a fixed seed, that the number it gives
// detects the change about 80% of the time with McNemar's z test.
func TestItemsForPower(t *testing.T) {
	// ψ = 0.2, δ = 0.1: (1.95996·√0.2 + 0.84162·√0.19)² / 0.01 = 154.6.
	if n := ItemsForPower(0.15, 0.05, 0.05, 0.8); n != 155 {
		t.Errorf("ItemsForPower(0.15, 0.05) = %d, want 155", n)
	}
	if ItemsForPower(0.1, 0.1, 0.05, 0.8) != 0 || ItemsForPower(0, 0, 0.05, 0.8) != 0 {
		t.Error("no difference must need 0 (no number of) items")
	}
	for _, c := range []struct{ fixed, broken float64 }{{0.15, 0.05}, {0.3, 0.1}, {0.05, 0.2}} {
		n := ItemsForPower(c.fixed, c.broken, 0.05, 0.8)
		rng := rand.New(rand.NewPCG(1, 2))
		const trials = 4000
		detected := 0
		for range trials {
			f, b := 0, 0
			for range n {
				switch u := rng.Float64(); {
				case u < c.fixed:
					f++
				case u < c.fixed+c.broken:
					b++
				}
			}
			if f+b > 0 && math.Abs(float64(f-b))/math.Sqrt(float64(f+b)) > 1.959964 {
				detected++
			}
		}
		if power := float64(detected) / trials; power < 0.76 || power > 0.85 {
			t.Errorf("fixed %.2f broken %.2f: %d items detected it %.3f of the time, want about 0.80", c.fixed, c.broken, n, power)
		}
	}
}

// TestSequentialCompareValues checks the mixture likelihood ratio against
// its integral ∫ p^f (1-p)^b dp · 2^(f+b), computed numerically.
func TestSequentialCompareValues(t *testing.T) {
	integral := func(f, b int) float64 {
		const steps = 200000
		sum := 0.0
		for i := range steps {
			p := (float64(i) + 0.5) / steps
			sum += math.Pow(p, float64(f)) * math.Pow(1-p, float64(b))
		}
		return sum / steps * math.Pow(2, float64(f+b))
	}
	for _, c := range []struct {
		fixed, broken int
		want          Decision
	}{
		{10, 0, DecidedBetter}, // LR = 1024/11 = 93 ≥ 20
		{0, 10, DecidedWorse},
		{5, 0, Continue}, // LR = 32/6 = 5.3
		{8, 2, Continue},
		{30, 10, DecidedBetter},
		{10, 10, Continue},
	} {
		s := sequentialCounts(c.fixed, c.broken, 0.05)
		if lr := integral(c.fixed, c.broken); math.Abs(math.Exp(s.LogLR)-lr) > 1e-6*lr {
			t.Errorf("%d/%d: LR %g, integral %g", c.fixed, c.broken, math.Exp(s.LogLR), lr)
		}
		if s.Decision != c.want {
			t.Errorf("%d fixed, %d broken: %s, want %s", c.fixed, c.broken, s.Decision, c.want)
		}
	}
	pairs := []Pair{{Outcome: Fixed}, {Outcome: Same}, {Outcome: Broken}, {Outcome: Fixed}}
	if s := SequentialCompare(pairs, 0.05); s.Fixed != 2 || s.Broken != 1 || s.Decision != Continue {
		t.Errorf("from pairs: %+v", s)
	}
}

// TestSequentialCompareErrorRate simulates comparisons checked after every
// item: with no real change it must decide (wrongly) in under alpha of
// them, however long they run; with a real change it must decide, and
// almost never the wrong way.
func TestSequentialCompareErrorRate(t *testing.T) {
	const alpha, runs, maxPairs = 0.05, 2000, 1000
	simulate := func(pFixed float64, seed uint64) (better, worse int, meanStop float64) {
		rng := rand.New(rand.NewPCG(seed, seed+1))
		stops := 0
		for range runs {
			f, b := 0, 0
			for i := 1; i <= maxPairs; i++ {
				if rng.Float64() < pFixed {
					f++
				} else {
					b++
				}
				switch sequentialCounts(f, b, alpha).Decision {
				case DecidedBetter:
					better++
				case DecidedWorse:
					worse++
				default:
					continue
				}
				stops += i
				break
			}
		}
		return better, worse, float64(stops) / float64(better+worse)
	}
	better, worse, _ := simulate(0.5, 1)
	rate := float64(better+worse) / runs
	if rate > alpha {
		t.Errorf("no change: decided in %.3f of %d comparisons, want at most %.2f", rate, runs, alpha)
	}
	t.Logf("no change: decided (wrongly) in %.3f of %d comparisons of up to %d discordant items", rate, runs, maxPairs)
	better, worse, stop := simulate(0.7, 2)
	if float64(better)/runs < 0.95 || float64(worse)/runs > alpha {
		t.Errorf("B fixes 70%% of flips: better %d, worse %d of %d", better, worse, runs)
	}
	t.Logf("a 70/30 split is decided after %.0f discordant items on average", stop)
}

// TestPassAtK checks the pass@k and pass^k estimators against counting
// every k-subset of n runs of which c passed.
func TestPassAtK(t *testing.T) {
	for n := 1; n <= 7; n++ {
		for c := 0; c <= n; c++ {
			for k := 1; k <= n; k++ {
				subsets, anyPass, allPass := 0, 0, 0
				for mask := 0; mask < 1<<n; mask++ {
					if popcount(mask) != k {
						continue
					}
					subsets++
					passed := popcount(mask & (1<<c - 1)) // runs 0..c-1 passed
					if passed > 0 {
						anyPass++
					}
					if passed == k {
						allPass++
					}
				}
				gotAny, gotAll := PassAtK(n, c, k)
				if !near(gotAny, float64(anyPass)/float64(subsets)) || !near(gotAll, float64(allPass)/float64(subsets)) {
					t.Errorf("n=%d c=%d k=%d: pass@k %v pass^k %v, want %d/%d and %d/%d", n, c, k, gotAny, gotAll, anyPass, subsets, allPass, subsets)
				}
			}
		}
	}
}

func popcount(x int) int {
	n := 0
	for ; x > 0; x &= x - 1 {
		n++
	}
	return n
}

// TestSummarizeRepeats classifies three items run three times each and
// checks the metrics' means and spreads worked by hand.
func TestSummarizeRepeats(t *testing.T) {
	run := func(pass bool, cost float64) RepeatRun {
		return RepeatRun{Pass: pass, Scores: map[string]any{"exact": pass, "cost": cost, "note": "text"}}
	}
	s := SummarizeRepeats([]Repeats{
		{Key: "a", Runs: []RepeatRun{run(true, 1), run(true, 2), run(true, 3)}},
		{Key: "b", Runs: []RepeatRun{run(false, 1), run(false, 1), run(false, 1)}},
		{Key: "c", Runs: []RepeatRun{run(true, 2), run(false, 4), run(true, 6)}},
		{Key: "never ran"},
	})
	if len(s.Items) != 3 || s.AlwaysPass != 1 || s.AlwaysFail != 1 || s.Flaky != 1 {
		t.Fatalf("classes %+v", s)
	}
	classes := s.Items[0].Class + " " + s.Items[1].Class + " " + s.Items[2].Class
	if classes != "always-pass always-fail flaky" {
		t.Errorf("classes %s", classes)
	}
	if s.PassAt != Wilson(2, 3) || s.PassAll != Wilson(1, 3) {
		t.Errorf("pass@N %+v, pass^N %+v", s.PassAt, s.PassAll)
	}
	c := s.Items[2]
	if c.Passed != 2 || !c.PassAt || c.PassAll || !near(c.Metrics["cost"].Mean, 4) || !near(c.Metrics["cost"].SD, 2) || !near(c.Metrics["exact"].Mean, 2.0/3) {
		t.Errorf("item c %+v", c)
	}
	// Item means of cost are 2, 1, 4: mean 7/3, sd √(13/3)·... worked out:
	// deviations -1/3, -4/3, 5/3 -> squares sum 42/9, /2 = 7/3.
	if m := s.Metrics["cost"]; !near(m.Mean, 7.0/3) || !near(m.SD, math.Sqrt(7.0/3)) || m.N != 3 {
		t.Errorf("cost across items %+v", m)
	}
	if w := s.Within["cost"]; !near(w, (1+0+2)/3.0) {
		t.Errorf("within-item sd of cost %v, want 1", w)
	}
	if _, ok := s.Metrics["note"]; ok {
		t.Error("a text score has no mean")
	}
}

// TestCompareStatistics checks the fields Compare adds to its result on
// the fixture of TestCompareFixedBroken: 8 fixed and 2 broken of 13.
func TestCompareStatistics(t *testing.T) {
	c := compareFixedBroken(t)
	if !near(c.MidPValue, (112.0-45)/1024) { // 2·(1+10+45)/1024 - 45/1024
		t.Errorf("mid-p %v", c.MidPValue)
	}
	if c.ItemsForPower != 26 { // ψ = 10/13, δ = 6/13: 25.85 by hand
		t.Errorf("items for 80%% power %d, want 26", c.ItemsForPower)
	}
	// The normal approximation gives 6/13 ± 1.96·0.207 = [0.056, 0.867];
	// the bootstrap's ends are within a resampling step of it.
	if d := c.DeltaInterval; !near(d.Estimate, 6.0/13) || math.Abs(d.Low-0.056) > 0.1 || math.Abs(d.High-0.867) > 0.1 {
		t.Errorf("pass-rate change %+v, want 6/13 in about [0.056, 0.867]", d)
	}
	changes := map[string]MetricChange{}
	for _, m := range c.MetricChanges {
		changes[m.Name] = m
	}
	if s := changes["solved"]; s.Kind != "rate" || s.N != 13 || s.Delta != c.DeltaInterval {
		t.Errorf("solved %+v", s)
	}
	// exact and steps are the same on both sides: no change, no spread.
	if e := changes["exact"]; e.N != 13 || (e.Delta != Interval{}) {
		t.Errorf("exact %+v", e)
	}
	if s := changes["steps"]; s.Kind != "mean" || !near(s.MeanA, 7) || !near(s.MeanB, 7) || (s.Delta != Interval{}) {
		t.Errorf("steps %+v", s)
	}
}
