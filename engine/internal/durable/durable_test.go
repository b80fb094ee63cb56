package durable_test

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/flowrun/flowrun/dsl"
	"github.com/flowrun/flowrun/engine/internal/durable"
	"github.com/flowrun/flowrun/llm"
	"github.com/flowrun/flowrun/llm/llmtest"
	"github.com/flowrun/flowrun/nodes"
	"github.com/flowrun/flowrun/runtime"
	"github.com/flowrun/flowrun/store"
)

// model is the fake OpenAI server the llm nodes of testdata/three.yaml
// talk to over HTTP: it answers "say X" with "X!" and counts the prompts
// it was sent, so that a test sees which nodes ran.
type model struct {
	srv *llmtest.Server
	mu  sync.Mutex
	// asked counts the requests per prompt.
	asked map[string]int
	// hold, when set before the run, is called with each request's
	// prompt; its reply, if any, replaces the usual one.
	hold func(prompt string) *llmtest.Reply
}

func newModel(t *testing.T) *model {
	m := &model{srv: llmtest.New(t), asked: map[string]int{}}
	m.srv.Handle(func(r llmtest.Request) llmtest.Reply {
		prompt := lastUserText(r)
		m.mu.Lock()
		m.asked[prompt]++
		hold := m.hold
		m.mu.Unlock()
		if hold != nil {
			if reply := hold(prompt); reply != nil {
				return *reply
			}
		}
		return llmtest.Text(strings.TrimPrefix(prompt, "say ") + "!")
	})
	return m
}

// prompts is how often each prompt was sent.
func (m *model) prompts() map[string]int {
	m.mu.Lock()
	defer m.mu.Unlock()
	out := make(map[string]int, len(m.asked))
	for k, v := range m.asked {
		out[k] = v
	}
	return out
}

func lastUserText(r llmtest.Request) string {
	msgs, _ := r.Body["messages"].([]any)
	for i := len(msgs) - 1; i >= 0; i-- {
		m, _ := msgs[i].(map[string]any)
		if m["role"] != "user" {
			continue
		}
		if s, ok := m["content"].(string); ok {
			return s
		}
		parts, _ := m["content"].([]any)
		for _, p := range parts {
			if part, _ := p.(map[string]any); part["type"] == "text" {
				s, _ := part["text"].(string)
				return s
			}
		}
	}
	return ""
}

// sinkFunc receives a run's events as they happen.
type sinkFunc func(runtime.Event)

func (f sinkFunc) Event(e runtime.Event) { f(e) }

// newRunner is a Runner on a new SQLite store in a temporary directory,
// with the node kinds of this build and a model client talking to m.
func newRunner(t *testing.T, m *model) *durable.Runner {
	t.Helper()
	db := filepath.Join(t.TempDir(), "runs.db")
	st, err := store.Open(db)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	client := llm.New(llm.Options{Env: m.srv.Env("sk-durable-test"), BaseBackoff: time.Millisecond})
	return &durable.Runner{Store: st, Kinds: nodes.Kinds(nodes.Services{LLM: client})}
}

// loadCopy copies testdata/NAME into a temporary directory (so that a
// test may change it) and loads it.
func loadCopy(t *testing.T, name string) *dsl.Pipeline {
	t.Helper()
	src, err := os.ReadFile(filepath.Join("testdata", name))
	if err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(t.TempDir(), name)
	if err := os.WriteFile(path, src, 0o644); err != nil {
		t.Fatal(err)
	}
	p, ds := dsl.Load(path)
	if p == nil {
		t.Fatalf("load %s:\n%s", name, ds)
	}
	return p
}

// stoppedRun starts a copy of testdata/three.yaml and stops it once node
// id has finished, as Ctrl-C would.
func stoppedRun(t *testing.T, id string) (*model, *durable.Runner, *dsl.Pipeline, *runtime.Result) {
	t.Helper()
	m := newModel(t)
	r := newRunner(t, m)
	p := loadCopy(t, "three.yaml")
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	r.Sink = sinkFunc(func(e runtime.Event) {
		if e.Type == runtime.EventNodeFinished && e.Node == id {
			cancel()
		}
	})
	res, err := r.Start(ctx, p, nil)
	mustStatus(t, "start", res, err, runtime.StatusStopped)
	r.Sink = nil
	return m, r, p, res
}

// eventsOf lists the store's events of run id of one type, as node ids.
func eventsOf(t *testing.T, st *store.Store, id, typ string) []string {
	t.Helper()
	evs, err := st.Events(context.Background(), id)
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, e := range evs {
		if e.Type == typ {
			out = append(out, e.Node)
		}
	}
	return out
}

