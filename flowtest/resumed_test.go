package flowtest

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/flowrun/flowrun/dsl"
	"github.com/flowrun/flowrun/engine"
	"github.com/flowrun/flowrun/llm"
	"github.com/flowrun/flowrun/nodes"
	"github.com/flowrun/flowrun/runtime"
	"github.com/flowrun/flowrun/store"
)

// notesPipeline keeps a draft as state, asks whether to go on and writes
// it up: checkpoints 1 (draft), 2 (keep), then approve and final.
const notesPipeline = `version: 1
name: notes
models:
  default: {model: gpt-4.1-mini}
inputs:
  topic: {type: string}
state:
  notes: ""
nodes:
  - id: draft
    llm: {prompt: "Notes on ${{ inputs.topic }}"}
  - id: keep
    set: {notes: nodes.draft.text}
  - id: approve
    ask: {question: "Write it up?", schema: {type: boolean}}
  - id: final
    llm: {prompt: "Write up: ${{ state.notes }}"}
outputs:
  notes: state.notes
  report: nodes.final.text
`

// node answers each model call with the name of its node.
type node struct{}

func (node) Respond(_ context.Context, k llm.Key) (llm.Reply, error) {
	return llm.Reply{Text: "from " + k.Node}, nil
}

// yes answers every question yes.
type yes struct{}

func (yes) Answer(context.Context, runtime.Question) (any, bool, error) { return true, true, nil }

