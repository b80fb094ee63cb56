package batch

import (
	"context"
	"fmt"
	"path/filepath"
	"strings"

	"github.com/flowrun/flowrun/store"
)

// Variant is one batch of a sweep: a pipeline file and the model
// overrides (NAME=MODEL, as --model takes them) it runs with.
type Variant struct {
	Label    string
	Pipeline string
	Models   []string
}

// Variants are the batches a sweep runs: every pipeline file crossed with
// every value of each sweep axis. An axis is model.NAME=V1,V2,...: one
// variant per value, overriding the model named NAME.
func Variants(pipelines, axes []string) ([]Variant, error) {
	out := make([]Variant, 0, len(pipelines))
	for _, p := range pipelines {
		label := ""
		if len(pipelines) > 1 {
			label = filepath.Base(p)
		}
		out = append(out, Variant{Label: label, Pipeline: p})
	}
	for _, axis := range axes {
		key, values, ok := strings.Cut(axis, "=")
		name, isModel := strings.CutPrefix(strings.TrimSpace(key), "model.")
		if !ok || !isModel || name == "" || strings.TrimSpace(values) == "" {
			return nil, fmt.Errorf("sweep axis %q: write it as model.NAME=MODEL1,MODEL2 (NAME a model of the pipeline's models:)", axis)
		}
		var next []Variant
		for _, v := range out {
			for _, value := range strings.Split(values, ",") {
				value = strings.TrimSpace(value)
				if value == "" {
					return nil, fmt.Errorf("sweep axis %q: an empty model in the list", axis)
				}
				w := v
				w.Models = append(append([]string{}, v.Models...), name+"="+value)
				w.Label = strings.TrimPrefix(v.Label+" "+"model."+name+"="+value, " ")
				next = append(next, w)
			}
		}
		out = next
	}
	return out, nil
}

// SweepResult is one variant's batch, summarized.
type SweepResult struct {
	Label       string  `json:"label"`
	Batch       string  `json:"batch"`
	Primary     string  `json:"primary,omitempty"`
	PassRate    *Rate   `json:"pass_rate,omitempty"`
	CostUSD     float64 `json:"cost_usd"`
	CostPerItem float64 `json:"cost_per_item_usd"`
	P50MS       float64 `json:"latency_p50_ms"`
	P95MS       float64 `json:"latency_p95_ms"`
}

// SweepPair is the comparison of two variants (B against A).
type SweepPair struct {
	A         string   `json:"a"`
	B         string   `json:"b"`
	Fixed     int      `json:"fixed"`
	Broken    int      `json:"broken"`
	Delta     float64  `json:"delta"`
	Interval  Interval `json:"delta_interval"`
	MidPValue float64  `json:"mid_p_value"`
}

// Sweep is a sweep's variants side by side, with every pair compared.
type Sweep struct {
	Variants []SweepResult `json:"variants"`
	Pairs    []SweepPair   `json:"pairs"`
}

// SummarizeSweep reads the batches of a sweep (labels[i] names
// batches[i]) and compares each pair, the earlier variant as A.
func SummarizeSweep(ctx context.Context, st *store.Store, labels []string, batches []*store.Batch) (*Sweep, error) {
	s := &Sweep{Variants: []SweepResult{}, Pairs: []SweepPair{}}
	sums := make([]*Summary, len(batches))
	for i, b := range batches {
		sum, err := Summarize(ctx, st, b)
		if err != nil {
			return nil, err
		}
		sums[i] = sum
		s.Variants = append(s.Variants, SweepResult{Label: labels[i], Batch: b.ID, Primary: sum.Primary, PassRate: sum.PassRate,
			CostUSD: sum.CostUSD, CostPerItem: sum.CostPerItem, P50MS: sum.P50MS, P95MS: sum.P95MS})
	}
	for i := range sums {
		for j := i + 1; j < len(sums); j++ {
			c := compare(sums[i], sums[j])
			s.Pairs = append(s.Pairs, SweepPair{A: labels[i], B: labels[j], Fixed: len(c.Fixed), Broken: len(c.Broken),
				Delta: c.Delta, Interval: c.DeltaInterval, MidPValue: c.MidPValue})
		}
	}
	return s, nil
}
