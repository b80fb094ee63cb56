package batch

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"slices"

	"github.com/flowrun/flowrun/store"
)

// HumanMetric is the metric people's ratings of items make (flowrun batch
// rate, the web UI): true for an item rated pass. Its rate is over the
// items rated, not over the batch.
const HumanMetric = "human"

// SummarizeDetailed is b's summary with each row's details read (see
// Summarize and ReadDetails).
func SummarizeDetailed(ctx context.Context, st *store.Store, b *store.Batch) (*Summary, error) {
	s, err := Summarize(ctx, st, b)
	if err != nil {
		return nil, err
	}
	if err := s.ReadDetails(ctx, st); err != nil {
		return nil, err
	}
	return s, nil
}

// CompareBatches compares batch b with the earlier batch a, item by
// item, from their detailed summaries (for views that show items side
// by side), with what changed between the pipelines they ran (see
// ChangesBetween).
func CompareBatches(ctx context.Context, st *store.Store, a, b *store.Batch) (*Comparison, error) {
	sa, err := SummarizeDetailed(ctx, st, a)
	if err != nil {
		return nil, err
	}
	sb, err := SummarizeDetailed(ctx, st, b)
	if err != nil {
		return nil, err
	}
	c := compare(sa, sb)
	if c.Changes, err = ChangesBetween(ctx, st, a, b); err != nil {
		return nil, err
	}
	return c, nil
}

// ReadDetails adds to each row what the run saw and gave: its inputs and
// outputs (read from the item's run), so that a view can show why an item
// failed. Rows keep their summary when a run is gone (pruned).
func (s *Summary) ReadDetails(ctx context.Context, st *store.Store) error {
	return s.ReadRowDetails(ctx, st, s.Rows)
}

// ReadRowDetails is ReadDetails for some of the summary's rows only (a
// page of them, those a filter kept).
func (s *Summary) ReadRowDetails(ctx context.Context, st *store.Store, rows []Row) error {
	for i := range rows {
		r := &rows[i]
		if r.Run == "" {
			continue
		}
		run, err := st.Run(ctx, r.Run)
		if errors.Is(err, store.ErrNotFound) {
			continue
		}
		if err != nil {
			return fmt.Errorf("batch %s: item %s: reading run %s: %w", s.ID, r.Key, r.Run, err)
		}
		r.Inputs, r.Outputs = run.Inputs, run.Outputs
		if s.expectedGuessed {
			// Without the metrics' own list (an older batch), the expected
			// fields are those of the item the run did not take as inputs.
			for k := range r.Expected {
				if _, isInput := run.Inputs[k]; isInput {
					delete(r.Expected, k)
				}
			}
		}
	}
	return nil
}

// expected is the part of an item a batch's metrics read; fields nil
// means all of it (the batch did not record which).
func expected(item map[string]any, fields []string) map[string]any {
	if fields == nil {
		return maps.Clone(item)
	}
	out := map[string]any{}
	for _, f := range fields {
		if v, ok := item[f]; ok {
			out[f] = v
		}
	}
	if len(out) == 0 {
		return nil
	}
	return out
}

// withRatings makes each rating the item's human score, and its note the
// row's; it returns the items with their scores copied where changed.
func withRatings(items []*store.BatchItem, ratings map[string]*store.Rating) []*store.BatchItem {
	if len(ratings) == 0 {
		return items
	}
	out := make([]*store.BatchItem, len(items))
	for i, it := range items {
		out[i] = it
		if r := ratings[it.Key]; r != nil {
			c := *it
			c.Scores = maps.Clone(it.Scores)
			if c.Scores == nil {
				c.Scores = map[string]any{}
			}
			c.Scores[HumanMetric] = r.Pass
			out[i] = &c
		}
	}
	return out
}

// markFlaky marks the rows of an item run more than once whose runs
// disagree on the primary metric; it says whether any item ran more than
// once (so that a view offers the flaky filter only then).
func markFlaky(rows []Row) (repeated bool) {
	byKey := map[string][]int{}
	for i, r := range rows {
		byKey[r.Key] = append(byKey[r.Key], i)
	}
	for _, idx := range byKey {
		if len(idx) < 2 {
			continue
		}
		repeated = true
		passes := 0
		for _, i := range idx {
			if rows[i].Pass != nil && *rows[i].Pass {
				passes++
			}
		}
		if passes > 0 && passes < len(idx) {
			for _, i := range idx {
				rows[i].Flaky = true
			}
		}
	}
	return repeated
}

// Agreement is how far the human ratings agree with one pass/fail
// metric over the items that have both.
type Agreement struct {
	Metric string  `json:"metric"`
	N      int     `json:"n"`     // items rated that have the metric
	Agree  int     `json:"agree"` // of them, those where both say the same
	Kappa  float64 `json:"kappa"` // Cohen's kappa; see Defined
	// Defined is false when kappa is 0/0: both raters gave one verdict to
	// every item, so agreement beyond chance cannot be told.
	Defined bool `json:"defined"`
}

// CohensKappa is Cohen's kappa of two raters' pass/fail verdicts on the
// same items (a[i] and b[i] rate item i): (po - pe) / (1 - pe), po the
// share of items they agree on and pe the agreement chance alone would
// give with each rater's own share of passes. ok is false when there are
// no items or pe is 1.
func CohensKappa(a, b []bool) (kappa float64, ok bool) {
	n := len(a)
	if n == 0 || len(b) != n {
		return 0, false
	}
	agree, passA, passB := 0, 0, 0
	for i := range a {
		if a[i] == b[i] {
			agree++
		}
		if a[i] {
			passA++
		}
		if b[i] {
			passB++
		}
	}
	nf := float64(n)
	po := float64(agree) / nf
	pa, pb := float64(passA)/nf, float64(passB)/nf
	pe := pa*pb + (1-pa)*(1-pb)
	if pe == 1 {
		return 0, false
	}
	return (po - pe) / (1 - pe), true
}

// agreements compare the human metric with every other boolean metric
// over the rated items.
func agreements(s *Summary, items []*store.BatchItem) []Agreement {
	var out []Agreement
	for _, m := range s.Metrics {
		if m.Name == HumanMetric || m.Kind != "rate" {
			continue
		}
		var human, metric []bool
		for _, it := range items {
			h, rated := it.Scores[HumanMetric].(bool)
			v, has := it.Scores[m.Name].(bool)
			if rated && has {
				human, metric = append(human, h), append(metric, v)
			}
		}
		if len(human) == 0 {
			continue
		}
		a := Agreement{Metric: m.Name, N: len(human)}
		for i := range human {
			if human[i] == metric[i] {
				a.Agree++
			}
		}
		a.Kappa, a.Defined = CohensKappa(human, metric)
		out = append(out, a)
	}
	return out
}

// metricsWithHuman adds the human metric to a batch's metric names when
// any item is rated.
func metricsWithHuman(names []string, ratings map[string]*store.Rating) []string {
	if len(ratings) == 0 || slices.Contains(names, HumanMetric) {
		return names
	}
	return append(slices.Clip(names), HumanMetric)
}
