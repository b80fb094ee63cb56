package batch

import (
	"context"
	"fmt"
	"strings"

	"github.com/flowrun/flowrun/dsl"
	"github.com/flowrun/flowrun/engine"
	"github.com/flowrun/flowrun/runtime"
	"github.com/flowrun/flowrun/store"
)

// Overrides are the settings a resume gives; a nil field keeps what the
// batch recorded. Each names the Settings field it replaces.
type Overrides struct {
	Concurrency     *int
	MaxCostUSD      *float64
	MaxLoops        *int
	Auto            *bool
	Model           *[]string
	Replay          *string
	NATS            *string
	NATSCreds       *string
	NATSCA          *string
	NATSSign        *string
	NATSTrustWorker *[]string
	NATSInsecure    *bool
}

// With returns s with the settings o gives in place of its own.
func (s Settings) With(o Overrides) Settings {
	replace(&s.Concurrency, o.Concurrency)
	replace(&s.MaxCostUSD, o.MaxCostUSD)
	replace(&s.MaxLoops, o.MaxLoops)
	replace(&s.Auto, o.Auto)
	replace(&s.Model, o.Model)
	replace(&s.Replay, o.Replay)
	replace(&s.NATS, o.NATS)
	replace(&s.NATSCreds, o.NATSCreds)
	replace(&s.NATSCA, o.NATSCA)
	replace(&s.NATSSign, o.NATSSign)
	replace(&s.NATSTrustWorker, o.NATSTrustWorker)
	replace(&s.NATSInsecure, o.NATSInsecure)
	return s
}

func replace[T any](dst *T, given *T) {
	if given != nil {
		*dst = *given
	}
}

// ResumeOptions say how a resumed batch differs from how it began.
type ResumeOptions struct {
	Overrides Overrides
	// RetryFailed runs the failed items again, each resuming its run
	// (the failed node runs again); items failed by their dataset entry
	// stay failed.
	RetryFailed bool
	// AllowChanged resumes although the pipeline changed since the batch
	// started, so that its items mix two versions of it.
	AllowChanged bool
}

// Resumption is a recorded batch ready to continue.
type Resumption struct {
	Batch    *store.Batch
	Pipeline *dsl.Pipeline
	// Settings are those the batch recorded, with the resume's overrides.
	Settings Settings
	// Window caps the items queued or running on workers when
	// Settings.NATS is set (0: no cap): the concurrency the resume gives,
	// else the cap a batch run on workers recorded. A batch that ran in
	// one process recorded how many items it ran at once, which is no cap
	// on the workers.
	Window int
	Scorer *Scorer
	// Items are the dataset's entries when some item has no run yet, or
	// one a kill left unrecorded; nil when every item has its run.
	Items []*Item
	// Rows are the batch's items as recorded.
	Rows []*store.BatchItem

	retryFailed, allowChanged bool
}

// ChangedError says a batch's pipeline changed since the batch started.
type ChangedError struct {
	Batch    string
	Pipeline string // as the batch was given it
	// Changes are the changed lines, file by file, when a run of the
	// batch kept the files it read.
	Changes []string
}

func (e *ChangedError) Error() string {
	return fmt.Sprintf("%s changed since batch %s started; its items would mix two versions of the pipeline", e.Pipeline, e.Batch)
}

