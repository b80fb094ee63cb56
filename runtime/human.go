package runtime

import (
	"context"
	"fmt"

	"github.com/flowrun/flowrun/dsl"
)

// Question is something a run asks a person: an ask node's question, or
// whether to run a node marked confirm: true.
type Question struct {
	Path       string         `json:"path"`
	Node       string         `json:"node"`
	Kind       string         `json:"kind"` // QuestionAsk or QuestionConfirm
	Text       string         `json:"text"`
	Schema     map[string]any `json:"schema,omitempty"`
	Default    any            `json:"default,omitempty"`
	HasDefault bool           `json:"has_default,omitempty"`
	// Context is what a person needs to answer: what will run and the
	// output that led there. Every front end shows it.
	Context *QuestionContext `json:"context,omitempty"`
}

// QuestionContext is what a question is about. For a confirmation: the
// node that will run (its kind and, as far as its executor can say
// before it runs, its model, tools, rendered prompt or code); for both
// kinds: the node that finished before it and its output.
type QuestionContext struct {
	Kind     string   `json:"kind,omitempty"`
	Model    string   `json:"model,omitempty"`
	Tools    []string `json:"tools,omitempty"`
	System   string   `json:"system,omitempty"`
	Prompt   string   `json:"prompt,omitempty"`
	Language string   `json:"language,omitempty"`
	Code     string   `json:"code,omitempty"`
	// Tool and Args: the tool a tool node will call, with its arguments.
	Tool string `json:"tool,omitempty"`
	Args any    `json:"args,omitempty"`
	// After is the path of the node that finished last before the
	// question in its scope, Output that node's output. A branch is passed
	// over: its output says where it went, and the node before it made
	// what its condition read (a classifier's confidence, say).
	After  string `json:"after,omitempty"`
	Output any    `json:"output,omitempty"`
}

// Previewer is implemented by executors that can say what node n will
// do before it runs, for a person asked to confirm it. Preview must have
// no effect: it renders, it does not call.
type Previewer interface {
	Preview(ctx context.Context, s *Scope, n *dsl.Node) QuestionContext
}

// Question kinds.
const (
	QuestionAsk     = "ask"
	QuestionConfirm = "confirm"
)

// Human answers questions. ok is false when nobody can answer now (no
// terminal, --no-input): the run then waits, resumable with the answer.
type Human interface {
	Answer(ctx context.Context, q Question) (answer any, ok bool, err error)
}

// AutoAnswer is what auto-advance answers q with: yes to a confirmation,
// else the question's default. ok is false when q has neither, so a
// person must answer even under auto-advance.
func AutoAnswer(q Question) (answer any, ok bool) {
	if q.Kind == QuestionConfirm {
		return true, true
	}
	return q.Default, q.HasDefault
}

// WaitError pauses a run until a question is answered. Like a StopError it
// is never retried or routed by on_error.
type WaitError struct {
	Question Question
}

func (e *WaitError) Error() string {
	return fmt.Sprintf("waiting for an answer to %q: %s", e.Question.Path, e.Question.Text)
}

// DeclinedError stops a run because a confirmation was answered no. The
// run ends stopped with the question still pending, so that answering
// yes on resume runs the node. Like a StopError it is never retried or
// routed by on_error.
type DeclinedError struct {
	Question Question
}

func (e *DeclinedError) Error() string {
	return fmt.Sprintf("running %s was declined (the confirmation was answered no)", e.Question.Path)
}

// Ask puts a question to the run's human. It returns a *WaitError when
// the question cannot be answered now.
func (s *Scope) Ask(ctx context.Context, q Question) (any, error) {
	if s.ledID != "" {
		if q.Context == nil {
			q.Context = &QuestionContext{}
		}
		q.Context.After, q.Context.Output = s.Path(s.ledID), s.led
	}
	var a any
	ok := false
	if s.run.human != nil {
		var err error
		if a, ok, err = s.run.human.Answer(ctx, q); err != nil {
			return nil, err
		}
	}
	e := Event{Type: EventQuestion, Path: q.Path, Node: q.Node, Kind: q.Kind, Message: q.Text}
	if !ok {
		e.Status = StatusWaiting
		s.Emit(e)
		return nil, &WaitError{Question: q}
	}
	e.Output = a
	s.Emit(e)
	return a, nil
}

// confirm asks whether to run n, a node marked confirm: true, saying
// what it will do.
func (s *Scope) confirm(ctx context.Context, n *dsl.Node) error {
	path := s.Path(n.ID)
	qc := QuestionContext{Kind: string(n.Kind)}
	if p, ok := s.run.kinds[n.Kind].(Previewer); ok {
		qc = p.Preview(ctx, s, n)
		qc.Kind = string(n.Kind)
	}
	q := Question{Path: path, Node: n.ID, Kind: QuestionConfirm, Text: fmt.Sprintf("run %s?", path),
		Schema: map[string]any{"type": "boolean"}, Default: true, HasDefault: true, Context: &qc}
	a, err := s.Ask(ctx, q)
	if err != nil {
		return err
	}
	if yes, _ := a.(bool); !yes {
		return &DeclinedError{Question: q}
	}
	return nil
}

// MaxLoops caps every loop's iterations when it is above zero (--max-loops).
func (s *Scope) MaxLoops() int { return s.run.maxLoops }
