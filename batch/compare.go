package batch

import (
	"context"
	"math/big"

	"github.com/flowrun/flowrun/jsonvalue"

	"github.com/flowrun/flowrun/store"
)

// Outcomes of one item across two batches.
const (
	Fixed  = "fixed"  // failed in A, passed in B
	Broken = "broken" // passed in A, failed in B
	Same   = "same"
)

// Pair is one item present in both batches.
type Pair struct {
	Key     string `json:"key"`
	Outcome string `json:"outcome"`
	A       Row    `json:"a"` // its first run in A
	B       Row    `json:"b"`
	// PassRateA and PassRateB are the share of the item's runs that
	// passed, when either batch ran it more than once (--repeat): the
	// item is fixed when B's share is higher, broken when lower.
	PassRateA *float64 `json:"pass_rate_a,omitempty"`
	PassRateB *float64 `json:"pass_rate_b,omitempty"`

	runsA, runsB []Row
}

// Side is one batch of a comparison.
type Side struct {
	ID       string `json:"id"`
	Label    string `json:"label,omitempty"`
	Name     string `json:"name"`
	Pipeline string `json:"pipeline"`
	Primary  string `json:"primary"`
	// Metrics are the metrics it scored, in declaration order.
	Metrics  []string `json:"metrics"`
	Items    int      `json:"items"`
	PassRate *Rate    `json:"pass_rate,omitempty"` // over all its items
}

// Totals are a figure summed and averaged over the matched items.
type Totals struct {
	A         float64 `json:"a"`
	B         float64 `json:"b"`
	MeanA     float64 `json:"mean_a"`
	MeanB     float64 `json:"mean_b"`
	Delta     float64 `json:"delta"`      // B - A
	MeanDelta float64 `json:"mean_delta"` // B - A
}

// Comparison is what changed from batch A to batch B, item by item.
type Comparison struct {
	A        Side     `json:"a"`
	B        Side     `json:"b"`
	Matched  int      `json:"matched"`
	Fixed    []Pair   `json:"fixed"`
	Broken   []Pair   `json:"broken"`
	SamePass int      `json:"same_passed"`
	SameFail int      `json:"same_failed"`
	OnlyA    []string `json:"only_in_a"`
	OnlyB    []string `json:"only_in_b"`
	// PassA and PassB are the pass rates over the matched items' runs;
	// Delta is B - A, the mean change of an item's share of passing runs,
	// and PValue McNemar's exact test of it.
	PassA     Rate    `json:"pass_rate_a"`
	PassB     Rate    `json:"pass_rate_b"`
	Delta     float64 `json:"delta"`
	PValue    float64 `json:"p_value"`
	CostUSD   Totals  `json:"cost_usd"`
	LatencyMS Totals  `json:"latency_ms"`
	Pairs     []Pair  `json:"pairs"` // in B's order
	// MidPValue is McNemar's mid-p test of Delta, less conservative than
	// the exact PValue; DeltaInterval the paired bootstrap 95% interval of
	// Delta (an item that did not pass counts as failed, as in Delta).
	MidPValue     float64  `json:"mid_p_value"`
	DeltaInterval Interval `json:"delta_interval"`
	// ItemsForPower is how many matched items a change of this size (these
	// shares fixed and broken) needs for McNemar's test at 0.05 to detect
	// it with 80% power; 0 when nothing changed on balance.
	ItemsForPower int `json:"items_for_80_power"`
	// MetricChanges are the metrics both batches aggregate the same way,
	// each with the paired bootstrap interval of its change.
	MetricChanges []MetricChange `json:"metric_changes"`
	// Changes are what differs between the pipelines A and B ran and the
	// settings they ran with; nil when not read (Compare).
	Changes *PipelineChanges `json:"changes,omitempty"`
}

// MetricChange is one metric's change from A to B over the matched items
// that have it on both sides: a boolean as a rate (an item that did not
// complete counts as false, as in the pass rate), a number as a mean.
type MetricChange struct {
	Name  string   `json:"name"`
	Kind  string   `json:"kind"` // "rate" or "mean"
	N     int      `json:"n"`
	MeanA float64  `json:"mean_a"`
	MeanB float64  `json:"mean_b"`
	Delta Interval `json:"delta"` // B - A, with its 95% interval
}

