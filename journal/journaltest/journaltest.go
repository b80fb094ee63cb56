// Package journaltest is the suite every journal.Journal passes, so that
// a run is recorded and resumed alike in each.
package journaltest

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"reflect"
	"sync"
	"testing"
	"time"

	"github.com/flowrun/flowrun/journal"
	"github.com/flowrun/flowrun/runtime"
)

// Run runs the suite against the journals open returns, a fresh one for
// each test.
func Run(t *testing.T, open func(t *testing.T) journal.Journal) {
	tests := []struct {
		name string
		f    func(t *testing.T, j journal.Journal)
	}{
		{"WriteReadBack", writeReadBack},
		{"WholeRecord", wholeRecord},
		{"UnknownRun", unknownRun},
		{"ResumeFromEveryCheckpoint", resumeFromEveryCheckpoint},
		{"KillMidWrite", killMidWrite},
		{"ConcurrentResumers", concurrentResumers},
		{"Fork", fork},
		{"SetSpec", setSpec},
		{"Stop", stop},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) { tc.f(t, open(t)) })
	}
}

func must(t *testing.T, err error) {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
}

// checkpoint is the i-th of a run's test checkpoints, odd ones in-flight
// records.
func checkpoint(i int) *runtime.Checkpoint {
	if i%2 == 1 {
		return &runtime.Checkpoint{Path: fmt.Sprintf("n%d", i) + runtime.InFlightSuffix,
			InFlight: &runtime.InFlight{Key: fmt.Sprintf("n%d#call", i), Value: []byte(`{"answer":42}`)}}
	}
	return &runtime.Checkpoint{Path: fmt.Sprintf("n%d", i), Output: fmt.Sprintf("out %d", i),
		State: map[string]any{"i": float64(i)}, Steps: int64(i + 1)}
}

// saved creates run id and saves n checkpoints in it.
func saved(t *testing.T, j journal.Journal, id string, n int) []*runtime.Checkpoint {
	t.Helper()
	ctx := context.Background()
	must(t, j.Create(ctx, journal.Run{ID: id, Pipeline: "p.yaml", Inputs: map[string]any{"q": "why"}}))
	var cps []*runtime.Checkpoint
	for i := range n {
		cp := checkpoint(i)
		must(t, j.Save(ctx, id, cp))
		cps = append(cps, cp)
	}
	return cps
}

func sameCheckpoints(t *testing.T, what string, got, want []*runtime.Checkpoint) {
	t.Helper()
	if len(got) != len(want) {
		t.Fatalf("%s: %d checkpoints, want %d", what, len(got), len(want))
	}
	// Compared as stored: a journal may read an empty map back for nil.
	for i := range want {
		g, w := canonical(t, got[i]), canonical(t, want[i])
		if g != w || got[i].Seq != want[i].Seq {
			t.Errorf("%s: checkpoint %d is %s, want %s", what, i, g, w)
		}
	}
}

// canonical is cp's JSON with empty maps left out.
func canonical(t *testing.T, cp *runtime.Checkpoint) string {
	t.Helper()
	c := *cp
	if len(c.State) == 0 {
		c.State = nil
	}
	if len(c.Nodes) == 0 {
		c.Nodes = nil
	}
	if len(c.Memories) == 0 {
		c.Memories = nil
	}
	b, err := json.Marshal(c)
	must(t, err)
	return string(b)
}

