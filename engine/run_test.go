package engine

import (
	"context"
	"os"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/flowrun/flowrun/dsl"
	"github.com/flowrun/flowrun/runtime"
)

// heldHuman answers every question as auto does, once release is closed;
// until then it holds the run at its first question, as a person at a
// prompt does, and a stop ends the wait.
type heldHuman struct{ release chan struct{} }

func (h heldHuman) Answer(ctx context.Context, q runtime.Question) (any, bool, error) {
	select {
	case <-h.release:
		a, ok := runtime.AutoAnswer(q)
		return a, ok, nil
	case <-ctx.Done():
		return nil, false, context.Cause(ctx)
	}
}

// notDone fails the test if r has ended.
func notDone(t *testing.T, r *Run) {
	t.Helper()
	select {
	case <-r.Done():
		t.Fatalf("run %s ended while held: %+v", r.ID(), r.Wait())
	case <-time.After(50 * time.Millisecond):
	}
}

// Start hands back the run before its first node has run: its id is in
// the store as running while it is held at a question, and Wait gives
// its end under the same id.
func TestStartReturnsTheRunAtOnce(t *testing.T) {
	e, st := newEngine(t, nil, nil)
	ctx := context.Background()
	h := heldHuman{release: make(chan struct{})}
	r, err := e.Start(ctx, loadTestdata(t, "count.yaml"), nil, RunOptions{Human: h})
	if err != nil {
		t.Fatal(err)
	}
	notDone(t, r)
	rec, err := st.Run(ctx, r.ID())
	if err != nil || rec.Status != runtime.StatusRunning {
		t.Fatalf("the held run %s in the store: %v %+v", r.ID(), err, rec)
	}
	close(h.release)
	res := r.Wait()
	if res.RunID != r.ID() || res.Status != runtime.StatusCompleted || res.Outputs["who"] != "nobody" {
		t.Fatalf("after the release: %+v", res)
	}
}

// Stop ends a run at once, stopped and resumable, with the reason given;
// its resume, also a handle, goes on to the end.
func TestStopEndsTheRunStoppedAndResumable(t *testing.T) {
	e, _ := newEngine(t, nil, nil)
	ctx := context.Background()
	r, err := e.Start(ctx, loadTestdata(t, "count.yaml"), nil, RunOptions{Human: heldHuman{release: make(chan struct{})}})
	if err != nil {
		t.Fatal(err)
	}
	notDone(t, r)
	r.Stop("enough for today")
	res := r.Wait()
	if res.Status != runtime.StatusStopped || !strings.Contains(res.Reason, "enough for today") {
		t.Fatalf("after Stop: %+v", res)
	}
	again, err := e.Resume(ctx, r.ID(), ResumeOptions{RunOptions: RunOptions{Human: autoHuman{}}})
	if err != nil {
		t.Fatal(err)
	}
	if res := again.Wait(); res.RunID != r.ID() || res.Status != runtime.StatusCompleted {
		t.Fatalf("the resume: %+v", res)
	}
}

