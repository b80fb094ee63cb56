package batch

import (
	"math"
	"math/big"
	"math/rand/v2"
	"sort"

	"github.com/flowrun/flowrun/jsonvalue"
)

// McNemarMidP is the two-sided mid-p value of McNemar's test for b items
// that changed one way and c the other: the exact p-value less the
// probability of the observed split itself. The exact test counts that
// split whole and so rejects less often than its nominal level; the mid-p
// value keeps close to the level (Fagerland, Lydersen and Laake 2013).
func McNemarMidP(b, c int) float64 {
	n := b + c
	if n == 0 || b == c {
		return 1
	}
	k := min(b, c)
	// P(X = k) for X ~ Binomial(n, 1/2), exactly.
	pk, _ := new(big.Rat).SetFrac(new(big.Int).Binomial(int64(n), int64(k)), new(big.Int).Lsh(big.NewInt(1), uint(n))).Float64()
	return min(1, McNemar(b, c)-pk)
}

// Interval is a 95% confidence interval around an estimate.
type Interval struct {
	Estimate float64 `json:"estimate"`
	Low      float64 `json:"low"`
	High     float64 `json:"high"`
}

// BootstrapResamples is how many resamples Compare's intervals draw: the
// interval's ends then move by well under a percentage point between seeds.
const BootstrapResamples = 10000

// PairedBootstrap is the percentile bootstrap 95% interval of mean(b - a)
// over paired values (a[i] and b[i] belong to one item): each resample
// draws len(a) items with replacement, keeping each item's pair together,
// so what the items share (an item hard for both sides) cancels out. The
// same seed gives the same interval. With no pairs the interval is empty
// (all zero).
func PairedBootstrap(a, b []float64, resamples int, seed uint64) Interval {
	n := min(len(a), len(b))
	if n == 0 || resamples <= 0 {
		return Interval{}
	}
	d := make([]float64, n)
	sum := 0.0
	for i := range n {
		d[i] = b[i] - a[i]
		sum += d[i]
	}
	rng := rand.New(rand.NewPCG(seed, seed^0x9e3779b97f4a7c15))
	means := make([]float64, resamples)
	for r := range means {
		s := 0.0
		for range n {
			s += d[rng.IntN(n)]
		}
		means[r] = s / float64(n)
	}
	sort.Float64s(means)
	return Interval{Estimate: sum / float64(n), Low: Percentile(means, 2.5), High: Percentile(means, 97.5)}
}

// ItemsForPower is how many paired items a comparison needs to detect, with
// McNemar's test at two-sided level alpha and the given power, a change
// whose items fix with probability fixed and break with probability broken
// (the shares of all items; the rest stay the same). It is Connor's (1987)
// normal approximation:
//
//	n = (z(1-alpha/2)·√ψ + z(power)·√(ψ - δ²))² / δ²,  ψ = fixed + broken, δ = fixed - broken
//
// rounded up. With no difference (δ = 0) no number of items suffices and
// it returns 0.
func ItemsForPower(fixed, broken, alpha, power float64) int {
	delta := fixed - broken
	psi := fixed + broken
	if delta == 0 || psi <= 0 || psi > 1 {
		return 0
	}
	za, zb := normalQuantile(1-alpha/2), normalQuantile(power)
	root := za*math.Sqrt(psi) + zb*math.Sqrt(psi-delta*delta)
	return int(math.Ceil(root * root / (delta * delta)))
}

// normalQuantile is the standard normal quantile function.
func normalQuantile(p float64) float64 { return -math.Sqrt2 * math.Erfcinv(2*p) }

// Decision is where a sequential comparison stands.
type Decision string

// Decisions of a sequential comparison.
const (
	DecidedBetter Decision = "better"   // B fixes more than it breaks
	DecidedWorse  Decision = "worse"    // B breaks more than it fixes
	Continue      Decision = "continue" // not decided yet: run more items
)