func writeReadBack(t *testing.T, j journal.Journal) {
	ctx := context.Background()
	cps := saved(t, j, "r1", 4)
	for i, cp := range cps {
		if cp.Seq != int64(i+1) {
			t.Errorf("checkpoint %d numbered %d, want %d", i, cp.Seq, i+1)
		}
	}
	got, err := j.Checkpoints(ctx, "r1", 0)
	must(t, err)
	sameCheckpoints(t, "read back", got, cps)
	if in := journal.InFlight(got); len(in) != 2 || in[0].Path != cps[1].Path || in[1].Path != cps[3].Path {
		t.Errorf("in-flight records %+v, want checkpoints 2 and 4", in)
	}

	at := time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
	evs := []runtime.Event{{Type: "node_start", Run: "r1", Time: at, Path: "n0"}, {Type: "node_end", Run: "r1", Time: at, Path: "n0", Output: "out 0"}}
	for _, e := range evs {
		must(t, j.Event(ctx, "r1", e))
	}
	gotEvs, err := j.Events(ctx, "r1")
	must(t, err)
	if !reflect.DeepEqual(gotEvs, evs) {
		t.Errorf("events read back %+v, want %+v", gotEvs, evs)
	}

	r, err := j.Run(ctx, "r1")
	must(t, err)
	if r.ID != "r1" || r.Pipeline != "p.yaml" || r.Inputs["q"] != "why" || r.Status != runtime.StatusRunning {
		t.Errorf("run record %+v, want r1 of p.yaml, input q=why, running", r)
	}
	must(t, j.Finish(ctx, "r1", journal.Ending{Status: runtime.StatusCompleted}))
	if r, err := j.Run(ctx, "r1"); err != nil || r.Status != runtime.StatusCompleted {
		t.Errorf("after Finish the run is %+v (%v), want completed", r, err)
	}
	if other, err := j.Checkpoints(ctx, "r2", 0); err != nil || len(other) != 0 {
		t.Errorf("a run with none has checkpoints %+v (%v), want none", other, err)
	}
}

// Every field of a run's record, and of how it ended, reads back as it
// was written: a resume elsewhere goes on from the record alone.
func wholeRecord(t *testing.T, j journal.Journal) {
	ctx := context.Background()
	// The runs it names exist: a journal may hold it to that.
	for _, id := range []string{"r0", "item-run"} {
		must(t, j.Create(ctx, journal.Run{ID: id, Pipeline: "p.yaml"}))
		must(t, j.Finish(ctx, id, journal.Ending{Status: runtime.StatusCompleted}))
	}
	want := journal.Run{ID: "r1", Pipeline: "p.yaml", PipelineAbs: "/pipelines/p.yaml", PipelineName: "p",
		PipelineHash: "sha256:abc", PipelineSrc: "name: p\n", PipelineFiles: map[string]string{"p.yaml": "name: p\n", "prompts/a.md": "Hi"},
		Inputs: map[string]any{"q": "why", "deep": map[string]any{"list": []any{"a", true}}}, RemoteInputs: true,
		Spec:      journal.Spec{Models: map[string]string{"default": "gpt-4.1"}, Auto: true, MaxLoops: 3, Replay: "c.yaml"},
		ParentRun: "r0", ParentSeq: 4, ChildOf: "item-run"}
	must(t, j.Create(ctx, want))
	want.Status = runtime.StatusRunning
	got, err := j.Run(ctx, "r1")
	must(t, err)
	if !reflect.DeepEqual(got, want) {
		t.Errorf("run record read back\n%+v\nwant\n%+v", got, want)
	}
	want.Ending = journal.Ending{Status: runtime.StatusWaiting, Outputs: map[string]any{"answer": "because"}, Error: "boom",
		Reason: "asked", Steps: 7, CostUSD: 0.25, Tokens: 1200,
		Pending: &runtime.Question{Path: "n1", Node: "n1", Kind: runtime.QuestionAsk, Text: "Why?"}}
	must(t, j.Finish(ctx, "r1", want.Ending))
	got, err = j.Run(ctx, "r1")
	must(t, err)
	if !reflect.DeepEqual(got, want) {
		t.Errorf("finished run record read back\n%+v\nwant\n%+v", got, want)
	}
}

