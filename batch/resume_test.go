package batch

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/flowrun/flowrun/batch/batchtest"
	"github.com/flowrun/flowrun/dsl"
	"github.com/flowrun/flowrun/engine"
	"github.com/flowrun/flowrun/llm/llmtest"
	"github.com/flowrun/flowrun/runtime"
	"github.com/flowrun/flowrun/store"
)

// everySetting has every field of Settings set, so that a setting a
// resume drops shows.
func everySetting(t *testing.T) Settings {
	s := Settings{Concurrency: 3, MaxCostUSD: 2.5, MaxLoops: 4, Auto: true, Repeat: 3, Limit: 10, Sample: 5, Seed: 7, Filter: "item.x > 1",
		Map: map[string]string{"question": "q"}, Metrics: []string{"exact"}, Primary: "exact", Expected: []string{"expected"},
		Expects: map[string][]dsl.Expectation{"exact": {{Output: "answer", Item: "expected"}}}, Score: []string{"n=1"},
		Model: []string{"default=gpt-4.1"}, Replay: "/c.yaml", DatasetAbs: "/d.jsonl", NATS: "nats://h:4222",
		NATSCreds: "/u.creds", NATSCA: "/ca.pem", NATSSign: "/c.key", NATSTrustWorker: []string{"/w.pub"}, NATSInsecure: true}
	v := reflect.ValueOf(s)
	for i := range v.NumField() {
		if v.Field(i).IsZero() {
			t.Fatalf("the fixture leaves Settings.%s unset", v.Type().Field(i).Name)
		}
	}
	return s
}

// TestSettingsWithOverrides: a resume that gives no setting keeps every
// recorded one, and each setting a resume may give replaces the recorded
// one of the same name and no other.
func TestSettingsWithOverrides(t *testing.T) {
	recorded := everySetting(t)
	if got := recorded.With(Overrides{}); !reflect.DeepEqual(got, recorded) {
		t.Fatalf("no overrides:\n got %+v\nwant %+v", got, recorded)
	}
	ov := reflect.TypeOf(Overrides{})
	for i := range ov.NumField() {
		name := ov.Field(i).Name
		field, ok := reflect.TypeOf(recorded).FieldByName(name)
		if !ok || reflect.PointerTo(field.Type) != ov.Field(i).Type {
			t.Fatalf("Overrides.%s names no Settings field of its type", name)
		}
		given := reflect.New(field.Type) // the zero value: unlike every recorded one
		var o Overrides
		reflect.ValueOf(&o).Elem().Field(i).Set(given)
		want := recorded
		reflect.ValueOf(&want).Elem().FieldByName(name).Set(given.Elem())
		if got := recorded.With(o); !reflect.DeepEqual(got, want) {
			t.Errorf("overriding %s:\n got %+v\nwant %+v", name, got, want)
		}
	}
}

// resumeFixture is a pipeline asking the fake model one question per
// item, each turn costing exactly $1, and a dataset of n items, each
// answered right.
func resumeFixture(t *testing.T, n int) (pipeline, dataset string, asked *atomic.Int32, env func(string) (string, bool)) {
	dir := t.TempDir()
	var lines []string
	for i := 1; i <= n; i++ {
		lines = append(lines, fmt.Sprintf(`{"question": "q%d", "expected": "A"}`, i))
	}
	pipeline, dataset = write(t, dir, "qa.yaml", batchtest.DollarQAPipeline), write(t, dir, "qa.jsonl", strings.Join(lines, "\n"))
	asked = &atomic.Int32{}
	srv := llmtest.New(t)
	srv.Handle(func(llmtest.Request) llmtest.Reply {
		asked.Add(1)
		return llmtest.Reply{Text: "A", Usage: llmtest.Usage{Prompt: 100}}
	})
	return pipeline, dataset, asked, srv.Env("sk-resume-test")
}

// startBatch creates and runs a batch of the fixture as s says, the way
// a front end does, its model client pointed where env says.
func startBatch(t *testing.T, st *store.Store, pipeline, dataset string, s Settings, env func(string) (string, bool)) (*store.Batch, runtime.Status) {
	return runBatch(t, st, pipeline, dataset, s, engineFor(t, st, env))
}