// bootstrapSeed fixes Compare's resamples, so that comparing the same two
// batches twice prints the same interval.
const bootstrapSeed = 25

// Compare reads two batches and matches their items by key.
func Compare(ctx context.Context, st *store.Store, a, b *store.Batch) (*Comparison, error) {
	sa, err := Summarize(ctx, st, a)
	if err != nil {
		return nil, err
	}
	sb, err := Summarize(ctx, st, b)
	if err != nil {
		return nil, err
	}
	return compare(sa, sb), nil
}

func side(s *Summary) Side {
	sd := Side{ID: s.ID, Label: s.Label, Name: s.Name, Pipeline: s.Pipeline, Primary: s.Primary, Metrics: []string{}, Items: s.Items.Total, PassRate: s.PassRate}
	for _, m := range s.Metrics {
		sd.Metrics = append(sd.Metrics, m.Name)
	}
	return sd
}

func compare(a, b *Summary) *Comparison {
	c := &Comparison{A: side(a), B: side(b), Fixed: []Pair{}, Broken: []Pair{}, OnlyA: []string{}, OnlyB: []string{}, Pairs: []Pair{}}
	keysA, inA := byKey(a.Rows)
	keysB, inB := byKey(b.Rows)
	var costA, costB, latA, latB mean
	runsPassedA, runsPassedB, runsA, runsB := 0, 0, 0, 0
	var passesA, passesB []float64
	for _, key := range keysB {
		ga, gb := inA[key], inB[key]
		if ga == nil {
			c.OnlyB = append(c.OnlyB, key)
			continue
		}
		c.Matched++
		pa, pb := passShare(ga), passShare(gb)
		p := Pair{Key: key, Outcome: Same, A: ga[0], B: gb[0], runsA: ga, runsB: gb}
		if len(ga) > 1 || len(gb) > 1 {
			p.PassRateA, p.PassRateB = &pa, &pb
		}
		switch {
		case pb > pa:
			p.Outcome = Fixed
			c.Fixed = append(c.Fixed, p)
		case pb < pa:
			p.Outcome = Broken
			c.Broken = append(c.Broken, p)
		case pa == 1:
			c.SamePass++
		default:
			c.SameFail++
		}
		passesA, passesB = append(passesA, pa), append(passesB, pb)
		c.Pairs = append(c.Pairs, p)
		for _, r := range ga {
			runsA++
			runsPassedA += int(indicator(rowPassed(r)))
			if r.Run != "" {
				costA.add(r.CostUSD)
			}
			if finished(r.Status) {
				latA.add(r.DurationMS)
			}
		}
		for _, r := range gb {
			runsB++
			runsPassedB += int(indicator(rowPassed(r)))
			if r.Run != "" {
				costB.add(r.CostUSD)
			}
			if finished(r.Status) {
				latB.add(r.DurationMS)
			}
		}
	}
	for _, key := range keysA {
		if inB[key] == nil {
			c.OnlyA = append(c.OnlyA, key)
		}
	}
	c.PassA, c.PassB = Wilson(runsPassedA, runsA), Wilson(runsPassedB, runsB)
	c.Delta = spread(passesB).Mean - spread(passesA).Mean
	c.PValue = McNemar(len(c.Fixed), len(c.Broken))
	c.MidPValue = McNemarMidP(len(c.Fixed), len(c.Broken))
	if c.Matched > 0 {
		m := float64(c.Matched)
		c.ItemsForPower = ItemsForPower(float64(len(c.Fixed))/m, float64(len(c.Broken))/m, 0.05, 0.8)
	}
	c.DeltaInterval = PairedBootstrap(passesA, passesB, BootstrapResamples, bootstrapSeed)
	c.MetricChanges = metricChanges(a, b, c.Pairs)
	c.CostUSD = totals(costA, costB)
	c.LatencyMS = totals(latA, latB)
	return c
}

