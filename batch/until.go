package batch

import (
	"context"
	"fmt"
	"sync"

	"github.com/flowrun/flowrun/store"
)

// UntilDecided runs a batch against a baseline batch A with the
// sequential test (see SequentialCompare) and stops it as soon as the
// test decides: each item of the new batch, as it finishes, is paired
// with the same key in A. An item of A passed when most of its runs
// passed; an item only in the new batch carries no evidence.
type UntilDecided struct {
	Baseline string // A's id
	Alpha    float64

	mu        sync.Mutex
	passedA   map[string]bool
	seen      int // items of the new batch that finished
	matched   int
	fixed     int
	broken    int
	decision  Sequential
	decidedAt int // items finished when it decided; 0 while undecided
}

// NewUntilDecided reads baseline a's items for a sequential comparison at
// level alpha.
func NewUntilDecided(ctx context.Context, st *store.Store, a *store.Batch, alpha float64) (*UntilDecided, error) {
	if alpha <= 0 || alpha >= 1 {
		return nil, fmt.Errorf("alpha %g: the error rate is between 0 and 1, e.g. 0.05", alpha)
	}
	s, err := Summarize(ctx, st, a)
	if err != nil {
		return nil, err
	}
	if s.Primary == "" {
		return nil, fmt.Errorf("batch %s has no pass/fail metric, and a sequential comparison counts passes: give its pipeline a boolean metric in score:", a.ID)
	}
	keys, runs := byKey(s.Rows)
	u := &UntilDecided{Baseline: a.ID, Alpha: alpha, passedA: make(map[string]bool, len(keys)), decision: sequentialCounts(0, 0, alpha)}
	for _, k := range keys {
		u.passedA[k] = passShare(runs[k]) > 0.5
	}
	return u, nil
}

// Observe pairs one finished item of the new batch with A's and returns
// why the batch may stop, or "" while the test is undecided. It suits
// Runner.Decide.
func (u *UntilDecided) Observe(row *store.BatchItem, passed bool) string {
	u.mu.Lock()
	defer u.mu.Unlock()
	u.seen++
	if u.decidedAt > 0 {
		return u.reason()
	}
	a, ok := u.passedA[row.Key]
	if !ok {
		return ""
	}
	u.matched++
	switch {
	case passed && !a:
		u.fixed++
	case a && !passed:
		u.broken++
	}
	u.decision = sequentialCounts(u.fixed, u.broken, u.Alpha)
	if u.decision.Decision == Continue {
		return ""
	}
	u.decidedAt = u.seen
	return u.reason()
}

func (u *UntilDecided) reason() string {
	return fmt.Sprintf("decided: %s than batch %s after %d items (%d fixed, %d broken) at alpha %g",
		u.decision.Decision, u.Baseline, u.decidedAt, u.decision.Fixed, u.decision.Broken, u.Alpha)
}

// SequentialOutcome is what a run until decided found and saved.
type SequentialOutcome struct {
	Baseline string     `json:"baseline"`
	Alpha    float64    `json:"alpha"`
	Test     Sequential `json:"test"`
	// Matched are the finished items also in the baseline; DecidedAfter
	// the items finished when the test decided (0: undecided).
	Matched      int `json:"matched"`
	DecidedAfter int `json:"decided_after"`
	// ItemsRun are the items that ran; ItemsSaved those the stop spared,
	// and CostSavedUSD what they would have cost at the mean cost of the
	// items that ran.
	ItemsRun     int     `json:"items_run"`
	ItemsSaved   int     `json:"items_saved"`
	CostUSD      float64 `json:"cost_usd"`
	CostSavedUSD float64 `json:"cost_saved_usd"`
}

// Outcome reads back the new batch b's items and says what the test
// decided and what stopping saved.
func (u *UntilDecided) Outcome(ctx context.Context, st *store.Store, b *store.Batch) (*SequentialOutcome, error) {
	rows, err := st.BatchItems(ctx, b.ID)
	if err != nil {
		return nil, fmt.Errorf("batch %s: reading its items: %w", b.ID, err)
	}
	u.mu.Lock()
	defer u.mu.Unlock()
	o := &SequentialOutcome{Baseline: u.Baseline, Alpha: u.Alpha, Test: u.decision, Matched: u.matched, DecidedAfter: u.decidedAt}
	for _, r := range rows {
		if r.Run == "" && !finished(r.Status) {
			o.ItemsSaved++
			continue
		}
		o.ItemsRun++
		o.CostUSD += r.CostUSD
	}
	if o.ItemsRun > 0 {
		o.CostSavedUSD = o.CostUSD / float64(o.ItemsRun) * float64(o.ItemsSaved)
	}
	return o, nil
}
