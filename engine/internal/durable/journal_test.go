package durable_test

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"os"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/flowrun/flowrun/engine/internal/durable"
	"github.com/flowrun/flowrun/journal"
	"github.com/flowrun/flowrun/journal/jsjournal/jsjournaltest"
	"github.com/flowrun/flowrun/journal/sqlitejournal"
	"github.com/flowrun/flowrun/runtime"
	"github.com/flowrun/flowrun/store"
)

var update = flag.Bool("update", false, "rewrite testdata/killed_resumed.golden from the SQLite journal")

// killedResumed is the run of testdata/killed_resumed.golden: its
// transcript was first written by durable as it recorded runs in the
// store directly, before it went through journal.Journal.
const killedResumed = "testdata/killed_resumed.golden"

// A run stopped mid-way (its context cancelled after its second node)
// and resumed leaves the same checkpoints and events in the SQLite
// journal and in JetStream's, and the same as durable left in the store
// before it recorded runs through journal.Journal: one recording path.
func TestAKilledRunGoesOnAlikeInEveryJournal(t *testing.T) {
	journals := map[string]func(t *testing.T, r *durable.Runner) journal.Journal{
		"sqlite":    func(t *testing.T, r *durable.Runner) journal.Journal { return sqlitejournal.New(r.Store) },
		"jetstream": func(t *testing.T, r *durable.Runner) journal.Journal { return jsjournaltest.Open(t) },
	}
	want, err := os.ReadFile(killedResumed)
	if err != nil && !*update {
		t.Fatal(err)
	}
	for _, name := range []string{"sqlite", "jetstream"} {
		t.Run(name, func(t *testing.T) {
			m := newModel(t)
			r := newRunner(t, m)
			j := journals[name](t, r)
			r.Journal = j
			got := killAndResume(t, r, j)
			if prompts := m.prompts(); !reflect.DeepEqual(prompts, map[string]int{"say a": 1, "say b": 1, "say c": 1}) {
				t.Errorf("over both attempts the model was asked %v, want each prompt once", prompts)
			}
			if *update && name == "sqlite" {
				if err := os.WriteFile(killedResumed, []byte(got), 0o644); err != nil {
					t.Fatal(err)
				}
				return
			}
			if got != string(want) {
				t.Errorf("the run's checkpoints and events in %s:\n%s\nwant (%s):\n%s", name, got, killedResumed, want)
			}
		})
	}
}

// killAndResume starts a copy of testdata/three.yaml on r, stops it once
// node b has finished, resumes it from its record in j and returns the
// transcript of what j holds of it.
func killAndResume(t *testing.T, r *durable.Runner, j journal.Journal) string {
	t.Helper()
	p := loadCopy(t, "three.yaml")
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	r.Sink = sinkFunc(func(e runtime.Event) {
		if e.Type == runtime.EventNodeFinished && e.Node == "b" {
			cancel()
		}
	})
	res, err := r.Start(ctx, p, nil)
	mustStatus(t, "start", res, err, runtime.StatusStopped)
	r.Sink = nil

	bg := context.Background()
	prev, err := j.Run(bg, res.RunID)
	if err != nil || prev.Status != runtime.StatusStopped {
		t.Fatalf("the journal has the stopped run as %+v (%v)", prev, err)
	}
	pr, err := r.PrepareContinue(bg, prev, p, "", nil)
	if err != nil {
		t.Fatal(err)
	}
	again := pr.Run(bg)
	mustStatus(t, "resume", again, nil, runtime.StatusCompleted)
	if !reflect.DeepEqual(again.Outputs, allSaid) {
		t.Errorf("outputs %v, want %v", again.Outputs, allSaid)
	}
	cps, err := j.Checkpoints(bg, res.RunID, 0)
	if err != nil {
		t.Fatal(err)
	}
	evs, err := j.Events(bg, res.RunID)
	if err != nil {
		t.Fatal(err)
	}
	return transcript(t, cps, evs)
}

// transcript is a run's checkpoints and then its events, one JSON line
// each, without what differs from one run to the next: times, the run's
// id, durations, the fake model endpoint's port.
func transcript(t *testing.T, cps []*runtime.Checkpoint, evs []runtime.Event) string {
	t.Helper()
	var b strings.Builder
	line := func(v any) {
		data, err := json.Marshal(v)
		if err != nil {
			t.Fatal(err)
		}
		b.Write(data)
		b.WriteByte('\n')
	}
	for _, cp := range cps {
		line(cp)
	}
	for _, e := range evs {
		e.Run, e.Time, e.DurationMS = "", time.Time{}, 0
		if e.Turn != nil {
			turn := *e.Turn
			turn.LatencyMS, turn.Endpoint = 0, ""
			e.Turn = &turn
		}
		line(e)
	}
	return b.String()
}

// A resume that cannot go on once it holds the run (here its changed
// spec cannot be recorded) releases the run as it found it: the next
// resume in this process goes on.
func TestAResumeThatCannotGoOnReleasesTheRun(t *testing.T) {
	m, r, p, res := stoppedRun(t, "b")
	failing := &specFails{Journal: sqlitejournal.New(r.Store)}
	r.Journal = failing
	r.Spec.MaxLoops = 5
	prev, err := failing.Run(context.Background(), res.RunID)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := r.PrepareContinue(context.Background(), prev, p, "", nil); !errors.Is(err, errSpec) {
		t.Fatalf("resume with the spec failing: %v, want %v", err, errSpec)
	}
	if rec, err := r.Store.Run(context.Background(), res.RunID); err != nil || rec.Status != runtime.StatusStopped || rec.Reason != prev.Reason {
		t.Errorf("after the failed resume the store has the run as %+v (%v), want it stopped as before", rec, err)
	}
	failing.ok = true
	again, err := r.Continue(context.Background(), mustRun(t, r, res.RunID), p, "", nil)
	mustStatus(t, "the next resume", again, err, runtime.StatusCompleted)
	if got := m.prompts(); got["say a"] != 1 || got["say c"] != 1 {
		t.Errorf("the model was asked %v, want a once and c once", got)
	}
}

var errSpec = errors.New("the spec cannot be recorded")

// specFails is a journal whose SetSpec fails until ok.
type specFails struct {
	journal.Journal
	ok bool
}

func (j *specFails) SetSpec(ctx context.Context, id string, spec journal.Spec) error {
	if !j.ok {
		return errSpec
	}
	return j.Journal.SetSpec(ctx, id, spec)
}

func mustRun(t *testing.T, r *durable.Runner, id string) *store.Run {
	t.Helper()
	rec, err := r.Store.Run(context.Background(), id)
	if err != nil {
		t.Fatal(err)
	}
	return rec
}