// Sequential is the state of a sequential comparison of B against a
// baseline A after some matched items.
type Sequential struct {
	Fixed    int      `json:"fixed"`
	Broken   int      `json:"broken"`
	LogLR    float64  `json:"log_likelihood_ratio"` // the mixture's, against no change
	Decision Decision `json:"decision"`
}

// SequentialCompare decides, from the pairs seen so far, whether B is
// better or worse than A, or that more items are needed, with a mixture
// sequential probability ratio test on the discordant pairs: were the
// change a no-op, each fixed-or-broken item would be fixed with
// probability 1/2; the test weighs that against every other probability p
// at once, with p uniform on [0, 1] (a Beta(1, 1) mixture):
//
//	LR = B(fixed+1, broken+1) · 2^(fixed+broken)
//
// and decides once LR ≥ 1/alpha. LR is a martingale of mean 1 under no
// change, so by Ville's inequality the chance that it ever reaches 1/alpha
// is at most alpha: the test may be checked after every item and stopped
// at any time, and the chance of declaring a difference where there is
// none stays under alpha. Items that passed or failed on both sides carry
// no evidence and are only counted by the caller. Any real difference is
// decided eventually.
func SequentialCompare(pairs []Pair, alpha float64) Sequential {
	s := Sequential{}
	for _, p := range pairs {
		switch p.Outcome {
		case Fixed:
			s.Fixed++
		case Broken:
			s.Broken++
		}
	}
	return sequentialCounts(s.Fixed, s.Broken, alpha)
}

func sequentialCounts(fixed, broken int, alpha float64) Sequential {
	s := Sequential{Fixed: fixed, Broken: broken, Decision: Continue}
	s.LogLR = logBeta(float64(fixed)+1, float64(broken)+1) + float64(fixed+broken)*math.Ln2
	if s.LogLR >= -math.Log(alpha) && fixed != broken {
		s.Decision = DecidedWorse
		if fixed > broken {
			s.Decision = DecidedBetter
		}
	}
	return s
}

func logBeta(a, b float64) float64 {
	la, _ := math.Lgamma(a)
	lb, _ := math.Lgamma(b)
	lab, _ := math.Lgamma(a + b)
	return la + lb - lab
}

// Item classes over repeated runs.
const (
	AlwaysPass = "always-pass"
	AlwaysFail = "always-fail"
	Flaky      = "flaky"
)

// Repeats is one item run several times: each run's primary pass and its
// scores.
type Repeats struct {
	Key  string      `json:"key"`
	Runs []RepeatRun `json:"runs"`
}

// RepeatRun is one of an item's runs.
type RepeatRun struct {
	Run    string         `json:"run,omitempty"`
	Pass   bool           `json:"pass"`
	Scores map[string]any `json:"scores,omitempty"`
}

// Spread is a metric's mean with its sample standard deviation over n
// values (0 when n < 2).
type Spread struct {
	Mean float64 `json:"mean"`
	SD   float64 `json:"sd"`
	N    int     `json:"n"`
}

// ItemRepeats is what an item's repeated runs gave.
type ItemRepeats struct {
	Key    string `json:"key"`
	Runs   int    `json:"runs"`
	Passed int    `json:"passed"`
	// PassAt is pass@N: 1 when any run passed. PassAll is pass^N: 1 when
	// every run passed.
	PassAt  bool              `json:"pass_at_n"`
	PassAll bool              `json:"pass_all_n"`
	Class   string            `json:"class"`
	Metrics map[string]Spread `json:"metrics"` // the numeric and boolean scores (a boolean as 0/1)
}