// A run that ends waiting is answered through its handle, which hands
// back the run as it goes on, to its next question and then its end.
func TestAnswerGoesOnFromTheHandle(t *testing.T) {
	e, _ := newEngine(t, nil, nil)
	ctx := context.Background()
	r, err := e.Start(ctx, loadTestdata(t, "count.yaml"), nil, RunOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if res := r.Wait(); res.Status != runtime.StatusWaiting || res.Pending.Path != "name" {
		t.Fatalf("start: %+v", res)
	}
	if _, err := r.Answer(ctx, map[string]any{"who": 7}, ResumeOptions{}); err == nil {
		t.Fatal("an answer that does not fit the question was taken")
	}
	r, err = r.Answer(ctx, map[string]any{"who": "ann"}, ResumeOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if res := r.Wait(); res.Status != runtime.StatusWaiting || res.Pending.Kind != runtime.QuestionConfirm {
		t.Fatalf("after the answer: %+v", res)
	}
	if r, err = r.Answer(ctx, true, ResumeOptions{}); err != nil {
		t.Fatal(err)
	}
	if res := r.Wait(); res.Status != runtime.StatusCompleted || res.Outputs["who"] != "ann" || res.Outputs["n"] != 500 {
		t.Fatalf("after yes: %+v", res)
	}
}

// Close waits for the runs the engine started: what they write (their
// record, cassettes, traces) is written before the store closes.
func TestCloseWaitsForItsRuns(t *testing.T) {
	e, _ := newEngine(t, nil, nil)
	h := heldHuman{release: make(chan struct{})}
	r, err := e.Start(context.Background(), loadTestdata(t, "count.yaml"), nil, RunOptions{Human: h})
	if err != nil {
		t.Fatal(err)
	}
	var closed atomic.Bool
	go func() {
		e.Close()
		closed.Store(true)
	}()
	notDone(t, r)
	if closed.Load() {
		t.Fatal("Close returned while a run it started was running")
	}
	close(h.release)
	if res := r.Wait(); res.Status != runtime.StatusCompleted {
		t.Fatalf("%+v", res)
	}
}

// One pass along the run path: the run records the pipeline text its
// load read, not the file as it is by the time the run starts, and the
// secrets among its env: names are read once to register them (and once
// more for the run's env).
func TestOnePassAlongTheRunPath(t *testing.T) {
	var lookups atomic.Int32
	e, st := newEngine(t, nil, nil)
	e.o.LookupEnv = func(name string) (string, bool) {
		if name == "SERVICE_TOKEN" {
			lookups.Add(1)
			return "svc-one-pass-0a1b2c3d4e5f6789", true
		}
		return "", false
	}
	p := load(t, "secretive.yaml", secretPipeline)
	if err := os.WriteFile(p.Path, []byte(strings.ReplaceAll(secretPipeline, "token ", "other ")), 0o644); err != nil {
		t.Fatal(err)
	}
	res, err := result(e.Start(context.Background(), p, nil, RunOptions{}))
	if err != nil || res.Status != runtime.StatusCompleted {
		t.Fatalf("%v %+v", err, res)
	}
	rec, err := st.Run(context.Background(), res.RunID)
	if err != nil {
		t.Fatal(err)
	}
	if rec.PipelineSrc != secretPipeline {
		t.Fatalf("the run recorded the pipeline file as it is after the load:\n%s", rec.PipelineSrc)
	}
	if n := lookups.Load(); n != 2 {
		t.Fatalf("SERVICE_TOKEN was read %d times, want 2: once to register it as a secret, once for env", n)
	}
}

// countedSet is the set kind, counting the nodes it runs.
type countedSet struct {
	runtime.Executor
	ran *atomic.Int32
}

func (c countedSet) Execute(ctx context.Context, s *runtime.Scope, n *dsl.Node) (runtime.Outcome, error) {
	c.ran.Add(1)
	return c.Executor.Execute(ctx, s, n)
}

// Doubles.Kinds changes the node kinds the engine made for a run: a kind
// answered its own way (cmd/bench's instant model) runs in a run the
// engine started and recorded.
func TestDoublesChangeTheNodeKinds(t *testing.T) {
	var ran atomic.Int32
	e, st := newEngine(t, nil, map[string]string{"SERVICE_TOKEN": "svc-kinds-0f1e2d3c4b5a6978"})
	counted := &Doubles{Kinds: func(kinds runtime.Registry) runtime.Registry {
		kinds[dsl.KindSet] = countedSet{Executor: kinds[dsl.KindSet], ran: &ran}
		return kinds
	}}
	res, err := result(e.Start(context.Background(), load(t, "secretive.yaml", secretPipeline), nil, RunOptions{Doubles: counted}))
	if err != nil || res.Status != runtime.StatusCompleted {
		t.Fatalf("%v %+v", err, res)
	}
	if ran.Load() != 1 {
		t.Fatalf("the given kinds ran %d set nodes, want 1", ran.Load())
	}
	if rec, err := st.Run(context.Background(), res.RunID); err != nil || rec.Status != runtime.StatusCompleted {
		t.Fatalf("the run's record: %v %+v", err, rec)
	}
}