// runBatch creates and runs a batch of pipeline over dataset as s says,
// its runs started by eng.
func runBatch(t *testing.T, st *store.Store, pipeline, dataset string, s Settings, eng *engine.Engine) (*store.Batch, runtime.Status) {
	t.Helper()
	ctx := context.Background()
	p, d, b := loadBatch(t, pipeline, dataset)
	s.DatasetAbs = dataset
	if err := SetSettings(b, s); err != nil {
		t.Fatal(err)
	}
	r := NewRunner(st, p, share(t, eng, p), s)
	var err error
	if r.Scorer, err = ParseScorer(p, s.Score); err != nil {
		t.Fatal(err)
	}
	if err := r.Create(ctx, b, d.Items, func(*store.Batch) {}); err != nil {
		t.Fatal(err)
	}
	status, _, err := r.Run(ctx, b, d.Items)
	if err != nil {
		t.Fatal(err)
	}
	return b, status
}

// loadBatch loads pipeline and dataset, and the batch of them, not yet
// created.
func loadBatch(t *testing.T, pipeline, dataset string) (*dsl.Pipeline, *Dataset, *store.Batch) {
	t.Helper()
	p, ds := dsl.Load(pipeline)
	if p == nil {
		t.Fatal(ds)
	}
	d, err := ReadDataset(dataset)
	if err != nil {
		t.Fatal(err)
	}
	return p, d, &store.Batch{Pipeline: pipeline, PipelineAbs: pipeline, PipelineHash: p.Hash, Dataset: dataset, DatasetHash: d.Hash}
}

// engineFor is an engine on st whose model client goes where env says.
func engineFor(t testing.TB, st *store.Store, env func(string) (string, bool)) *engine.Engine {
	t.Helper()
	eng, err := engine.New(engine.Options{Store: st, LookupEnv: env})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { eng.Close() })
	return eng
}