// PrepareResume reads back the batch ref names (an id, a prefix of one,
// or "last") for a resume: its pipeline, loaded again and unchanged
// unless o allows it; its recorded settings with o's overrides; its
// scorer; and, when some item has no result yet, its dataset, unchanged.
func PrepareResume(ctx context.Context, st *store.Store, ref string, o ResumeOptions) (*Resumption, error) {
	b, err := st.FindBatch(ctx, ref)
	if err != nil {
		return nil, err
	}
	rows, err := st.BatchItems(ctx, b.ID)
	if err != nil {
		return nil, fmt.Errorf("batch %s: reading its items: %w", b.ID, err)
	}
	p, ds := dsl.Load(b.PipelineAbs)
	if p == nil {
		return nil, fmt.Errorf("batch %s: its pipeline %s no longer loads:\n%s", b.ID, b.Pipeline, ds)
	}
	if p.Hash != b.PipelineHash && !o.AllowChanged {
		return nil, changed(ctx, st, b, rows, p)
	}
	saved, err := SettingsOf(b)
	if err != nil {
		return nil, err
	}
	scorer, err := ParseScorer(p, saved.Score)
	if err != nil {
		return nil, err
	}
	res := &Resumption{Batch: b, Pipeline: p, Settings: saved.With(o.Overrides), Scorer: scorer, Rows: rows,
		retryFailed: o.RetryFailed, allowChanged: o.AllowChanged}
	switch {
	case o.Overrides.Concurrency != nil:
		res.Window = *o.Overrides.Concurrency
	case saved.NATS != "":
		res.Window = saved.Concurrency
	}
	for _, row := range rows {
		if row.Status != runtime.StatusCompleted && row.Status != runtime.StatusFailed {
			d, err := ReadDataset(saved.DatasetAbs)
			if err != nil {
				return nil, fmt.Errorf("batch %s has items not started yet: %w", b.ID, err)
			}
			if d.Hash != b.DatasetHash {
				return nil, fmt.Errorf("the dataset %s changed since batch %s started; start a new batch", b.Dataset, b.ID)
			}
			res.Items = d.Items
			break
		}
	}
	return res, nil
}

// changed describes how b's pipeline changed: an item's run keeps every
// file the pipeline read, so that the change shows file by file.
func changed(ctx context.Context, st *store.Store, b *store.Batch, rows []*store.BatchItem, p *dsl.Pipeline) error {
	e := &ChangedError{Batch: b.ID, Pipeline: b.Pipeline}
	for _, row := range rows {
		if row.Run == "" {
			continue
		}
		if run, err := st.Run(ctx, row.Run); err == nil {
			e.Changes = engine.Changes(run, p)
			break
		}
	}
	return e
}

// ParseScorer builds a batch's metrics: p's score: section with the
// metrics given as NAME=EXPR merged in, replacing those of the same name.
// A metric that does not compile is a *dsl.LoadError pointing into its
// expression.
func ParseScorer(p *dsl.Pipeline, scores []string) (*Scorer, error) {
	var extra []*dsl.Metric
	for _, s := range scores {
		name, src, ok := strings.Cut(s, "=")
		if !ok || strings.TrimSpace(name) == "" {
			return nil, fmt.Errorf("metric %q: write it as NAME=EXPR, e.g. exact='outputs.answer == item.expected'", s)
		}
		m, ds := dsl.ParseMetric(p, strings.TrimSpace(name), src)
		if m == nil {
			return nil, &dsl.LoadError{Diagnostics: ds}
		}
		extra = append(extra, m)
	}
	return NewScorer(p, extra), nil
}

// NewRunner is a runner of p's items on st that runs them on runs (an
// engine's, on st) as s says: at s.Concurrency at once, within
// s.MaxCostUSD, loops capped at s.MaxLoops, questions answered by their
// defaults when s.Auto, inputs mapped by s.Map.
func NewRunner(st *store.Store, p *dsl.Pipeline, runs *engine.Shared, s Settings) *Runner {
	return &Runner{Store: st, Pipeline: p, Runs: runs, Auto: s.Auto, MaxLoops: s.MaxLoops, Map: s.Map, Models: s.Model,
		Concurrency: s.Concurrency, MaxCostUSD: s.MaxCostUSD, Repeat: s.Repeat}
}

// Resume continues the batch res describes: it makes this process the
// batch's holder (a *store.InProgressError while another live process
// holds it), tells claimed (which may yet set up r, e.g. its Remote),
// and runs every item without a result; see Run.
func (r *Runner) Resume(ctx context.Context, res *Resumption, claimed func() error) (status runtime.Status, reason string, err error) {
	r.Scorer, r.RetryFailed, r.AllowChanged = res.Scorer, res.retryFailed, res.allowChanged
	if err := r.Store.ClaimBatch(ctx, res.Batch.ID); err != nil {
		return "", "", err
	}
	if err := claimed(); err != nil {
		return "", "", err
	}
	return r.Run(ctx, res.Batch, res.Items)
}
