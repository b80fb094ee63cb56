package engine

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"

	"github.com/flowrun/flowrun/dsl"
	"github.com/flowrun/flowrun/engine/internal/durable"
	"github.com/flowrun/flowrun/runtime"
	"github.com/flowrun/flowrun/runtime/runtimetest"
	"github.com/flowrun/flowrun/sandbox/sandboxtest"
	"github.com/flowrun/flowrun/store"
)

// testdata is the text of a file under testdata/; the CLI's tests of
// the same runs read it too.
func testdata(t *testing.T, name string) string {
	t.Helper()
	b, err := os.ReadFile(filepath.Join("testdata", name))
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

// loadTestdata loads the pipeline testdata/name.
func loadTestdata(t *testing.T, name string) *dsl.Pipeline {
	t.Helper()
	p, ds := dsl.Load(filepath.Join("testdata", name))
	if p == nil {
		t.Fatal(ds)
	}
	return p
}

// scripted answers questions, by path, with the answers given, in
// order; a question it has no answer for is left waiting.
type scripted map[string][]any

func (s scripted) Answer(_ context.Context, q runtime.Question) (any, bool, error) {
	if len(s[q.Path]) == 0 {
		return nil, false, nil
	}
	a := s[q.Path][0]
	s[q.Path] = s[q.Path][1:]
	return a, true, nil
}

// answerText reads an answer as the CLI's --answer does and gives it to
// the run, which must be waiting on path.
func answerText(t *testing.T, e *Engine, run, path string, values ...string) (*runtime.Result, *runtimetest.Events) {
	t.Helper()
	st, _ := e.Store()
	r, err := st.Run(context.Background(), run)
	if err != nil {
		t.Fatal(err)
	}
	if r.Pending == nil || r.Pending.Path != path {
		t.Fatalf("run %s is %s waiting on %+v, want %s", run, r.Status, r.Pending, path)
	}
	a, err := ReadAnswer(r.Pending, values, "")
	if err != nil {
		t.Fatalf("answer %v to %s: %v", values, path, err)
	}
	log := &runtimetest.Events{}
	res, err := result(e.Answer(context.Background(), run, a, ResumeOptions{RunOptions: RunOptions{Sink: log}}))
	if err != nil {
		t.Fatalf("answer %v to %s: %v", values, path, err)
	}
	return res, log
}

// storedAs checks the store's record of run: its status and the path
// of the question it holds pending ("" for none).
func storedAs(t *testing.T, st *store.Store, run string, status runtime.Status, pending string) *store.Run {
	t.Helper()
	r, err := st.Run(context.Background(), run)
	if err != nil {
		t.Fatal(err)
	}
	got := ""
	if r.Pending != nil {
		got = r.Pending.Path
	}
	if r.Status != status || got != pending {
		t.Fatalf("run %s is stored %s pending %q, want %s pending %q", run, r.Status, got, status, pending)
	}
	return r
}

// TestAskWaitsThenAnswersGoOnWhereItStopped: with nobody to answer, an
// ask waits with its question (rendered) in the store; an answer that
// does not fit is refused before anything runs; the answer goes on
// without running the finished loop again, to the confirmation, and yes
// runs the confirmed node. (Was cmd/flowrun's
// TestAskWithoutTerminalWaitsThenResumeWithAnswer.)
func TestAskWaitsThenAnswersGoOnWhereItStopped(t *testing.T) {
	e, st := newEngine(t, nil, nil)
	ctx := context.Background()
	res, err := result(e.Start(ctx, loadTestdata(t, "count.yaml"), nil, RunOptions{}))
	if err != nil || res.Status != runtime.StatusWaiting || res.Pending.Text != "Counted to 5. Who are you?" {
		t.Fatalf("start: %v %+v", err, res)
	}
	run := res.RunID
	storedAs(t, st, run, runtime.StatusWaiting, "name")
	before, _ := st.Events(ctx, run)
	var input *InputError
	if _, err := ReadAnswer(res.Pending, []string{"who=ann", "age=old"}, ""); !errors.As(err, &input) || !strings.Contains(err.Error(), "age: not JSON") {
		t.Fatalf("age=old: %v, want an input error naming age", err)
	}
	if after, _ := st.Events(ctx, run); len(after) != len(before) {
		t.Fatalf("a refused answer recorded %d events", len(after)-len(before))
	}
	res, log := answerText(t, e, run, "name", "who=ann", "age=7")
	if res.Status != runtime.StatusWaiting || res.Pending.Kind != runtime.QuestionConfirm {
		t.Fatalf("after the answer: %+v, want waiting on the confirmation", res)
	}
	if started := log.Paths(runtime.EventNodeStarted); !reflect.DeepEqual(started, []string{"name"}) {
		t.Fatalf("the answer started %v: the finished loop must be restored, not run again", started)
	}
	res, _ = answerText(t, e, run, "careful", "yes")
	if res.Status != runtime.StatusCompleted || res.Outputs["n"] != 500 || res.Outputs["who"] != "ann" {
		t.Fatalf("after yes: %+v", res)
	}
}

// TestDeclinedConfirmationStopsAndYesRuns: a confirmation answered no
// stops the run with the confirmation still pending and no outputs;
// declined again on resume, it stops again and loses nothing; yes runs
// the node without asking the answered question again. (Was
// cmd/flowrun's TestHITL01ConfirmDeclinedStopsRun.)
func TestDeclinedConfirmationStopsAndYesRuns(t *testing.T) {
	e, st := newEngine(t, nil, nil)
	ctx := context.Background()
	person := scripted{"name": {map[string]any{"who": "cy"}}, "careful": {false, false}}
	res, err := result(e.Start(ctx, loadTestdata(t, "count.yaml"), nil, RunOptions{Human: person}))
	if err != nil || res.Status != runtime.StatusStopped || res.Outputs != nil || !strings.Contains(res.Reason, "running careful was declined") {
		t.Fatalf("declined: %v %+v, want stopped with the decline named and no outputs", err, res)
	}
	run := res.RunID
	if r := storedAs(t, st, run, runtime.StatusStopped, "careful"); !strings.Contains(r.Reason, "declined") {
		t.Fatalf("stored reason %q", r.Reason)
	}
	res, err = result(e.Resume(ctx, run, ResumeOptions{RunOptions: RunOptions{Human: person}}))
	if err != nil || res.Status != runtime.StatusStopped || !strings.Contains(res.Reason, "declined") {
		t.Fatalf("declined again: %v %+v", err, res)
	}
	storedAs(t, st, run, runtime.StatusStopped, "careful")
	res, log := answerText(t, e, run, "careful", "yes")
	if res.Status != runtime.StatusCompleted || res.Outputs["who"] != "cy" || res.Outputs["n"] != 500 {
		t.Fatalf("after yes: %+v", res)
	}
	if started := log.Paths(runtime.EventNodeStarted); !reflect.DeepEqual(started, []string{"careful"}) {
		t.Fatalf("yes started %v: the answered ask ran again", started)
	}
	storedAs(t, st, run, runtime.StatusCompleted, "")
}

// TestAutoCapsLoopsAndAnswersDefaults: auto-advance with MaxLoops runs
// each loop at most that often, saying so in a loop_exhausted event,
// answers the ask with its default and the confirmation with yes; an
// ask without a default still waits. (The behaviour of cmd/flowrun's
// TestAutoWithMaxLoops, which keeps the flags and what they print.)
func TestAutoCapsLoopsAndAnswersDefaults(t *testing.T) {
	e, _ := newEngine(t, nil, nil)
	ctx := context.Background()
	log := &runtimetest.Events{}
	res, err := result(e.Start(ctx, loadTestdata(t, "count.yaml"), nil, RunOptions{Human: e.Human(true), MaxLoops: 2, Sink: log}))
	if err != nil || res.Status != runtime.StatusCompleted || res.Outputs["n"] != 200 || res.Outputs["who"] != "nobody" {
		t.Fatalf("auto: %v %+v, want two iterations, the default and the confirmation accepted", err, res)
	}
	capped := false
	for _, ev := range log.All() {
		capped = capped || ev.Type == runtime.EventLoopExhausted && ev.Path == "rounds" && strings.Contains(ev.Message, "the run's max loops (2)")
	}
	if !capped {
		t.Fatalf("no loop_exhausted event names the cap: %+v", log.All())
	}
	noDefault := strings.Replace(testdata(t, "count.yaml"), "      default: {who: nobody}\n", "", 1)
	res, err = result(e.Start(ctx, load(t, "ask.yaml", noDefault), nil, RunOptions{Human: e.Human(true)}))
	if err != nil || res.Status != runtime.StatusWaiting || res.Pending.Path != "name" {
		t.Fatalf("an ask without a default under auto: %v %+v, want it waiting", err, res)
	}
}

// TestSnapshotRollbackAndFork: a snapshot labels the current checkpoint,
// once per label; a fork from it is a new run that names its parent and
// answers differently while the parent stays as it was; a rollback to it
// runs nothing, leaves the run stopped at that checkpoint with a
// rollback snapshot, and a resume goes on from there without running
// the finished nodes again. (Was cmd/flowrun's
// TestSnapshotRollbackAndFork, which keeps what the commands print.)
func TestSnapshotRollbackAndFork(t *testing.T) {
	e, st := newEngine(t, nil, nil)
	ctx := context.Background()
	res, err := result(e.Start(ctx, loadTestdata(t, "steps.yaml"), nil, RunOptions{}))
	if err != nil || res.Status != runtime.StatusWaiting {
		t.Fatalf("start: %v %+v", err, res)
	}
	run := res.RunID
	snap, err := st.Snapshot(ctx, run, "before-answer")
	if err != nil || snap.Seq != 4 {
		t.Fatalf("snapshot: %v %+v, want checkpoint 4", err, snap)
	}
	if _, err := st.Snapshot(ctx, run, "before-answer"); err == nil || !strings.Contains(err.Error(), "immutable") {
		t.Fatalf("a label used twice: %v", err)
	}
	if res, _ = answerText(t, e, run, "ask_more", "true"); res.Status != runtime.StatusCompleted || res.Outputs["n"] != 30 || res.Outputs["more"] != true {
		t.Fatalf("answered: %+v", res)
	}

	parentBefore := storedAs(t, st, run, runtime.StatusCompleted, "")
	cpsBefore, _ := st.Checkpoints(ctx, run, 0)
	fork, err := result(e.Fork(ctx, run, "before-answer", ResumeOptions{}))
	if err != nil || fork.Status != runtime.StatusWaiting || fork.RunID == run {
		t.Fatalf("fork: %v %+v, want a new run waiting", err, fork)
	}
	if res, _ = answerText(t, e, fork.RunID, "ask_more", "false"); res.Outputs["n"] != 30 || res.Outputs["more"] != false {
		t.Fatalf("the fork answered: %+v", res)
	}
	parentAfter := storedAs(t, st, run, runtime.StatusCompleted, "")
	cpsAfter, _ := st.Checkpoints(ctx, run, 0)
	if !reflect.DeepEqual(parentBefore.Outputs, parentAfter.Outputs) || !reflect.DeepEqual(cpsBefore, cpsAfter) {
		t.Fatalf("the parent changed:\nbefore %v %v\nafter %v %v", parentBefore.Outputs, cpsBefore, parentAfter.Outputs, cpsAfter)
	}
	if f, _ := st.Run(ctx, fork.RunID); f.ParentRun != run || f.ParentSeq != 4 {
		t.Fatalf("the fork's parent: %s at %d, want %s at 4", f.ParentRun, f.ParentSeq, run)
	}

	if snap, err := st.Rollback(ctx, run, "before-answer"); err != nil || snap.Seq != 4 {
		t.Fatalf("rollback: %v %+v", err, snap)
	}
	storedAs(t, st, run, runtime.StatusStopped, "")
	if cps, _ := st.Checkpoints(ctx, run, 0); len(cps) != 4 {
		t.Fatalf("after the rollback the run goes on from %d checkpoints, want 4", len(cps))
	}
	snaps, _ := st.Snapshots(ctx, run)
	rolled := false
	for _, s := range snaps {
		rolled = rolled || strings.HasPrefix(s.Label, "rollback-to-before-answer") && s.Kind == store.KindRollback && s.Seq == 4
	}
	if !rolled {
		t.Fatalf("no rollback snapshot: %+v", snaps)
	}
	log := &runtimetest.Events{}
	res, err = result(e.Resume(ctx, run, ResumeOptions{RunOptions: RunOptions{Sink: log}}))
	if err != nil || res.Status != runtime.StatusWaiting || res.Pending.Path != "ask_more" {
		t.Fatalf("resume after the rollback: %v %+v", err, res)
	}
	if started := log.Paths(runtime.EventNodeStarted); !reflect.DeepEqual(started, []string{"ask_more"}) {
		t.Fatalf("the resume after the rollback started %v: finished nodes ran again", started)
	}
}

// TestAnswerRightAfterRollback: a rolled-back run resumed with someone
// to answer asks its question again and takes the answer at once, with
// no bare resume first; with nobody to answer, it waits on that
// question. (The behaviour of cmd/flowrun's
// TestHITL02AnswerRightAfterRollback, which keeps how resume --answer
// reads an answer for a run not yet waiting, and its wording.)
func TestAnswerRightAfterRollback(t *testing.T) {
	e, st := newEngine(t, nil, nil)
	ctx := context.Background()
	res, err := result(e.Start(ctx, loadTestdata(t, "steps.yaml"), nil, RunOptions{}))
	if err != nil {
		t.Fatal(err)
	}
	run := res.RunID
	if _, err := st.Snapshot(ctx, run, "asked"); err != nil {
		t.Fatal(err)
	}
	if res, _ = answerText(t, e, run, "ask_more", "true"); res.Outputs["more"] != true {
		t.Fatalf("answered: %+v", res)
	}
	if _, err := st.Rollback(ctx, run, "asked"); err != nil {
		t.Fatal(err)
	}
	if res, err = result(e.Resume(ctx, run, ResumeOptions{})); err != nil || res.Status != runtime.StatusWaiting {
		t.Fatalf("resumed with nobody to answer: %v %+v", err, res)
	}
	storedAs(t, st, run, runtime.StatusWaiting, "ask_more")
	if _, err := st.Rollback(ctx, run, "asked"); err != nil {
		t.Fatal(err)
	}
	log := &runtimetest.Events{}
	res, err = result(e.Resume(ctx, run, ResumeOptions{RunOptions: RunOptions{Human: scripted{"ask_more": {false}}, Sink: log}}))
	if err != nil || res.Status != runtime.StatusCompleted || res.Outputs["more"] != false || res.Outputs["n"] != 30 {
		t.Fatalf("answered after the rollback: %v %+v", err, res)
	}
	if started := log.Paths(runtime.EventNodeStarted); !reflect.DeepEqual(started, []string{"ask_more", "done"}) {
		t.Fatalf("the answer after the rollback started %v: finished nodes ran again", started)
	}
}

// TestConfirmationSaysWhatWillRun: the question a confirmation asks,
// as the run returns it and as the store keeps it while the run waits,
// says what will run (a tool node's tool and its arguments, rendered)
// and the output that led there. (The data behind cmd/flowrun's
// TestHITLConfirmShowsContext, which keeps how the prompt, the waiting
// message and show print it.)
func TestConfirmationSaysWhatWillRun(t *testing.T) {
	sandboxtest.NeedPython(t)
	e, st := newEngine(t, nil, nil)
	res, err := result(e.Start(context.Background(), loadTestdata(t, "confirmcode.yaml"), nil, RunOptions{}))
	if err != nil || res.Status != runtime.StatusWaiting {
		t.Fatalf("start: %v %+v", err, res)
	}
	want := &runtime.QuestionContext{Kind: "tool", Tool: "python_execute", Args: map[string]any{"code": "print(41 + 1)"},
		After: "count", Output: map[string]any{"n": 41}}
	if got := res.Pending.Context; !reflect.DeepEqual(got, want) {
		t.Fatalf("the confirmation's context: %+v, want %+v", got, want)
	}
	stored := storedAs(t, st, res.RunID, runtime.StatusWaiting, "compute").Pending.Context
	if stored == nil || stored.Tool != "python_execute" || stored.After != "count" || !reflect.DeepEqual(stored.Args, map[string]any{"code": "print(41 + 1)"}) {
		t.Fatalf("the stored confirmation's context: %+v", stored)
	}
}

// TestResumeSeesEveryFileTheLoadRead: a run whose question file or
// called pipeline changed since it started is not resumed: the
// *durable.ChangedError names the file and the line, old and new; with
// AllowChanged it goes on. (The behaviour of cmd/flowrun's
// TestResumeSeesEveryFile, which keeps the --allow-changed hint.)
func TestResumeSeesEveryFileTheLoadRead(t *testing.T) {
	dir := t.TempDir()
	for _, name := range []string{"p.yaml", "question.md", "sub.yaml"} {
		if err := os.WriteFile(filepath.Join(dir, name), []byte(testdata(t, filepath.Join("guarded", name))), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	edit := func(name, old, new string) {
		t.Helper()
		b, err := os.ReadFile(filepath.Join(dir, name))
		if err == nil {
			err = os.WriteFile(filepath.Join(dir, name), []byte(strings.Replace(string(b), old, new, 1)), 0o644)
		}
		if err != nil {
			t.Fatal(err)
		}
	}
	e, _ := newEngine(t, nil, nil)
	ctx := context.Background()
	p, ds := dsl.Load(filepath.Join(dir, "p.yaml"))
	if p == nil {
		t.Fatal(ds)
	}
	res, err := result(e.Start(ctx, p, nil, RunOptions{}))
	if err != nil || res.Status != runtime.StatusWaiting {
		t.Fatalf("start: %v %+v", err, res)
	}
	for _, c := range []struct{ file, old, new, want string }{
		{"question.md", "It is ready.", "It is NOT ready.", "question.md:\n  line 2: was \"It is ready.\", now \"It is NOT ready.\""},
		{"sub.yaml", "inputs.n * 2", "inputs.n * 3", "sub.yaml:\n  line 5: was \"  doubled: inputs.n * 2\", now \"  doubled: inputs.n * 3\""},
	} {
		edit(c.file, c.old, c.new)
		var changed *durable.ChangedError
		if _, err := result(e.Answer(ctx, res.RunID, true, ResumeOptions{})); !errors.As(err, &changed) || !strings.Contains(err.Error(), c.want) {
			t.Fatalf("resume after %s changed: %v, want a ChangedError with\n%s", c.file, err, c.want)
		}
		edit(c.file, c.new, c.old)
	}
	edit("sub.yaml", "inputs.n * 2", "inputs.n * 3")
	res, err = result(e.Answer(ctx, res.RunID, true, ResumeOptions{AllowChanged: true}))
	if err != nil || res.Status != runtime.StatusCompleted || res.Outputs["approved"] != true {
		t.Fatalf("with AllowChanged: %v %+v", err, res)
	}
}