func unknownRun(t *testing.T, j journal.Journal) {
	ctx := context.Background()
	if _, err := j.Run(ctx, "nope"); !errors.Is(err, journal.ErrNotFound) {
		t.Errorf("Run of an unknown run: %v, want ErrNotFound", err)
	}
	if err := j.Claim(ctx, "nope"); !errors.Is(err, journal.ErrNotFound) {
		t.Errorf("Claim of an unknown run: %v, want ErrNotFound", err)
	}
	if err := j.Save(ctx, "nope", checkpoint(0)); err == nil {
		t.Error("Save to a run no one created or claimed succeeded")
	}
}

// A resume restores the checkpoints up to where it resumes from, and the
// checkpoints it saves are numbered after all the run has.
func resumeFromEveryCheckpoint(t *testing.T, j journal.Journal) {
	ctx := context.Background()
	cps := saved(t, j, "r1", 5)
	must(t, j.Finish(ctx, "r1", journal.Ending{Status: runtime.StatusInterrupted}))
	for k := 1; k <= len(cps); k++ {
		got, err := j.Checkpoints(ctx, "r1", int64(k))
		must(t, err)
		sameCheckpoints(t, fmt.Sprintf("resume from %d", k), got, cps[:k])
	}
	must(t, j.Claim(ctx, "r1"))
	next := checkpoint(10)
	must(t, j.Save(ctx, "r1", next))
	if next.Seq != int64(len(cps)+1) {
		t.Errorf("the resume's first checkpoint is numbered %d, want %d", next.Seq, len(cps)+1)
	}
	got, err := j.Checkpoints(ctx, "r1", 0)
	must(t, err)
	sameCheckpoints(t, "after the resume", got, append(cps, next))
}

// A write cut off (its context cancelled as it starts, or while it waits)
// leaves the run readable with every whole checkpoint before it, and the
// cut one either whole or absent.
func killMidWrite(t *testing.T, j journal.Journal) {
	cps := saved(t, j, "r1", 2)
	for i, wait := range []time.Duration{0, time.Microsecond, 50 * time.Microsecond} {
		ctx, cancel := context.WithTimeout(context.Background(), wait)
		if wait == 0 {
			cancel()
		}
		cut := checkpoint(2 + i)
		err := j.Save(ctx, "r1", cut)
		cancel()
		got, rerr := j.Checkpoints(context.Background(), "r1", 0)
		must(t, rerr)
		switch {
		case len(got) == len(cps):
			if err == nil {
				t.Errorf("cut write %d: Save reported success, the checkpoint is not stored", i)
			}
		case len(got) == len(cps)+1:
			cps = append(cps, cut)
		default:
			t.Fatalf("cut write %d: %d checkpoints stored, want %d or %d", i, len(got), len(cps), len(cps)+1)
		}
		sameCheckpoints(t, fmt.Sprintf("after cut write %d", i), got, cps)
	}
	ctx := context.Background()
	must(t, j.Finish(ctx, "r1", journal.Ending{Status: runtime.StatusInterrupted}))
	must(t, j.Claim(ctx, "r1"))
	last := checkpoint(9)
	must(t, j.Save(ctx, "r1", last))
	got, err := j.Checkpoints(ctx, "r1", 0)
	must(t, err)
	sameCheckpoints(t, "resumed after the cut writes", got, append(cps, last))
}

// Of two resumers of one interrupted run exactly one wins; the other is
// told the run is held. A running run cannot be claimed at all.
func concurrentResumers(t *testing.T, j journal.Journal) {
	ctx := context.Background()
	saved(t, j, "r1", 1)
	if err := j.Claim(ctx, "r1"); !errors.Is(err, journal.ErrClaimed) {
		t.Fatalf("Claim of a running run: %v, want ErrClaimed", err)
	}
	must(t, j.Finish(ctx, "r1", journal.Ending{Status: runtime.StatusInterrupted}))
	for round := range 5 {
		errs := make([]error, 2)
		var wg sync.WaitGroup
		start := make(chan struct{})
		for i := range errs {
			wg.Go(func() {
				<-start
				errs[i] = j.Claim(ctx, "r1")
			})
		}
		close(start)
		wg.Wait()
		won := 0
		for _, err := range errs {
			switch {
			case err == nil:
				won++
			case !errors.Is(err, journal.ErrClaimed):
				t.Errorf("round %d: the losing resumer got %v, want ErrClaimed", round, err)
			}
		}
		if won != 1 {
			t.Fatalf("round %d: %d resumers won (%v), want exactly one", round, won, errs)
		}
		must(t, j.Finish(ctx, "r1", journal.Ending{Status: runtime.StatusInterrupted}))
	}
}