func mustStatus(t *testing.T, what string, res *runtime.Result, err error, status runtime.Status) {
	t.Helper()
	if err != nil {
		t.Fatalf("%s: %v", what, err)
	}
	if res.Status != status {
		t.Fatalf("%s: status %s, want %s; err %v, reason %q", what, res.Status, status, res.Err, res.Reason)
	}
}

var allSaid = map[string]any{"said": []any{"a!", "b!", "c!"}}

// A run stopped after its second node resumes from its checkpoints: the
// two finished nodes are restored (no model call again), the third runs,
// and the run completes with every node's output.
func TestResumeAfterStopRunsOnlyWhatIsLeft(t *testing.T) {
	m, r, _, res := stoppedRun(t, "b")
	if got := m.prompts(); !reflect.DeepEqual(got, map[string]int{"say a": 1, "say b": 1}) {
		t.Fatalf("before the stop the model was asked %v", got)
	}
	rec, err := r.Store.Run(context.Background(), res.RunID)
	if err != nil || rec.Status != runtime.StatusStopped {
		t.Fatalf("the store has the stopped run as %+v (%v)", rec, err)
	}

	again, err := r.Resume(context.Background(), res.RunID, durable.ResumeOptions{})
	mustStatus(t, "resume", again, err, runtime.StatusCompleted)
	if again.RunID != res.RunID {
		t.Errorf("the resume ran as %s, not as the run %s", again.RunID, res.RunID)
	}
	if !reflect.DeepEqual(again.Outputs, allSaid) {
		t.Errorf("outputs %v, want %v", again.Outputs, allSaid)
	}
	if got := m.prompts(); !reflect.DeepEqual(got, map[string]int{"say a": 1, "say b": 1, "say c": 1}) {
		t.Errorf("over both attempts the model was asked %v, want each prompt once", got)
	}
	if got := eventsOf(t, r.Store, res.RunID, runtime.EventNodeRestored); !reflect.DeepEqual(got, []string{"a", "b"}) {
		t.Errorf("restored %v, want [a b]", got)
	}
	rec, err = r.Store.Run(context.Background(), res.RunID)
	if err != nil || rec.Status != runtime.StatusCompleted || !reflect.DeepEqual(rec.Outputs, allSaid) {
		t.Errorf("the store has the resumed run as %+v (%v)", rec, err)
	}
}

// A completed run is not resumed (nothing runs, the record is unchanged);
// forking it is the way to run part of it again.
func TestResumeOfCompletedRunIsRefused(t *testing.T) {
	m := newModel(t)
	r := newRunner(t, m)
	res, err := r.Start(context.Background(), loadCopy(t, "three.yaml"), nil)
	mustStatus(t, "start", res, err, runtime.StatusCompleted)
	before := len(eventsOf(t, r.Store, res.RunID, runtime.EventNodeStarted))

	again, err := r.Resume(context.Background(), res.RunID, durable.ResumeOptions{})
	if err == nil || !strings.Contains(err.Error(), "already completed") {
		t.Fatalf("resume of a completed run: %v, %+v; want it refused", err, again)
	}
	if got := m.prompts(); len(got) != 3 || got["say a"] != 1 {
		t.Errorf("the refused resume asked the model: %v", got)
	}
	if after := len(eventsOf(t, r.Store, res.RunID, runtime.EventNodeStarted)); after != before {
		t.Errorf("the refused resume started %d nodes", after-before)
	}
	rec, err := r.Store.Run(context.Background(), res.RunID)
	if err != nil || rec.Status != runtime.StatusCompleted {
		t.Errorf("the run is now %+v (%v)", rec, err)
	}
}

