package engine

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/flowrun/flowrun/clock"
	"github.com/flowrun/flowrun/dsl"
	"github.com/flowrun/flowrun/errclass"
	"github.com/flowrun/flowrun/llm"
	"github.com/flowrun/flowrun/runtime"
	"github.com/flowrun/flowrun/runtime/runtimetest"
)

// memoPipeline calls the default model, which has no endpoint in an
// empty environment, then a tool retried with an hour's backoff.
const memoPipeline = `
version: 1
name: memo
models:
  default: {model: gpt-4.1-mini}
state: {n: 0}
nodes:
  - id: first
    llm: {prompt: "first"}
    set: {n: state.n + 1}
  - id: second
    tool: {name: read_file, args: {path: '"x"'}}
    retry: {max_attempts: 3, backoff: 1h}
outputs: {first: nodes.first.text, second: nodes.second, n: state.n}
`

// replies answers every model call with text, and counts the calls.
type replies struct {
	text  string
	mu    sync.Mutex
	calls []string
}

func (r *replies) Respond(_ context.Context, k llm.Key) (llm.Reply, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.calls = append(r.calls, k.Node)
	return llm.Reply{Text: r.text}, nil
}

// flaky fails with class server until its last attempt.
type flaky struct{ fails int }

func (f *flaky) Execute(context.Context, *runtime.Scope, *dsl.Node) (runtime.Outcome, error) {
	if f.fails > 0 {
		f.fails--
		return runtime.Outcome{}, runtime.Errorf(errclass.Server, "down")
	}
	return runtime.Outcome{Output: "up"}, nil
}

// of are the events of type typ that sink kept.
func of(sink *runtimetest.Events, typ string) []runtime.Event {
	var out []runtime.Event
	for _, e := range sink.All() {
		if e.Type == typ {
			out = append(out, e)
		}
	}
	return out
}

// memoryEngine is an engine whose store would be at the path returned,
// in an empty environment.
func memoryEngine(t *testing.T) (*Engine, string) {
	t.Helper()
	path := filepath.Join(t.TempDir(), "runs.db")
	e, err := New(Options{StorePath: path, LookupEnv: func(string) (string, bool) { return "", false }, ShareSandbox: true})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { e.Close() })
	return e, path
}

// A run kept in memory with doubles needs no endpoint (its Responder
// answers), waits its retry backoff on the clock given, gives its events
// to the sink, and leaves no store behind.
func TestInMemoryRunWithDoubles(t *testing.T) {
	e, path := memoryEngine(t)
	p := load(t, "memo.yaml", memoPipeline)
	model := &replies{text: "hello"}
	fake := clock.NewFake(time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC))
	sink := &runtimetest.Events{}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	r, err := e.Start(ctx, p, nil, RunOptions{Sink: sink, InMemory: &InMemory{}, Doubles: &Doubles{Respond: model, Clock: fake,
		Kinds: func(kinds runtime.Registry) runtime.Registry {
			kinds[dsl.KindTool] = &flaky{fails: 2}
			return kinds
		}}})
	if err != nil {
		t.Fatal(err)
	}
	res := r.Wait()
	if res.Status != runtime.StatusCompleted || res.Outputs["first"] != "hello" || res.Outputs["second"] != "up" || res.Outputs["n"] != 1 {
		t.Fatalf("status %s, err %v, outputs %v", res.Status, res.Err, res.Outputs)
	}
	if !slices.Equal(model.calls, []string{"first"}) {
		t.Errorf("model calls %q, want one of first", model.calls)
	}
	if slept := fake.Slept(); len(slept) != 2 || slept[0] < time.Hour {
		t.Errorf("the clock was asked to wait %v, want the two backoffs", slept)
	}
	if n := len(sink.Paths(runtime.EventRunFinished)); n != 1 {
		t.Errorf("%d run_finished events, want 1", n)
	}
	if err := e.Close(); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(path); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("the store %s: %v, want none made", path, err)
	}
}

// A run kept in memory goes on from the checkpoints given, edited: the
// node they hold is restored, not run, and run_started tells the edit.
func TestInMemoryRunGoesOnFromItsCheckpoints(t *testing.T) {
	e, _ := memoryEngine(t)
	p := load(t, "memo.yaml", memoPipeline)
	points := []*runtime.Checkpoint{{Seq: 1, Path: "first", Output: map[string]any{"text": "restored"}, State: map[string]any{"n": 1}, Steps: 1}}
	edits := []runtime.Edit{{Key: "state.n", New: 5}}
	inputs, points, err := Edited(p, nil, points, edits)
	if err != nil {
		t.Fatal(err)
	}
	model := &replies{text: "called"}
	sink := &runtimetest.Events{}
	r, err := e.Start(context.Background(), p, inputs, RunOptions{Sink: sink, InMemory: &InMemory{Restore: points, Edits: edits},
		Doubles: &Doubles{Respond: model, Kinds: func(kinds runtime.Registry) runtime.Registry {
			kinds[dsl.KindTool] = &flaky{}
			return kinds
		}}})
	if err != nil {
		t.Fatal(err)
	}
	res := r.Wait()
	if res.Status != runtime.StatusCompleted || res.Outputs["first"] != "restored" || res.Outputs["n"] != 5 {
		t.Fatalf("status %s, err %v, outputs %v", res.Status, res.Err, res.Outputs)
	}
	if len(model.calls) > 0 {
		t.Errorf("the restored node called the model: %q", model.calls)
	}
	if restored := sink.Paths(runtime.EventNodeRestored); !slices.Equal(restored, []string{"first"}) {
		t.Errorf("node_restored at %q, want first alone", restored)
	}
	started := of(sink, runtime.EventRunStarted)
	if len(started) != 1 || len(started[0].Edits) != 1 || started[0].Edits[0].Key != "state.n" {
		t.Errorf("run_started %+v, want the edit of state.n", started)
	}
}

// A run kept in memory that cannot start says why as Start's error, as
// any run does: without a Responder, the model's missing endpoint.
func TestInMemoryRunRefusedBeforeItStarts(t *testing.T) {
	e, _ := memoryEngine(t)
	p := load(t, "memo.yaml", memoPipeline)
	if _, err := e.Start(context.Background(), p, nil, RunOptions{InMemory: &InMemory{}}); !errors.Is(err, ErrNoEndpoint) {
		t.Fatalf("Start without a Responder: %v, want ErrNoEndpoint", err)
	}
}