// RepeatSummary is a batch whose items ran N times each.
type RepeatSummary struct {
	Items      []ItemRepeats `json:"items"`
	AlwaysPass int           `json:"always_pass"`
	AlwaysFail int           `json:"always_fail"`
	Flaky      int           `json:"flaky"`
	PassAt     Rate          `json:"pass_at_n"`  // items for which any run passed
	PassAll    Rate          `json:"pass_all_n"` // items for which every run passed
	// Metrics are each metric's mean over the items' means, with the
	// spread of those means across items; Within is the mean of each
	// item's own standard deviation: how much one item varies run to run.
	Metrics map[string]Spread  `json:"metrics"`
	Within  map[string]float64 `json:"within_item_sd"`
}

// SummarizeRepeats classifies items run several times and aggregates
// their metrics. An item with no runs is left out.
func SummarizeRepeats(items []Repeats) RepeatSummary {
	s := RepeatSummary{Items: []ItemRepeats{}, Metrics: map[string]Spread{}, Within: map[string]float64{}}
	itemMeans := map[string][]float64{}
	itemSDs := map[string][]float64{}
	passAt, passAll := 0, 0
	for _, it := range items {
		if len(it.Runs) == 0 {
			continue
		}
		r := ItemRepeats{Key: it.Key, Runs: len(it.Runs), Metrics: map[string]Spread{}}
		values := map[string][]float64{}
		for _, run := range it.Runs {
			if run.Pass {
				r.Passed++
			}
			for name, v := range run.Scores {
				if f, ok := scoreNumber(v); ok {
					values[name] = append(values[name], f)
				}
			}
		}
		r.PassAt, r.PassAll = r.Passed > 0, r.Passed == r.Runs
		switch {
		case r.PassAll:
			r.Class = AlwaysPass
			s.AlwaysPass++
		case !r.PassAt:
			r.Class = AlwaysFail
			s.AlwaysFail++
		default:
			r.Class = Flaky
			s.Flaky++
		}
		if r.PassAt {
			passAt++
		}
		if r.PassAll {
			passAll++
		}
		for name, vs := range values {
			sp := spread(vs)
			r.Metrics[name] = sp
			itemMeans[name] = append(itemMeans[name], sp.Mean)
			itemSDs[name] = append(itemSDs[name], sp.SD)
		}
		s.Items = append(s.Items, r)
	}
	s.PassAt, s.PassAll = Wilson(passAt, len(s.Items)), Wilson(passAll, len(s.Items))
	for name, ms := range itemMeans {
		s.Metrics[name] = spread(ms)
		s.Within[name] = spread(itemSDs[name]).Mean
	}
	return s
}

// PassAtK estimates, from n runs of an item of which c passed, the chance
// that at least one of k runs passes (pass@k, Chen et al. 2021: 1 -
// C(n-c, k)/C(n, k)), and that all k pass (pass^k: C(c, k)/C(n, k)), each
// unbiased for k ≤ n.
func PassAtK(n, c, k int) (any, all float64) {
	if k <= 0 || k > n || c < 0 || c > n {
		return 0, 0
	}
	return 1 - binomialRatio(n-c, n, k), binomialRatio(c, n, k)
}

// binomialRatio is C(m, k)/C(n, k) for m ≤ n, as a product that stays in
// range: prod_{i<k} (m-i)/(n-i).
func binomialRatio(m, n, k int) float64 {
	r := 1.0
	for i := range k {
		if m-i <= 0 {
			return 0
		}
		r *= float64(m-i) / float64(n-i)
	}
	return r
}

// scoreNumber is a score as a number: a boolean as 0 or 1.
func scoreNumber(v any) (float64, bool) {
	if b, ok := v.(bool); ok {
		return indicator(b), true
	}
	return jsonvalue.Number(v)
}

func spread(vs []float64) Spread {
	s := Spread{N: len(vs)}
	if len(vs) == 0 {
		return s
	}
	for _, v := range vs {
		s.Mean += v
	}
	s.Mean /= float64(len(vs))
	if len(vs) > 1 {
		ss := 0.0
		for _, v := range vs {
			ss += (v - s.Mean) * (v - s.Mean)
		}
		s.SD = math.Sqrt(ss / float64(len(vs)-1))
	}
	return s
}
