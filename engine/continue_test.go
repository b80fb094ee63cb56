package engine

import (
	"context"
	"errors"
	"strings"
	"testing"

	"github.com/flowrun/flowrun/llm/llmtest"
	"github.com/flowrun/flowrun/runtime"
)

const twoQuestions = `
version: 1
name: stars
models:
  default: {model: gpt-4.1-mini}
nodes:
  - id: who
    ask: {question: "Who are you?", schema: {type: string}}
  - id: stars
    ask: {question: "How many stars?", schema: {type: integer}}
  - id: greet
    llm: {prompt: "Greet ${{ nodes.who }} with ${{ nodes.stars }} stars"}
outputs: {greeting: nodes.greet.text}
`

// Continue gives an answer to the question a run waits on, checked before
// anything runs; forking, it keeps the answer for the first question the
// fork asks, and says whether it was used and fitted.
func TestContinue(t *testing.T) {
	fake := llmtest.New(t)
	e, st := newEngine(t, fake, nil)
	ctx := context.Background()
	res, err := result(e.Start(ctx, load(t, "stars.yaml", twoQuestions), nil, RunOptions{}))
	if err != nil || res.Status != runtime.StatusWaiting {
		t.Fatalf("want waiting: %v %+v", err, res)
	}
	run, err := st.Run(ctx, res.RunID)
	if err != nil {
		t.Fatal(err)
	}
	res, later, err := continued(e.Continue(ctx, run, Continuation{Answers: []string{"Ada"}}, ResumeOptions{}))
	if err != nil || later != nil || res.Status != runtime.StatusWaiting || res.Pending.Path != "stars" {
		t.Fatalf("answering who: %v, later %v, %+v", err, later, res)
	}
	if run, err = st.Run(ctx, res.RunID); err != nil {
		t.Fatal(err)
	}
	var misfit *AnswerError
	var input *InputError
	if res, _, err := continued(e.Continue(ctx, run, Continuation{Answers: []string{"many"}}, ResumeOptions{})); !errors.As(err, &misfit) || !errors.As(err, &input) || res != nil {
		t.Fatalf("an answer that is not an integer: %v %+v", err, res)
	}
	// A fork from after who asks stars again: the answer goes there.
	res, later, err = continued(e.Continue(ctx, run, Continuation{From: "1", Answers: []string{"many"}}, ResumeOptions{}))
	if err != nil || later == nil || !later.Used() || later.Refused() == nil || res.Status != runtime.StatusWaiting || res.RunID == run.ID {
		t.Fatalf("a fork with an answer that does not fit: %v, later %+v, %+v", err, later, res)
	}
	fake.Push(llmtest.Text("hello Ada, 5 stars"))
	res, later, err = continued(e.Continue(ctx, run, Continuation{From: "1", Answers: []string{"5"}}, ResumeOptions{}))
	if err != nil || later == nil || !later.Used() || later.Refused() != nil || res.Status != runtime.StatusCompleted {
		t.Fatalf("a fork answered: %v, later %+v, %+v", err, later, res)
	}
	if !strings.Contains(string(fake.Last().Raw), "Greet Ada with 5 stars") {
		t.Errorf("the model was asked %s", fake.Last().Raw)
	}
}
