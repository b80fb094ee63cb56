package batch

import (
	"context"
	"github.com/flowrun/flowrun/batch/batchtest"
	"math"
	"strings"
	"testing"
)

// TestMcNemar checks the exact two-sided p-value against ones worked by
// hand: 2 * sum_{i<=min(b,c)} C(b+c, i) / 2^(b+c), at most 1.
func TestMcNemar(t *testing.T) {
	for _, c := range []struct {
		b, c int
		want float64
	}{
		{8, 2, 0.109375},         // 2*(1+10+45)/1024
		{2, 8, 0.109375},         // symmetric
		{0, 0, 1},                // nothing changed
		{5, 5, 1},                // an even split
		{6, 0, 0.03125},          // 2/64
		{1, 10, 0.01171875},      // 2*(1+11)/2048
		{3, 1, 0.625},            // 2*(1+4)/16
		{20, 5, 0.0040773153305}, // 2*sum_{i<=5} C(25,i)/2^25 = 2*68406/33554432
	} {
		if got := McNemar(c.b, c.c); math.Abs(got-c.want) > 1e-9 {
			t.Errorf("McNemar(%d, %d) = %.10g, want %.10g", c.b, c.c, got, c.want)
		}
	}
	// Large counts stay exact instead of overflowing: 600 vs 400 is
	// chi-square 40 on one degree of freedom, p about 2.5e-10.
	if p := McNemar(600, 400); !(p > 1e-10 && p < 5e-10) {
		t.Errorf("McNemar(600, 400) = %g, want about 2.5e-10", p)
	}
}

// compareFixedBroken compares two recorded batches of 13 matched items:
// 8 fixed, 2 broken, 2 passed in both, one failed in both, and one item
// only in each. It compares them twice, to show the result is the same.
func compareFixedBroken(t *testing.T) *Comparison {
	t.Helper()
	ctx := context.Background()
	st := batchtest.OpenStore(t)
	a := batchtest.Record(t, st, "b20261122T100000-aaaa", append(batchtest.Keys("k", 13), "gone"), "PPFFFFFFFFPPFP", 1, "")
	b := batchtest.Record(t, st, "b20261122T110000-bbbb", append(batchtest.Keys("k", 13), "new"), "FFPPPPPPPPPPFF", 2, "")
	c, err := Compare(ctx, st, a, b)
	if err != nil {
		t.Fatal(err)
	}
	again, err := Compare(ctx, st, a, b)
	if err != nil {
		t.Fatal(err)
	}
	if again.DeltaInterval != c.DeltaInterval || again.PValue != c.PValue {
		t.Errorf("comparing twice gave %+v, then %+v", c.DeltaInterval, again.DeltaInterval)
	}
	return c
}

// TestCompareFixedBroken compares two batches of one dataset whose items
// changed outcome in a known way: 8 fixed, 2 broken, 2 passed in both,
// one failed in both, one item only in each.
func TestCompareFixedBroken(t *testing.T) {
	c := compareFixedBroken(t)
	pairKeys := func(ps []Pair) string {
		var ks []string
		for _, p := range ps {
			ks = append(ks, p.Key)
		}
		return strings.Join(ks, " ")
	}
	if got := pairKeys(c.Fixed); got != "k03 k04 k05 k06 k07 k08 k09 k10" {
		t.Errorf("fixed %s", got)
	}
	if got := pairKeys(c.Broken); got != "k01 k02" {
		t.Errorf("broken %s", got)
	}
	if c.Matched != 13 || c.SamePass != 2 || c.SameFail != 1 || len(c.Pairs) != 13 {
		t.Errorf("matched %d, same passed %d, same failed %d, pairs %d", c.Matched, c.SamePass, c.SameFail, len(c.Pairs))
	}
	if strings.Join(c.OnlyA, ",") != "gone" || strings.Join(c.OnlyB, ",") != "new" {
		t.Errorf("only in A %v, only in B %v", c.OnlyA, c.OnlyB)
	}
	if c.PassA != Wilson(4, 13) || c.PassB != Wilson(10, 13) || !near(c.Delta, 6.0/13) || !near(c.PValue, 0.109375) {
		t.Errorf("pass %v -> %v, delta %v, p %v; want 4/13 -> 10/13, p 0.109375", c.PassA, c.PassB, c.Delta, c.PValue)
	}
	if *c.A.PassRate != Wilson(5, 14) || *c.B.PassRate != Wilson(10, 14) {
		t.Errorf("whole-batch pass rates %v %v", c.A.PassRate, c.B.PassRate)
	}
	// Items 1..13 cost 0.001*i in A and twice that in B: 0.091 and 0.182.
	if !near(c.CostUSD.A, 0.091) || !near(c.CostUSD.B, 0.182) || !near(c.CostUSD.Delta, 0.091) || !near(c.CostUSD.MeanDelta, 0.007) {
		t.Errorf("cost %+v", c.CostUSD)
	}
	if !near(c.LatencyMS.MeanA, 700) || !near(c.LatencyMS.MeanB, 1400) || !near(c.LatencyMS.MeanDelta, 700) || !near(c.LatencyMS.Delta, 9100) {
		t.Errorf("latency %+v", c.LatencyMS)
	}
}
