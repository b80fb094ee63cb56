package engine

import (
	"context"
	"errors"

	"github.com/flowrun/flowrun/dsl"
	"github.com/flowrun/flowrun/engine/internal/durable"
	"github.com/flowrun/flowrun/journal/sqlitejournal"
	"github.com/flowrun/flowrun/runtime"
	"github.com/flowrun/flowrun/store"
)

// Mirror keeps, in a store, the records of runs of one pipeline that run
// elsewhere and are journaled there (a cluster batch's items: workers run
// them through Shared.Start with RunOptions.Journal, and the coordinator
// mirrors each), so that batch show, compare, report and flowrun serve
// read them as they read the runs an engine ran itself: the record holds
// the pipeline with every file its load read, as Start's does.
type Mirror struct {
	st   *store.Store
	p    *dsl.Pipeline
	spec store.RunSpec
}

// NewMirror is the mirror, in st, of runs of p that run elsewhere as o
// says (its Auto, MaxLoops and Models): that is the spec their records
// keep, so that a resume of one here goes on as it ran there.
func NewMirror(st *store.Store, p *dsl.Pipeline, o RunOptions) (*Mirror, error) {
	models, err := overrides(p, nil, o.Models)
	if err != nil {
		return nil, &ConfigError{err}
	}
	return &Mirror{st: st, p: p, spec: store.RunSpec{Models: models, Auto: o.Auto, MaxLoops: o.MaxLoops}}, nil
}

// Copy brings the store's copy of run id up to date with all its journal
// holds (evs and cps, in order), creating its record, with inputs, when
// it is missing. What the store holds already (recorded as it came, or
// by a mirror killed while copying) is a prefix of the run's: the rest is
// added, nothing twice. With claim, a run the store has as ended is
// marked running again: it goes on elsewhere.
func (m *Mirror) Copy(ctx context.Context, id string, inputs map[string]any, evs []runtime.Event, cps []*runtime.Checkpoint, claim bool) error {
	var haveEvents, haveCheckpoints int
	if run, err := m.st.Run(ctx, id); err == nil {
		if claim && run.Status != runtime.StatusRunning {
			if _, err := m.st.Claim(ctx, id); err != nil {
				return err
			}
		}
		had, err := m.st.Events(ctx, id)
		if err != nil {
			return err
		}
		hadCps, err := m.st.ListCheckpoints(ctx, id)
		if err != nil {
			return err
		}
		haveEvents, haveCheckpoints = len(had), len(hadCps)
	} else {
		in, err := runtime.PrepareInputs(m.p, inputs)
		if err != nil {
			in = inputs
		}
		rec, err := durable.NewRunRecord(id, m.p, in)
		if err != nil {
			return err
		}
		rec.Spec = m.spec
		if err := m.st.CreateRun(ctx, sqlitejournal.ToStore(rec)); err != nil {
			return err
		}
	}
	r, err := m.st.Recorder(ctx, id)
	if err != nil {
		return err
	}
	for _, e := range evs[min(haveEvents, len(evs)):] {
		r.Event(e)
	}
	for _, cp := range cps[min(haveCheckpoints, len(cps)):] {
		if err := r.Save(ctx, cp); err != nil {
			return errors.Join(err, r.Flush(ctx))
		}
	}
	return r.Flush(ctx)
}

// Finish records how a mirrored run ended.
func (m *Mirror) Finish(ctx context.Context, res *runtime.Result) error {
	return m.st.Finish(ctx, res.RunID, durable.Ending(res))
}