// A fork from a checkpoint number or from a snapshot label is a new run
// that restores the parent's nodes up to that point and runs the rest;
// the parent's record, events and checkpoints stay as they were.
func TestForkLeavesParentUntouched(t *testing.T) {
	for _, from := range []string{"checkpoint", "snapshot"} {
		t.Run(from, func(t *testing.T) {
			ctx := context.Background()
			// The parent stops after a: its last checkpoint is a's, the
			// one a snapshot labels and checkpoint 1.
			m, r, _, parent := stoppedRun(t, "a")
			ref := "1"
			if from == "snapshot" {
				ref = "after-a"
				if _, err := r.Store.Snapshot(ctx, parent.RunID, ref); err != nil {
					t.Fatal(err)
				}
			}
			// Completing the parent first makes a fork the only way back
			// to its checkpoint.
			done, err := r.Resume(ctx, parent.RunID, durable.ResumeOptions{})
			mustStatus(t, "parent's resume", done, err, runtime.StatusCompleted)
			recBefore, err := r.Store.Run(ctx, parent.RunID)
			if err != nil {
				t.Fatal(err)
			}
			evBefore, err := r.Store.Events(ctx, parent.RunID)
			if err != nil {
				t.Fatal(err)
			}
			cpBefore, err := r.Store.Checkpoints(ctx, parent.RunID, 0)
			if err != nil {
				t.Fatal(err)
			}
			asked := m.prompts()

			fork, err := r.Resume(ctx, parent.RunID, durable.ResumeOptions{From: ref})
			mustStatus(t, "fork", fork, err, runtime.StatusCompleted)
			if fork.RunID == parent.RunID {
				t.Fatal("the fork ran as its parent")
			}
			if !reflect.DeepEqual(fork.Outputs, allSaid) {
				t.Errorf("the fork's outputs %v, want %v", fork.Outputs, allSaid)
			}
			now := m.prompts()
			if now["say a"] != asked["say a"] || now["say b"] != asked["say b"]+1 || now["say c"] != asked["say c"]+1 {
				t.Errorf("the fork asked the model %v after %v: want b and c once more, a not again", now, asked)
			}
			if got := eventsOf(t, r.Store, fork.RunID, runtime.EventNodeRestored); !reflect.DeepEqual(got, []string{"a"}) {
				t.Errorf("the fork restored %v, want [a]", got)
			}
			rec, err := r.Store.Run(ctx, fork.RunID)
			if err != nil || rec.ParentRun != parent.RunID || rec.ParentSeq != 1 {
				t.Errorf("the fork's record %+v (%v): want parent %s at checkpoint 1", rec, err, parent.RunID)
			}
			started, err := r.Store.Events(ctx, fork.RunID)
			if err != nil || len(started) == 0 || started[0].Type != runtime.EventRunStarted || started[0].ForkOf != parent.RunID {
				t.Errorf("the fork's first event %+v (%v): want run_started naming its parent", started, err)
			}

			recAfter, err := r.Store.Run(ctx, parent.RunID)
			if err != nil {
				t.Fatal(err)
			}
			if recAfter.Status != recBefore.Status || !reflect.DeepEqual(recAfter.Outputs, recBefore.Outputs) || recAfter.Steps != recBefore.Steps {
				t.Errorf("the parent changed: %+v, was %+v", recAfter, recBefore)
			}
			evAfter, err := r.Store.Events(ctx, parent.RunID)
			if err != nil || len(evAfter) != len(evBefore) {
				t.Errorf("the parent has %d events, had %d (%v)", len(evAfter), len(evBefore), err)
			}
			cpAfter, err := r.Store.Checkpoints(ctx, parent.RunID, 0)
			if err != nil || !reflect.DeepEqual(cpAfter, cpBefore) {
				t.Errorf("the parent's checkpoints changed (%v)", err)
			}
		})
	}
}

// A run whose pipeline file changed since it started is not resumed: the
// error names the run, the file and each changed line. AllowChanged
// resumes it anyway, with the pipeline as it is now.
func TestResumeOfChangedPipeline(t *testing.T) {
	m, r, p, res := stoppedRun(t, "a")
	src, err := os.ReadFile(p.Path)
	if err != nil {
		t.Fatal(err)
	}
	changedSrc := strings.Replace(string(src), "prompt: say c", "prompt: say C", 1)
	if err := os.WriteFile(p.Path, []byte(changedSrc), 0o644); err != nil {
		t.Fatal(err)
	}

	_, err = r.Resume(context.Background(), res.RunID, durable.ResumeOptions{})
	var ce *durable.ChangedError
	if !errors.As(err, &ce) {
		t.Fatalf("resume after a change: %v, want a ChangedError", err)
	}
	if ce.Run != res.RunID || ce.Path != p.Path {
		t.Errorf("the error names run %s and file %s, want %s and %s", ce.Run, ce.Path, res.RunID, p.Path)
	}
	want := `line 13: was "    llm: {prompt: say c}", now "    llm: {prompt: say C}"`
	if !strings.Contains(strings.Join(ce.Changes, "\n"), want) || !strings.Contains(err.Error(), want) {
		t.Errorf("changes %q, error %q: want them to name %s", ce.Changes, err, want)
	}
	if got := m.prompts(); len(got) != 1 {
		t.Errorf("the refused resume asked the model: %v", got)
	}

	again, err := r.Resume(context.Background(), res.RunID, durable.ResumeOptions{AllowChanged: true})
	mustStatus(t, "resume allowing the change", again, err, runtime.StatusCompleted)
	if want := map[string]any{"said": []any{"a!", "b!", "C!"}}; !reflect.DeepEqual(again.Outputs, want) {
		t.Errorf("outputs %v, want %v (the pipeline as it is now)", again.Outputs, want)
	}
}