// A fork goes on from copies of its parent's checkpoints up to the one
// it forks from, numbers its own after them, and leaves the parent as it
// was; a fork from 0 has none.
func fork(t *testing.T, j journal.Journal) {
	ctx := context.Background()
	cps := saved(t, j, "r1", 4)
	must(t, j.Finish(ctx, "r1", journal.Ending{Status: runtime.StatusCompleted}))
	must(t, j.Fork(ctx, "r1", 2, journal.Run{ID: "f1", Pipeline: "p.yaml", Spec: journal.Spec{Auto: true}}))
	got, err := j.Checkpoints(ctx, "f1", 0)
	must(t, err)
	sameCheckpoints(t, "the fork's", got, cps[:2])
	next := checkpoint(7)
	must(t, j.Save(ctx, "f1", next))
	if next.Seq != 3 {
		t.Errorf("the fork's first checkpoint is numbered %d, want 3", next.Seq)
	}
	r, err := j.Run(ctx, "f1")
	must(t, err)
	if r.ParentRun != "r1" || r.ParentSeq != 2 || r.Inputs["q"] != "why" || !r.Spec.Auto || r.Status != runtime.StatusRunning {
		t.Errorf("the fork's record %+v, want a running child of r1 at 2 with its inputs and its own spec", r)
	}
	must(t, j.Finish(ctx, "f1", journal.Ending{Status: runtime.StatusCompleted}))
	parent, err := j.Checkpoints(ctx, "r1", 0)
	must(t, err)
	sameCheckpoints(t, "the parent's after the fork", parent, cps)

	must(t, j.Fork(ctx, "r1", 0, journal.Run{ID: "f0", Pipeline: "p.yaml", Inputs: map[string]any{"q": "how"}}))
	if got, err := j.Checkpoints(ctx, "f0", 0); err != nil || len(got) != 0 {
		t.Errorf("a fork from 0 has checkpoints %+v (%v), want none", got, err)
	}
	if r, err := j.Run(ctx, "f0"); err != nil || r.Inputs["q"] != "how" {
		t.Errorf("a fork given inputs has %+v (%v), want its own", r.Inputs, err)
	}
	if err := j.Fork(ctx, "nope", 0, journal.Run{ID: "f2", Pipeline: "p.yaml"}); !errors.Is(err, journal.ErrNotFound) {
		t.Errorf("Fork of an unknown run: %v, want ErrNotFound", err)
	}
}

func setSpec(t *testing.T, j journal.Journal) {
	ctx := context.Background()
	saved(t, j, "r1", 1)
	spec := journal.Spec{Models: map[string]string{"default": "gpt-4.1"}, MaxLoops: 2}
	must(t, j.SetSpec(ctx, "r1", spec))
	if r, err := j.Run(ctx, "r1"); err != nil || !reflect.DeepEqual(r.Spec, spec) {
		t.Errorf("the spec read back is %+v (%v), want %+v", r.Spec, err, spec)
	}
}

func stop(t *testing.T, j journal.Journal) {
	ctx := context.Background()
	saved(t, j, "r1", 1)
	if reason, err := j.StopRequested(ctx, "r1"); err != nil || reason != "" {
		t.Errorf("stop request before any: %q (%v), want none", reason, err)
	}
	must(t, j.RequestStop(ctx, "r1", "too slow"))
	if reason, err := j.StopRequested(ctx, "r1"); err != nil || reason != "too slow" {
		t.Errorf("stop request %q (%v), want %q", reason, err, "too slow")
	}
	must(t, j.Finish(ctx, "r1", journal.Ending{Status: runtime.StatusStopped}))
	if err := j.RequestStop(ctx, "r1", "again"); err == nil {
		t.Error("a stop asked of a stopped run was accepted")
	}
	must(t, j.Claim(ctx, "r1"))
	if reason, err := j.StopRequested(ctx, "r1"); err != nil || reason != "" {
		t.Errorf("after a claim the stop request is %q (%v), want none", reason, err)
	}
}