// rowPassed says whether a run passed the primary metric.
func rowPassed(r Row) bool { return r.Pass != nil && *r.Pass }

// passShare is the share of an item's runs that passed: 0 or 1 for an
// item run once.
func passShare(runs []Row) float64 {
	n := 0
	for _, r := range runs {
		if rowPassed(r) {
			n++
		}
	}
	return float64(n) / float64(len(runs))
}

// metricChanges pairs the values of each metric that A and B aggregate
// alike (an item run several times by its mean over its runs) and
// bootstraps their change.
func metricChanges(a, b *Summary, pairs []Pair) []MetricChange {
	kindB := map[string]string{}
	for _, m := range b.Metrics {
		kindB[m.Name] = m.Kind
	}
	out := []MetricChange{}
	for _, m := range a.Metrics {
		if m.Kind != kindB[m.Name] || (m.Kind != "rate" && m.Kind != "mean") {
			continue
		}
		var va, vb []float64
		for _, p := range pairs {
			x, okA := itemMetric(p.runsA, m.Name, m.Kind)
			y, okB := itemMetric(p.runsB, m.Name, m.Kind)
			if okA && okB {
				va, vb = append(va, x), append(vb, y)
			}
		}
		mc := MetricChange{Name: m.Name, Kind: m.Kind, N: len(va), Delta: PairedBootstrap(va, vb, BootstrapResamples, bootstrapSeed)}
		mc.MeanA, mc.MeanB = spread(va).Mean, spread(vb).Mean
		out = append(out, mc)
	}
	return out
}

// itemMetric is a metric's mean over an item's runs that have it.
func itemMetric(runs []Row, name, kind string) (float64, bool) {
	var vs []float64
	for _, r := range runs {
		if v, ok := metricValue(r, name, kind); ok {
			vs = append(vs, v)
		}
	}
	return spread(vs).Mean, len(vs) > 0
}

// metricValue is a row's value of a metric as a number: for a rate, 1
// when the item completed with the metric true, 0 for any other finished
// item; for a mean, the number when it has one.
func metricValue(r Row, name, kind string) (float64, bool) {
	v := r.Scores[name]
	if kind == "rate" {
		return indicator(r.Status == "completed" && v == true), finished(r.Status)
	}
	return jsonvalue.Number(v)
}

func indicator(b bool) float64 {
	if b {
		return 1
	}
	return 0
}

// byKey groups rows by key (an item's runs, one per repeat), keys in
// first-seen order.
func byKey(rows []Row) ([]string, map[string][]Row) {
	var keys []string
	m := make(map[string][]Row, len(rows))
	for _, r := range rows {
		if m[r.Key] == nil {
			keys = append(keys, r.Key)
		}
		m[r.Key] = append(m[r.Key], r)
	}
	return keys, m
}

type mean struct {
	sum float64
	n   int
}

func (m *mean) add(v float64) { m.sum += v; m.n++ }

func (m mean) value() float64 {
	if m.n == 0 {
		return 0
	}
	return m.sum / float64(m.n)
}

func totals(a, b mean) Totals {
	return Totals{A: a.sum, B: b.sum, MeanA: a.value(), MeanB: b.value(), Delta: b.sum - a.sum, MeanDelta: b.value() - a.value()}
}

// McNemar is the two-sided p-value of McNemar's exact test for b items
// that changed one way and c the other: the probability, were a change
// equally likely either way, of a split at least this uneven. It is
// computed exactly and rounded once.
func McNemar(b, c int) float64 {
	n := b + c
	if n == 0 {
		return 1
	}
	k := min(b, c)
	sum := new(big.Int)
	term := big.NewInt(1) // C(n, 0)
	for i := 0; i <= k; i++ {
		sum.Add(sum, term)
		term.Mul(term, big.NewInt(int64(n-i)))
		term.Quo(term, big.NewInt(int64(i+1)))
	}
	sum.Lsh(sum, 1)
	p, _ := new(big.Rat).SetFrac(sum, new(big.Int).Lsh(big.NewInt(1), uint(n))).Float64()
	return min(1, p)
}