// A store that fails in the middle of a run (here: closed under it) makes
// the run failed, with the store's error, whatever the runtime said: what
// it did is not all recorded, so it must not look completed. The event
// the caller is shown last says so too.
func TestStoreFailingMidRunFailsTheRun(t *testing.T) {
	m := newModel(t)
	r := newRunner(t, m)
	var mu sync.Mutex
	var last runtime.Event
	r.Sink = sinkFunc(func(e runtime.Event) {
		mu.Lock()
		last = e
		mu.Unlock()
		if e.Type == runtime.EventNodeFinished && e.Node == "a" {
			r.Store.Close()
		}
	})
	res, err := r.Start(context.Background(), loadCopy(t, "three.yaml"), nil)
	if err != nil {
		t.Fatal(err)
	}
	if res.Status != runtime.StatusFailed || res.Err == nil || !strings.Contains(res.Err.Error(), "recording the run: ") {
		t.Fatalf("status %s, err %v: want failed, recording the run", res.Status, res.Err)
	}
	if res.Outputs != nil || res.Pending != nil || res.Reason != "" {
		t.Errorf("a run that failed to be recorded reports outputs %v, pending %v, reason %q", res.Outputs, res.Pending, res.Reason)
	}
	mu.Lock()
	defer mu.Unlock()
	if last.Type != runtime.EventRunFinished || last.Status != runtime.StatusFailed || !strings.Contains(last.Error, "recording the run: ") || last.Outputs != nil {
		t.Errorf("the last event shown: %+v; want run_finished, failed, recording the run", last)
	}
}

// A stop asked through the store (as the web UI or another process asks
// it) stops the run in flight: the node waiting on the model is
// abandoned, the run ends stopped with the reason given, and a resume
// completes it.
func TestStopRequestedThroughTheStore(t *testing.T) {
	m := newModel(t)
	r := newRunner(t, m)
	id := runtime.NewRunID()
	const reason = "asked to stop by a test"
	var asked atomic.Bool
	m.hold = func(prompt string) *llmtest.Reply {
		if prompt != "say b" || !asked.CompareAndSwap(false, true) {
			return nil
		}
		if err := r.Store.RequestStop(context.Background(), id, reason); err != nil {
			t.Errorf("request stop: %v", err)
		}
		// Answer only once the client gave up: the stop must cut the
		// call short.
		return &llmtest.Reply{Delay: 10 * time.Minute}
	}
	// Without the stop the run would end at this deadline, with another
	// reason.
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	res, err := r.StartAs(ctx, id, loadCopy(t, "three.yaml"), nil)
	mustStatus(t, "start", res, err, runtime.StatusStopped)
	if !strings.Contains(res.Reason, reason) {
		t.Errorf("reason %q, want it to contain %q", res.Reason, reason)
	}
	rec, err := r.Store.Run(context.Background(), id)
	if err != nil || rec.Status != runtime.StatusStopped {
		t.Fatalf("the store has the run as %+v (%v)", rec, err)
	}
	again, err := r.Resume(context.Background(), id, durable.ResumeOptions{})
	mustStatus(t, "resume", again, err, runtime.StatusCompleted)
	if !reflect.DeepEqual(again.Outputs, allSaid) {
		t.Errorf("outputs %v, want %v", again.Outputs, allSaid)
	}
}

// checkedSet is the set kind, counting how often a run asks it whether it
// can run a node.
type checkedSet struct {
	runtime.Executor
	checks *atomic.Int32
}

func (c checkedSet) CheckNode(*dsl.Pipeline, *dsl.Node) error {
	c.checks.Add(1)
	return nil
}

// A start and a resume each check the node kinds once, before the run is
// recorded, and the runtime does not check them again.
func TestKindsCheckedOncePerRun(t *testing.T) {
	st, err := store.Open(filepath.Join(t.TempDir(), "runs.db"))
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	var checks atomic.Int32
	kinds := nodes.Kinds(nodes.Services{})
	kinds[dsl.KindSet] = checkedSet{Executor: kinds[dsl.KindSet], checks: &checks}
	path := filepath.Join(t.TempDir(), "one.yaml")
	src := "version: 1\nname: one\nstate: {n: 0}\nnodes:\n  - id: inc\n    set: {n: state.n + 1}\noutputs: {n: state.n}\n"
	if err := os.WriteFile(path, []byte(src), 0o644); err != nil {
		t.Fatal(err)
	}
	p, ds := dsl.Load(path)
	if p == nil {
		t.Fatal(ds)
	}
	ctx := context.Background()
	r := &durable.Runner{Store: st, Kinds: kinds}
	res, err := r.Start(ctx, p, nil)
	mustStatus(t, "start", res, err, runtime.StatusCompleted)
	if n := checks.Swap(0); n != 1 {
		t.Fatalf("a start checked the set node %d times, want once", n)
	}
	fork, err := r.Resume(ctx, res.RunID, durable.ResumeOptions{From: "1"})
	mustStatus(t, "fork", fork, err, runtime.StatusCompleted)
	if n := checks.Load(); n != 1 {
		t.Fatalf("a fork checked the set node %d times, want once", n)
	}
}