// RunLog runs the suite of a journal.Log alone (a run whose record is
// kept elsewhere) against the logs open returns, a fresh one for each
// test. The run numbers its checkpoints; the log keeps the numbers.
func RunLog(t *testing.T, open func(t *testing.T) journal.Log) {
	tests := []struct {
		name string
		f    func(t *testing.T, l journal.Log)
	}{
		{"WriteReadBack", logWriteReadBack},
		{"SavedTwiceStoredOnce", logSavedTwice},
		{"ResumeFromEveryCheckpoint", logResumeFromEveryCheckpoint},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) { tc.f(t, open(t)) })
	}
}

// logged saves n checkpoints of run id, numbered 1 to n as a run numbers
// them.
func logged(t *testing.T, l journal.Log, id string, n int) []*runtime.Checkpoint {
	t.Helper()
	var cps []*runtime.Checkpoint
	for i := range n {
		cp := checkpoint(i)
		cp.Seq = int64(i + 1)
		must(t, l.Save(context.Background(), id, cp))
		cps = append(cps, cp)
	}
	return cps
}

func logWriteReadBack(t *testing.T, l journal.Log) {
	ctx := context.Background()
	cps := logged(t, l, "r1", 4)
	got, err := l.Checkpoints(ctx, "r1", 0)
	must(t, err)
	sameCheckpoints(t, "read back", got, cps)
	if in := journal.InFlight(got); len(in) != 2 {
		t.Errorf("in-flight records %+v, want checkpoints 2 and 4", in)
	}
	at := time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
	evs := []runtime.Event{{Type: "node_start", Run: "r1", Time: at, Path: "n0"}, {Type: "node_end", Run: "r1", Time: at, Path: "n0", Output: "out 0"}}
	for _, e := range evs {
		must(t, l.Event(ctx, "r1", e))
	}
	must(t, l.Flush(ctx, "r1"))
	gotEvs, err := l.Events(ctx, "r1")
	must(t, err)
	if !reflect.DeepEqual(gotEvs, evs) {
		t.Errorf("events read back %+v, want %+v", gotEvs, evs)
	}
	if other, err := l.Checkpoints(ctx, "r2", 0); err != nil || len(other) != 0 {
		t.Errorf("a run with none has checkpoints %+v (%v), want none", other, err)
	}
}

// A checkpoint saved again under its number (a publish retried after its
// acknowledgement was lost, a second attempt redoing the first's last
// step) is read back once.
func logSavedTwice(t *testing.T, l journal.Log) {
	ctx := context.Background()
	cps := logged(t, l, "r1", 3)
	again := checkpoint(2)
	again.Seq = 3
	must(t, l.Save(ctx, "r1", again))
	next := checkpoint(3)
	next.Seq = 4
	must(t, l.Save(ctx, "r1", next))
	got, err := l.Checkpoints(ctx, "r1", 0)
	must(t, err)
	sameCheckpoints(t, "after a checkpoint saved twice", got, append(cps, next))
}

// A resume from checkpoint k restores the first k; the run then saves
// after all the log has.
func logResumeFromEveryCheckpoint(t *testing.T, l journal.Log) {
	ctx := context.Background()
	cps := logged(t, l, "r1", 5)
	for k := 1; k <= len(cps); k++ {
		got, err := l.Checkpoints(ctx, "r1", int64(k))
		must(t, err)
		sameCheckpoints(t, fmt.Sprintf("resume from %d", k), got, cps[:k])
	}
}