// storedNotes is a store holding a run of notesPipeline that waited at
// approve, and a runner that answers its questions.
func storedNotes(t *testing.T) (dir string, st *store.Store, p *dsl.Pipeline, runner *engine.Runner, run string) {
	t.Helper()
	dir = t.TempDir()
	path := filepath.Join(dir, "notes.yaml")
	if err := os.WriteFile(path, []byte(notesPipeline), 0o644); err != nil {
		t.Fatal(err)
	}
	p, ds := dsl.Load(path)
	if p == nil {
		t.Fatal(ds)
	}
	st, err := store.Open(filepath.Join(dir, "runs.db"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	runner = &engine.Runner{Store: st, Kinds: nodes.Kinds(nodes.Services{LLM: llm.New(llm.Options{Respond: node{}})})}
	res, err := runner.Start(context.Background(), p, map[string]any{"topic": "owls"})
	if err != nil || res.Status != runtime.StatusWaiting {
		t.Fatalf("the first run: %v, %v", res, err)
	}
	runner.Human = yes{}
	return dir, st, p, runner, res.RunID
}

// caseOf writes the case FromStoredRun makes of run beside the pipeline,
// checks that it holds each of want, loads it and runs it.
func caseOf(t *testing.T, dir string, st *store.Store, run string, want ...string) (string, *Result) {
	t.Helper()
	path := filepath.Join(dir, "notes.test.yaml")
	_, b, err := FromStoredRun(context.Background(), st, run, path, nil)
	if err != nil {
		t.Fatal(err)
	}
	for _, w := range want {
		if !strings.Contains(string(b), w) {
			t.Errorf("the case lacks %q:\n%s", w, b)
		}
	}
	return string(b), runCaseFile(t, path, string(b))
}

func runCaseFile(t *testing.T, path, body string) *Result {
	t.Helper()
	if err := os.WriteFile(path, []byte(body), 0o644); err != nil {
		t.Fatal(err)
	}
	f, ds := Load(path)
	if len(ds) > 0 {
		t.Fatalf("the case does not load: %s\n%s", ds, body)
	}
	return (&Runner{}).Run(context.Background(), f, f.Cases[0])
}

// A fork from checkpoint 2 with state.notes edited becomes a case that
// restores the parent's two checkpoints as they were before the edit,
// makes the edit and mocks only what the fork ran; it passes, and fails
// without its edit.
func TestCaseFromAForkWithAnEditPasses(t *testing.T) {
	dir, st, p, runner, parent := storedNotes(t)
	ctx := context.Background()
	prev, err := st.Run(ctx, parent)
	if err != nil {
		t.Fatal(err)
	}
	fork, err := runner.Continue(ctx, prev, p, "2", []runtime.Edit{{Key: "state.notes", New: "edited notes"}})
	if err != nil || fork.Status != runtime.StatusCompleted || fork.Outputs["notes"] != "edited notes" {
		t.Fatalf("the fork: %v, %v", fork, err)
	}
	body, res := caseOf(t, dir, st, fork.RunID, "restore:\n      run: "+parent+"\n      checkpoint: 2\n", "edits:\n      state.notes: edited notes\n", "approve: true")
	if !res.Pass {
		t.Fatalf("the case fails: %s\n%s", strings.Join(res.Problems, "\n"), body)
	}
	if !strings.Contains(body, "    mocks:\n      final:") || strings.Contains(body, "      draft:\n") {
		t.Errorf("the case should mock final alone (draft ran in the parent):\n%s", body)
	}
	without := strings.Replace(body, "    edits:\n      state.notes: edited notes\n", "", 1)
	if res := runCaseFile(t, filepath.Join(dir, "unedited.test.yaml"), without); res.Pass {
		t.Errorf("the case passes without its edit:\n%s", without)
	}
}

// A run answered after its state was edited (the web UI's edit before
// answering) becomes a case that restores the run's own checkpoints up to
// the question, makes the edit, gives the answer and passes.
func TestCaseFromAnEditedAnswerPasses(t *testing.T) {
	dir, st, p, runner, run := storedNotes(t)
	ctx := context.Background()
	prev, err := st.Run(ctx, run)
	if err != nil {
		t.Fatal(err)
	}
	res, err := runner.Continue(ctx, prev, p, "", []runtime.Edit{{Key: "state.notes", New: "edited notes"}})
	if err != nil || res.Status != runtime.StatusCompleted || res.Outputs["notes"] != "edited notes" {
		t.Fatalf("the answered run: %v, %v", res, err)
	}
	body, got := caseOf(t, dir, st, run, "restore:\n      run: "+run+"\n", "edits:\n      state.notes: edited notes\n", "answers:\n      approve: true\n", "report: from final")
	if !got.Pass {
		t.Fatalf("the case fails: %s\n%s", strings.Join(got.Problems, "\n"), body)
	}
}

// restore: and edits: are checked when the file loads, each problem at
// its line: a checkpoint of a node the pipeline lacks, checkpoints out of
// order or past checkpoint:, an edit of an undeclared variable or of the
// wrong type, and a state edit with no checkpoint to go into.
func TestRestoreAndEditsArePositioned(t *testing.T) {
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "notes.yaml"), []byte(notesPipeline), 0o644); err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct{ body, want string }{
		{`    restore:
      run: r1
      checkpoint: 2
      checkpoints:
        - {seq: 1, path: drat, output: {text: x}, steps: 1}
`, `:8:26: error: restore: checkpoint 1: the pipeline has no node "drat" (did you mean "draft"?)`},
		{`    restore:
      run: r1
      checkpoint: 1
      checkpoints:
        - {seq: 2, path: keep, steps: 2}
        - {seq: 1, path: draft, steps: 1}
`, `:9:11: error: restore: checkpoint 1 comes after checkpoint 2`},
		{`    restore:
      run: r1
      checkpoint: 1
      checkpoints:
        - {seq: 2, path: keep, steps: 2}
`, `:6:19: error: restore: checkpoint is 1, but the checkpoints go on to 2`},
		{`    edits:
      state.note: x
`, `:5:7: error: edits: state.note: notes declares no state variable "note" (did you mean "notes"?)`},
		{`    edits:
      state.notes: 3
`, `:5:7: error: edits: state.notes is of type string (from its initial value); 3 is of type integer`},
		{`    edits:
      state.notes: x
`, `:4:5: error: edits: there is no checkpoint yet whose state could be edited`},
	} {
		path := filepath.Join(dir, "notes.test.yaml")
		body := "cases:\n  - name: c\n    inputs: {topic: owls}\n" + c.body + "    expect: {status: completed}\n"
		if err := os.WriteFile(path, []byte(body), 0o644); err != nil {
			t.Fatal(err)
		}
		_, ds := Load(path)
		if !strings.Contains(ds.String(), c.want) {
			t.Errorf("%s\ngot:  %s\nwant: %s", body, ds, c.want)
		}
	}
}
