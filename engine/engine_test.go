package engine

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/flowrun/flowrun/dsl"
	"github.com/flowrun/flowrun/engine/internal/durable"
	"github.com/flowrun/flowrun/jsonvalue"
	"github.com/flowrun/flowrun/llm/llmtest"
	"github.com/flowrun/flowrun/runtime"
	"github.com/flowrun/flowrun/store"
)

// load writes a pipeline into a temporary directory and loads it.
func load(t *testing.T, name, src string) *dsl.Pipeline {
	t.Helper()
	path := filepath.Join(t.TempDir(), name)
	if err := os.WriteFile(path, []byte(src), 0o644); err != nil {
		t.Fatal(err)
	}
	p, ds := dsl.Load(path)
	if p == nil {
		t.Fatal(ds)
	}
	return p
}

// newEngine is an engine on a fresh SQLite store whose model endpoint is
// fake, and whose environment holds env besides.
func newEngine(t *testing.T, fake *llmtest.Server, env map[string]string) (*Engine, *store.Store) {
	t.Helper()
	st, err := store.Open(filepath.Join(t.TempDir(), "runs.db"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	lookup := func(name string) (string, bool) {
		if v, ok := env[name]; ok {
			return v, true
		}
		if fake != nil {
			return fake.Env("")(name)
		}
		return "", false
	}
	e, err := New(Options{Store: st, LookupEnv: lookup, MaxAttempts: 1})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { e.Close() })
	return e, st
}

const secretPipeline = `
version: 1
name: secretive
env: [SERVICE_TOKEN]
state: {seen: ""}
nodes:
  - id: keep
    set: {seen: '"token " + env.SERVICE_TOKEN'}
outputs: {seen: state.seen}
`

// storedText is everything the store holds of a run: its record and
// every event, as JSON.
func storedText(t *testing.T, st *store.Store, run string) string {
	t.Helper()
	r, err := st.Run(context.Background(), run)
	if err != nil {
		t.Fatal(err)
	}
	events, err := st.Events(context.Background(), run)
	if err != nil {
		t.Fatal(err)
	}
	b, err := jsonvalue.Marshal(map[string]any{"run": r, "events": events})
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

// A run started through the engine, with no CLI around it, keeps an env:
// secret out of its stored record and events.
func TestStartRedactsEnvSecret(t *testing.T) {
	const token = "svc-engine-start-4f3e2d1c0b9a8776"
	e, st := newEngine(t, nil, map[string]string{"SERVICE_TOKEN": token})
	res, err := result(e.Start(context.Background(), load(t, "secretive.yaml", secretPipeline), nil, RunOptions{}))
	if err != nil || res.Status != runtime.StatusCompleted {
		t.Fatalf("%v %+v", err, res)
	}
	if got := storedText(t, st, res.RunID); strings.Contains(got, token[4:20]) || !strings.Contains(got, "token ") {
		t.Fatalf("the stored run shows the env: secret:\n%s", got)
	}
}

const askPipeline = `
version: 1
name: asker
models:
  default: {model: gpt-4.1-mini}
nodes:
  - id: who
    ask: {question: "Who are you?", schema: {type: object, properties: {name: {type: string}, age: {type: integer}}, required: [name]}}
  - id: greet
    llm: {prompt: "Greet ${{ nodes.who.name }}"}
outputs: {greeting: nodes.greet.text}
`

// A run that asks waits; Answer checks the answer against the question's
// schema and resumes with it; the run completes, and a fork from its
// first checkpoint is a new run that leaves it untouched.
func TestStartWaitAnswerFork(t *testing.T) {
	fake := llmtest.New(t)
	e, st := newEngine(t, fake, nil)
	p := load(t, "asker.yaml", askPipeline)
	ctx := context.Background()
	res, err := result(e.Start(ctx, p, nil, RunOptions{}))
	if err != nil || res.Status != runtime.StatusWaiting || res.Pending == nil || res.Pending.Path != "who" {
		t.Fatalf("want waiting on who: %v %+v", err, res)
	}
	run := res.RunID
	var input *InputError
	if _, err := result(e.Answer(ctx, run, map[string]any{"age": 3}, ResumeOptions{})); !errors.As(err, &input) || !strings.Contains(err.Error(), "does not match the question's schema") {
		t.Fatalf("an answer without name: %v", err)
	}
	answer, err := ReadAnswer(res.Pending, []string{"name=Ada", "age=36"}, "")
	if err != nil {
		t.Fatal(err)
	}
	fake.Push(llmtest.Text("hello Ada"))
	res, err = result(e.Answer(ctx, run, answer, ResumeOptions{}))
	if err != nil || res.Status != runtime.StatusCompleted || res.Outputs["greeting"] != "hello Ada" {
		t.Fatalf("after the answer: %v %+v", err, res)
	}
	if !strings.Contains(string(fake.Last().Raw), "Greet Ada") {
		t.Errorf("the model was asked %s", fake.Last().Raw)
	}
	if _, err := result(e.Resume(ctx, run, ResumeOptions{})); err == nil || !strings.Contains(err.Error(), "already completed") {
		t.Errorf("resuming a completed run: %v", err)
	}
	fake.Push(llmtest.Text("hello again"))
	forked, err := result(e.Fork(ctx, run, "1", ResumeOptions{}))
	if err != nil || forked.RunID == run || forked.Status != runtime.StatusCompleted || forked.Outputs["greeting"] != "hello again" {
		t.Fatalf("fork: %v %+v", err, forked)
	}
	if r, _ := st.Run(ctx, run); r.Status != runtime.StatusCompleted || r.Outputs["greeting"] != "hello Ada" {
		t.Errorf("the forked run changed: %+v", r)
	}
}

// sharedAsker is askPipeline and e's services shared by its runs, ended
// with the test.
func sharedAsker(t *testing.T, e *Engine) (*dsl.Pipeline, *Shared) {
	t.Helper()
	p := load(t, "asker.yaml", askPipeline)
	sh, err := e.Share(p, nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(sh.Close)
	return p, sh
}

// A run that shared services (a batch's) resume goes on as the caller
// says, not as it recorded: a batch resumed without --auto or a loop cap
// gives its items neither, and their records say so.
func TestSharedResumeGoesOnAsTold(t *testing.T) {
	e, st := newEngine(t, llmtest.New(t), nil)
	p, sh := sharedAsker(t, e)
	ctx := context.Background()
	// The question has no default: auto leaves it waiting too.
	res, err := result(sh.Start(ctx, p, nil, RunOptions{Auto: true, MaxLoops: 3}))
	if err != nil || res.Status != runtime.StatusWaiting {
		t.Fatalf("want waiting: %v %+v", err, res)
	}
	if r, err := st.Run(ctx, res.RunID); err != nil || !r.Spec.Auto || r.Spec.MaxLoops != 3 {
		t.Fatalf("started with auto and a cap of 3, recorded %+v (%v)", r.Spec, err)
	}
	res, err = result(sh.Resume(ctx, res.RunID, ResumeOptions{}))
	if err != nil || res.Status != runtime.StatusWaiting {
		t.Fatalf("want waiting again: %v %+v", err, res)
	}
	if r, err := st.Run(ctx, res.RunID); err != nil || r.Spec.Auto || r.Spec.MaxLoops != 0 {
		t.Errorf("resumed with neither, recorded %+v (%v)", r.Spec, err)
	}
}

// A run on shared services records the overrides of the models its own
// pipeline declares: a judge's pipeline, which declares none, records
// none, so that a resume of it is not refused for them.
func TestSharedRunsRecordTheirOwnModels(t *testing.T) {
	st, err := store.Open(filepath.Join(t.TempDir(), "runs.db"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	e, err := New(Options{Store: st, LookupEnv: llmtest.New(t).Env(""), Models: []string{"default=gpt-4.1"}})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { e.Close() })
	p, sh := sharedAsker(t, e)
	ctx := context.Background()
	judge := load(t, "judge.yaml", "version: 1\nname: judge\ninputs: {x: {type: string}}\noutputs: {y: inputs.x}\n")
	for _, c := range []struct {
		p      *dsl.Pipeline
		inputs map[string]any
		want   map[string]string
	}{{p, nil, map[string]string{"default": "gpt-4.1"}}, {judge, map[string]any{"x": "a"}, nil}} {
		res, err := result(sh.Start(ctx, c.p, c.inputs, RunOptions{}))
		if err != nil {
			t.Fatal(err)
		}
		r, err := st.Run(ctx, res.RunID)
		if err != nil {
			t.Fatal(err)
		}
		if !reflect.DeepEqual(r.Spec.Models, c.want) {
			t.Errorf("a run of %s recorded the models %v, want %v", c.p.Name, r.Spec.Models, c.want)
		}
	}
}

// Stop stops a run wherever it runs, through the store: the run ends
// stopped with the reason given, resumable.
func TestStopEndsARunningRun(t *testing.T) {
	fake := llmtest.New(t)
	fake.Push(llmtest.Reply{Text: "too late", Delay: time.Hour})
	e, st := newEngine(t, fake, nil)
	p := load(t, "slow.yaml", `
version: 1
name: slow
models:
  default: {model: gpt-4.1-mini}
nodes:
  - id: think
    llm: {prompt: "think"}
outputs: {text: nodes.think.text}
`)
	ctx := context.Background()
	ended := make(chan *runtime.Result, 1)
	go func() {
		res, _ := result(e.Start(ctx, p, nil, RunOptions{}))
		ended <- res
	}()
	for fake.Calls() == 0 {
		time.Sleep(5 * time.Millisecond)
	}
	runs, err := st.Runs(ctx)
	if err != nil || len(runs) != 1 {
		t.Fatalf("runs %v %v", runs, err)
	}
	if err := e.Stop(ctx, runs[0].ID, "enough"); err != nil {
		t.Fatal(err)
	}
	res := <-ended
	if res == nil || res.Status != runtime.StatusStopped || !strings.Contains(res.Reason, "enough") {
		t.Fatalf("after Stop: %+v", res)
	}
}

// What does not fit is refused before the run exists, with a typed
// error: an unknown model override, no endpoint and no cassette, inputs
// of the wrong type.
func TestStartRefusesBeforeTheRun(t *testing.T) {
	fake := llmtest.New(t)
	p := load(t, "asker.yaml", askPipeline+"inputs:\n  n: {type: integer}\n")
	ctx := context.Background()
	cases := []struct {
		name   string
		e      func() (*Engine, *store.Store)
		o      RunOptions
		inputs map[string]any
		want   any
		text   string
	}{
		{"override", func() (*Engine, *store.Store) { return newEngine(t, fake, nil) }, RunOptions{Models: []string{"vision=gpt-4.1"}}, map[string]any{"n": 1},
			new(*ConfigError), `the pipeline declares no model "vision"`},
		{"no endpoint", func() (*Engine, *store.Store) { return newEngine(t, nil, nil) }, RunOptions{}, map[string]any{"n": 1},
			new(*ConfigError), "no model endpoint"},
		{"input type", func() (*Engine, *store.Store) { return newEngine(t, fake, nil) }, RunOptions{}, map[string]any{"n": "many"},
			new(*InputError), "n"},
	}
	for _, c := range cases {
		e, st := c.e()
		res, err := result(e.Start(ctx, p, c.inputs, c.o))
		if res != nil || err == nil || !errors.As(err, c.want) || !strings.Contains(err.Error(), c.text) {
			t.Errorf("%s: %+v %v", c.name, res, err)
		}
		if runs, _ := st.Runs(ctx); len(runs) != 0 {
			t.Errorf("%s: %d runs recorded", c.name, len(runs))
		}
	}
}

// Inputs from a remote caller name no host file outside the pipeline's
// directory: a path input there is refused before the run exists, and
// the same input from this host's own user is taken.
func TestRemoteInputsStayInsideThePipelineDirectory(t *testing.T) {
	outside := filepath.Join(t.TempDir(), "secret.txt")
	if err := os.WriteFile(outside, []byte("private"), 0o644); err != nil {
		t.Fatal(err)
	}
	p := load(t, "reader.yaml", `
version: 1
name: reader
inputs:
  doc: {type: string, format: path}
nodes:
  - id: a
    set: {}
outputs: {doc: inputs.doc}
`)
	e, st := newEngine(t, nil, nil)
	ctx := context.Background()
	var input *InputError
	if res, err := result(e.Start(ctx, p, map[string]any{"doc": outside}, RunOptions{Remote: true})); res != nil || !errors.As(err, &input) {
		t.Fatalf("a remote caller's path outside the directory: %+v %v", res, err)
	}
	if runs, _ := st.Runs(ctx); len(runs) != 0 {
		t.Fatalf("%d runs recorded", len(runs))
	}
	if res, err := result(e.Start(ctx, p, map[string]any{"doc": outside}, RunOptions{})); err != nil || res.Status != runtime.StatusCompleted {
		t.Fatalf("the same path from this host's user: %+v %v", res, err)
	}
}

// A run whose pipeline changed since it started resumes only when told
// to: the error names the change, and AllowChanged goes on.
func TestResumeOfAChangedPipeline(t *testing.T) {
	fake := llmtest.New(t)
	e, _ := newEngine(t, fake, nil)
	p := load(t, "asker.yaml", askPipeline)
	ctx := context.Background()
	res, err := result(e.Start(ctx, p, nil, RunOptions{}))
	if err != nil || res.Status != runtime.StatusWaiting {
		t.Fatalf("%+v %v", res, err)
	}
	if err := os.WriteFile(p.Path, []byte(strings.Replace(askPipeline, "Greet", "Welcome", 1)), 0o644); err != nil {
		t.Fatal(err)
	}
	var changed *durable.ChangedError
	if _, err := result(e.Answer(ctx, res.RunID, map[string]any{"name": "Ada"}, ResumeOptions{})); !errors.As(err, &changed) || !strings.Contains(err.Error(), "Welcome") {
		t.Fatalf("resuming a changed pipeline: %v", err)
	}
	fake.Push(llmtest.Text("welcome Ada"))
	res, err = result(e.Answer(ctx, res.RunID, map[string]any{"name": "Ada"}, ResumeOptions{AllowChanged: true}))
	if err != nil || res.Status != runtime.StatusCompleted || !strings.Contains(string(fake.Last().Raw), "Welcome Ada") {
		t.Fatalf("with AllowChanged: %+v %v", res, err)
	}
}

// result waits for the run the engine returned, if it started.
func result(r *Run, err error) (*runtime.Result, error) {
	if r == nil {
		return nil, err
	}
	return r.Wait(), err
}

// continued is result for Continue.
func continued(r *Run, later *LaterAnswer, err error) (*runtime.Result, *LaterAnswer, error) {
	res, err := result(r, err)
	return res, later, err
}
