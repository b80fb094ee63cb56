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
	A       Row    `json:"a"`
	B       Row    `json:"b"`
}

// Side is one batch of a comparison.
type Side struct {
	ID       string `json:"id"`
	Name     string `json:"name"`
	Pipeline string `json:"pipeline"`
	Primary  string `json:"primary"`
	Items    int    `json:"items"`
	PassRate *Rate  `json:"pass_rate,omitempty"` // over all its items
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
	// PassA and PassB are the pass rates over the matched items; Delta is
	// B - A and PValue McNemar's exact test of it.
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

// CompareSummaries compares two batches already summarized (with their
// details read, for views that show items side by side).
func CompareSummaries(a, b *Summary) *Comparison { return compare(a, b) }

func side(s *Summary) Side {
	return Side{ID: s.ID, Name: s.Name, Pipeline: s.Pipeline, Primary: s.Primary, Items: s.Items.Total, PassRate: s.PassRate}
}

func compare(a, b *Summary) *Comparison {
	c := &Comparison{A: side(a), B: side(b), Fixed: []Pair{}, Broken: []Pair{}, OnlyA: []string{}, OnlyB: []string{}, Pairs: []Pair{}}
	inA, inB := byKey(a.Rows), byKey(b.Rows)
	var costA, costB, latA, latB mean
	passA, passB := 0, 0
	var passesA, passesB []float64
	for _, rb := range b.Rows {
		ra, ok := inA[rb.Key]
		if !ok {
			c.OnlyB = append(c.OnlyB, rb.Key)
			continue
		}
		c.Matched++
		pa, pb := ra.Pass != nil && *ra.Pass, rb.Pass != nil && *rb.Pass
		p := Pair{Key: rb.Key, Outcome: Same, A: ra, B: rb}
		switch {
		case !pa && pb:
			p.Outcome = Fixed
			c.Fixed = append(c.Fixed, p)
		case pa && !pb:
			p.Outcome = Broken
			c.Broken = append(c.Broken, p)
		case pa:
			c.SamePass++
		default:
			c.SameFail++
		}
		if pa {
			passA++
		}
		if pb {
			passB++
		}
		passesA, passesB = append(passesA, indicator(pa)), append(passesB, indicator(pb))
		c.Pairs = append(c.Pairs, p)
		if ra.Run != "" {
			costA.add(ra.CostUSD)
		}
		if rb.Run != "" {
			costB.add(rb.CostUSD)
		}
		if finished(ra.Status) {
			latA.add(ra.DurationMS)
		}
		if finished(rb.Status) {
			latB.add(rb.DurationMS)
		}
	}
	for _, ra := range a.Rows {
		if _, ok := inB[ra.Key]; !ok {
			c.OnlyA = append(c.OnlyA, ra.Key)
		}
	}
	c.PassA, c.PassB = Wilson(passA, c.Matched), Wilson(passB, c.Matched)
	c.Delta = c.PassB.Rate - c.PassA.Rate
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

// metricChanges pairs the values of each metric that A and B aggregate
// alike and bootstraps their change.
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
			x, okA := metricValue(p.A, m.Name, m.Kind)
			y, okB := metricValue(p.B, m.Name, m.Kind)
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

// byKey indexes rows by key, which the store keeps unique in a batch.
func byKey(rows []Row) map[string]Row {
	m := make(map[string]Row, len(rows))
	for _, r := range rows {
		m[r.Key] = r
	}
	return m
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
