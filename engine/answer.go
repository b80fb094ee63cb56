package engine

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"sort"
	"strings"
	"sync"

	"github.com/flowrun/flowrun/dsl"
	"github.com/flowrun/flowrun/jsonvalue"
	"github.com/flowrun/flowrun/runtime"
	"github.com/flowrun/flowrun/store"
)

// The one rule for reading an answer typed or sent as text (the CLI's
// --answer and prompt, the web UI's form, MCP elicitation) into the value
// a question's schema asks for.

// ParseAnswer reads an answer given as text: a string is taken as it is,
// yes/no count for booleans, anything else is JSON. An object answer may
// be written as field=value pairs separated by spaces.
func ParseAnswer(schema map[string]any, text string) (any, error) {
	switch schema["type"] {
	case "string":
		return text, nil
	case "boolean":
		switch strings.ToLower(text) {
		case "y", "yes", "true":
			return true, nil
		case "n", "no", "false":
			return false, nil
		}
		return nil, errors.New("answer yes or no")
	case "object":
		if !strings.HasPrefix(strings.TrimSpace(text), "{") {
			return fieldAnswers(schema, strings.Fields(text))
		}
	}
	v, err := jsonvalue.Decode([]byte(text))
	if err != nil {
		return nil, fmt.Errorf("not JSON: %v", err)
	}
	return v, nil
}

// fieldAnswers builds an object answer from field=value pairs, each value
// read by its property's schema.
func fieldAnswers(schema map[string]any, pairs []string) (map[string]any, error) {
	props, _ := schema["properties"].(map[string]any)
	out := map[string]any{}
	for _, p := range pairs {
		k, v, ok := strings.Cut(p, "=")
		if !ok {
			return nil, fmt.Errorf("%q: write field=value", p)
		}
		ps, known := props[k].(map[string]any)
		if !known {
			names := make([]string, 0, len(props))
			for n := range props {
				names = append(names, n)
			}
			sort.Strings(names)
			return nil, fmt.Errorf("no field %q%s (fields: %s)", k, dsl.Suggest(k, names), strings.Join(names, ", "))
		}
		a, err := ParseAnswer(ps, v)
		if err != nil {
			return nil, fmt.Errorf("%s: %v", k, err)
		}
		out[k] = a
	}
	return out, nil
}

// ReadAnswer reads the answer to q from values (field=value pairs for an
// object, else one value) or, when file is set, from that JSON or text
// file, and checks it against q's schema.
func ReadAnswer(q *runtime.Question, values []string, file string) (any, error) {
	schema := schemaOf(q)
	var a any
	var err error
	switch {
	case file != "":
		b, rerr := os.ReadFile(file)
		if rerr != nil {
			return nil, &InputError{fmt.Errorf("reading the answer: %w", rerr)}
		}
		if schema["type"] == "string" && !json.Valid(b) {
			a = strings.TrimRight(string(b), "\n")
		} else {
			a, err = ParseAnswer(map[string]any{}, string(b))
		}
	case schema["type"] == "object":
		a, err = fieldAnswers(schema, values)
	case len(values) == 1:
		a, err = ParseAnswer(schema, values[0])
	default:
		return nil, &InputError{fmt.Errorf("give one answer for %q", q.Path)}
	}
	if err != nil {
		return nil, &InputError{err}
	}
	if err := jsonvalue.Validate(schema, a); err != nil {
		return nil, &InputError{fmt.Errorf("the answer does not match the question's schema: %w", err)}
	}
	return a, nil
}

// schemaOf is the schema q's answer must match: text when it has none.
func schemaOf(q *runtime.Question) map[string]any {
	if q.Schema == nil {
		return map[string]any{"type": "string"}
	}
	return q.Schema
}

// AnswerHint says what form of answer q takes, for a prompt: y/n for a
// confirmation, else its schema's type ("JSON" when it has none; an object
// may be given as field=value pairs), and its default when it has one.
func AnswerHint(q runtime.Question) string {
	hint := "JSON"
	switch t, _ := q.Schema["type"].(string); {
	case q.Kind == runtime.QuestionConfirm:
		hint = "y/n"
	case t == "object":
		hint = "JSON object, or field=value ..."
	case t != "":
		hint = t
	}
	if q.HasDefault {
		hint += ", default " + dsl.Stringify(q.Default)
	}
	return hint
}

// LaterAnswer is an answer given as text before the question it answers
// is known (resuming a run that was rolled back, stopped or forked): it
// answers the first question the run asks, read by that question's schema
// (ReadAnswer). When it does not fit, the run waits on that question and
// Refused says why. Every later question goes to Then (none: the run
// waits).
type LaterAnswer struct {
	Values []string
	File   string
	Then   runtime.Human

	mu      sync.Mutex
	used    bool
	refused error
}

// Answer answers q: the first question with the answer given, every
// later one through Then.
func (l *LaterAnswer) Answer(ctx context.Context, q runtime.Question) (any, bool, error) {
	l.mu.Lock()
	if !l.used {
		l.used = true
		defer l.mu.Unlock()
		a, err := ReadAnswer(&q, l.Values, l.File)
		if err != nil {
			l.refused = fmt.Errorf("the answer given does not fit the question %s asked (%q): %w", q.Path, q.Text, err)
			return nil, false, nil
		}
		return a, true, nil
	}
	l.mu.Unlock()
	if l.Then == nil {
		return nil, false, nil
	}
	return l.Then.Answer(ctx, q)
}

// Used reports whether the run asked a question for the answer.
func (l *LaterAnswer) Used() bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.used
}

// Refused is why the answer did not fit the first question the run asked;
// nil when it fit or no question was asked.
func (l *LaterAnswer) Refused() error {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.refused
}

// AnswerError is an answer given to a resume that does not fit the
// question the run waits on.
type AnswerError struct{ Err error }

func (e *AnswerError) Error() string { return e.Err.Error() }
func (e *AnswerError) Unwrap() error { return e.Err }

// Continuation says how Continue goes on with a run: from a snapshot or
// checkpoint (From, a fork) or from where it stopped, and with an answer
// given as text (Answers or AnswerFile, read as ReadAnswer reads them).
type Continuation struct {
	From       string
	Answers    []string
	AnswerFile string
}

// Continue resumes or forks run as c says. An answer goes to the question
// run waits on, checked before anything runs (a misfit is *AnswerError);
// when it waits on none, or c forks, the answer goes to the first question
// the run asks, and later is that LaterAnswer, to tell once the run has
// ended whether it was used and fitted.
func (e *Engine) Continue(ctx context.Context, run *store.Run, c Continuation, o ResumeOptions) (r *Run, later *LaterAnswer, err error) {
	answering := len(c.Answers) > 0 || c.AnswerFile != ""
	switch {
	case answering && run.Pending != nil && c.From == "":
		a, err := ReadAnswer(run.Pending, c.Answers, c.AnswerFile)
		if err != nil {
			return nil, nil, &AnswerError{err}
		}
		r, err := e.Answer(ctx, run.ID, a, o)
		return r, nil, err
	case answering:
		later = &LaterAnswer{Values: c.Answers, File: c.AnswerFile, Then: o.Human}
		o.Human = later
	}
	if c.From == "" {
		r, err = e.Resume(ctx, run.ID, o)
	} else {
		r, err = e.Fork(ctx, run.ID, c.From, o)
	}
	return r, later, err
}