// share is eng's services for a batch of p, ended with the test.
func share(t testing.TB, eng *engine.Engine, p *dsl.Pipeline) *engine.Shared {
	t.Helper()
	sh, err := eng.Share(p, nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(sh.Close)
	return sh
}

// resume resumes batch id with the given overrides, as a front end does.
func resume(t *testing.T, st *store.Store, id string, o Overrides, env func(string) (string, bool)) (*Resumption, runtime.Status, string) {
	ctx := context.Background()
	res, err := PrepareResume(ctx, st, id, ResumeOptions{Overrides: o})
	if err != nil {
		t.Fatal(err)
	}
	r := NewRunner(st, res.Pipeline, share(t, engineFor(t, st, env), res.Pipeline), res.Settings)
	status, reason, err := r.Resume(ctx, res, func() error { return nil })
	if err != nil {
		t.Fatal(err)
	}
	return res, status, reason
}

// TestResumeKeepsRecordedSettings: a batch stopped by its cost cap and
// resumed with no settings given keeps the cap (and every other recorded
// setting) and so stops again without asking the model anything; a
// resume that gives a higher cap runs on to it.
func TestResumeKeepsRecordedSettings(t *testing.T) {
	st := batchtest.OpenStore(t)
	pipeline, dataset, asked, env := resumeFixture(t, 6)
	b, status := startBatch(t, st, pipeline, dataset, Settings{Concurrency: 1, MaxCostUSD: 2, MaxLoops: 3, Metrics: []string{"exact"}, Primary: "exact"}, env)
	if status != runtime.StatusStopped || asked.Load() != 2 {
		t.Fatalf("the first attempt: %s after %d questions, want stopped after 2", status, asked.Load())
	}
	recorded, err := st.Batch(context.Background(), b.ID)
	if err != nil {
		t.Fatal(err)
	}
	want, err := SettingsOf(recorded)
	if err != nil {
		t.Fatal(err)
	}

	res, status, reason := resume(t, st, b.ID, Overrides{}, env)
	if !reflect.DeepEqual(res.Settings, want) {
		t.Fatalf("resumed with\n%+v\nwant the recorded\n%+v", res.Settings, want)
	}
	if status != runtime.StatusStopped || !strings.Contains(reason, "the batch's cost cap of $2.00 reached: $2.00 spent") || asked.Load() != 2 {
		t.Fatalf("a resume giving no cap: %s (%s) after %d questions in all, want stopped at the recorded $2 after 2", status, reason, asked.Load())
	}

	higher := 4.0
	res, status, reason = resume(t, st, b.ID[:8], Overrides{MaxCostUSD: &higher}, env)
	if res.Settings.MaxCostUSD != 4 || res.Settings.Concurrency != 1 || res.Settings.MaxLoops != 3 {
		t.Fatalf("a resume giving a $4 cap runs with %+v", res.Settings)
	}
	if status != runtime.StatusStopped || !strings.Contains(reason, "the batch's cost cap of $4.00 reached: $4.00 spent") || asked.Load() != 4 {
		t.Fatalf("a resume giving a $4 cap: %s (%s) after %d questions in all, want stopped after 4", status, reason, asked.Load())
	}
}

// TestPrepareResumeRefusesAChangedPipeline: an edited pipeline is a
// *ChangedError naming the batch and the file, unless the resume allows
// it.
func TestPrepareResumeRefusesAChangedPipeline(t *testing.T) {
	st := batchtest.OpenStore(t)
	pipeline, dataset, _, env := resumeFixture(t, 3)
	b, _ := startBatch(t, st, pipeline, dataset, Settings{Concurrency: 1, MaxCostUSD: 1}, env)
	src, err := os.ReadFile(pipeline)
	if err != nil {
		t.Fatal(err)
	}
	write(t, filepath.Dir(pipeline), filepath.Base(pipeline), strings.Replace(string(src), `"Q: `, `"Question: `, 1))
	_, err = PrepareResume(context.Background(), st, b.ID, ResumeOptions{})
	var ch *ChangedError
	if !errors.As(err, &ch) || ch.Batch != b.ID || ch.Pipeline != pipeline || !strings.Contains(strings.Join(ch.Changes, "\n"), "line 10: was") {
		t.Fatalf("a changed pipeline: %v (%+v)", err, ch)
	}
	if strings.Contains(err.Error(), "flowrun ") || strings.Contains(err.Error(), "--allow-changed") {
		t.Errorf("the error tells what to type: %v", err)
	}
	if _, err := PrepareResume(context.Background(), st, b.ID, ResumeOptions{AllowChanged: true}); err != nil {
		t.Fatalf("allowed: %v", err)
	}
}

// TestItemRunsRecordHowTheyRan: the engine starts each item's run as the
// batch says and records it with the run (its model overrides, human
// policy and loop cap), so that a resume of the run by any front end
// goes on the same way.
func TestItemRunsRecordHowTheyRan(t *testing.T) {
	st := batchtest.OpenStore(t)
	pipeline, dataset, _, env := resumeFixture(t, 2)
	eng, err := engine.New(engine.Options{Store: st, LookupEnv: env, Models: []string{"default=gpt-4.1"}})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { eng.Close() })
	b, status := runBatch(t, st, pipeline, dataset, Settings{Concurrency: 1, Auto: true, MaxLoops: 3}, eng)
	if status != runtime.StatusCompleted {
		t.Fatalf("the batch %s", status)
	}
	want := store.RunSpec{Models: map[string]string{"default": "gpt-4.1"}, Auto: true, MaxLoops: 3}
	items, err := st.BatchItems(context.Background(), b.ID)
	if err != nil {
		t.Fatal(err)
	}
	for _, row := range items {
		run, err := st.Run(context.Background(), row.Run)
		if err != nil {
			t.Fatal(err)
		}
		if !reflect.DeepEqual(run.Spec, want) {
			t.Errorf("item %s's run %s recorded %+v, want %+v", row.Key, row.Run, run.Spec, want)
		}
	}
}
