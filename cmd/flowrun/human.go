package main

import (
	"bufio"
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"os"
	"sort"
	"strings"
	"sync"

	"github.com/flowrun/flowrun/dsl"
	"github.com/flowrun/flowrun/jsonvalue"
	"github.com/flowrun/flowrun/runtime"
)

// humanFlags are the flags about answering questions, shared by run and resume.
type humanFlags struct {
	auto     bool
	noInput  bool
	maxLoops int
}

func (h *humanFlags) register(fs *flag.FlagSet) {
	fs.BoolVar(&h.auto, "auto", false, "accept every confirmation and answer every ask with its default")
	fs.BoolVar(&h.noInput, "no-input", false, "never prompt: a question makes the run wait, resumable with --answer")
	fs.IntVar(&h.maxLoops, "max-loops", 0, "cap every loop at `N` iterations (for unattended --auto runs)")
}

// terminalHuman answers questions: from --answer first, then --auto, then
// at the terminal's prompt. With none of those the run waits.
type terminalHuman struct {
	mu          sync.Mutex
	in          *bufio.Reader
	out         io.Writer
	interactive bool
	auto        bool
	answers     map[string]any // by question path
	// next answers the first question asked that answers does not, read
	// by that question's schema; refused says why it did not fit (the
	// run then waits on that question).
	next    *laterAnswer
	refused error
}

// laterAnswer is --answer given to a resume before its question is known.
type laterAnswer struct {
	values []string
	file   string
}

// newHuman reads answers from stdin when it is a terminal (or when
// FLOWRUN_INTERACTIVE=1 says a program plays the terminal), unless --no-input.
func newHuman(f humanFlags, stdin io.Reader, out io.Writer) *terminalHuman {
	file, isFile := stdin.(*os.File)
	interactive := !f.noInput && (os.Getenv("FLOWRUN_INTERACTIVE") == "1" || (isFile && isTerminal(file)))
	return &terminalHuman{in: bufio.NewReader(stdin), out: out, interactive: interactive, auto: f.auto, answers: map[string]any{}}
}

func (h *terminalHuman) Answer(ctx context.Context, q runtime.Question) (any, bool, error) {
	h.mu.Lock()
	defer h.mu.Unlock()
	if a, ok := h.answers[q.Path]; ok {
		delete(h.answers, q.Path)
		return a, true, nil
	}
	if next := h.next; next != nil {
		h.next = nil
		a, err := readAnswer(&q, next.values, next.file)
		if err == nil {
			return a, true, nil
		}
		h.refused = fmt.Errorf("the answer given does not fit the question %s asked (%q): %w", q.Path, q.Text, err)
		return nil, false, nil
	}
	if h.auto {
		if a, ok := runtime.AutoAnswer(q); ok {
			return a, true, nil
		}
	}
	if !h.interactive {
		return nil, false, nil
	}
	for {
		fmt.Fprintf(h.out, "\n? %s\n", q.Text)
		hint := typeOf(q.Schema)
		if q.Kind == runtime.QuestionConfirm {
			hint = "y/n"
		}
		if q.HasDefault {
			fmt.Fprintf(h.out, "  (%s, default %s) > ", hint, dsl.Stringify(q.Default))
		} else {
			fmt.Fprintf(h.out, "  (%s) > ", hint)
		}
		line, err := h.in.ReadString('\n')
		if err != nil && line == "" {
			// End of input: nobody is there to answer.
			fmt.Fprintln(h.out)
			return nil, false, nil
		}
		line = strings.TrimSpace(line)
		if line == "" && q.HasDefault {
			return q.Default, true, nil
		}
		a, perr := parseAnswer(q.Schema, line)
		if perr == nil {
			perr = jsonvalue.Validate(q.Schema, a)
		}
		if perr == nil {
			return a, true, nil
		}
		fmt.Fprintf(h.out, "  not a valid answer: %v\n", perr)
	}
}

func typeOf(schema map[string]any) string {
	if t, ok := schema["type"].(string); ok {
		if t == "object" {
			return "JSON object, or field=value ..."
		}
		return t
	}
	return "JSON"
}

// parseAnswer reads an answer typed or passed as text: a string is taken
// as it is, yes/no count for booleans, anything else is JSON. An object
// answer may be written as field=value pairs separated by spaces.
func parseAnswer(schema map[string]any, text string) (any, error) {
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
		return nil, fmt.Errorf("answer yes or no")
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
		a, err := parseAnswer(ps, v)
		if err != nil {
			return nil, fmt.Errorf("%s: %v", k, err)
		}
		out[k] = a
	}
	return out, nil
}

// answerCommand is the command that answers a waiting run's question.
func answerCommand(runID string, q *runtime.Question) string {
	switch {
	case q.Kind == runtime.QuestionConfirm:
		return fmt.Sprintf("flowrun resume %s --answer yes", runID)
	case q.Schema["type"] == "object":
		props, _ := q.Schema["properties"].(map[string]any)
		var fields []string
		for k := range props {
			fields = append(fields, k+"=...")
		}
		sort.Strings(fields)
		return fmt.Sprintf("flowrun resume %s --answer %s   (or --answer-file answer.json)", runID, strings.Join(fields, " --answer "))
	}
	return fmt.Sprintf("flowrun resume %s --answer VALUE   (or --answer-file answer.json)", runID)
}

// readAnswer turns --answer values or an --answer-file into the answer to
// the pending question.
func readAnswer(q *runtime.Question, values []string, file string) (any, error) {
	schema := q.Schema
	if schema == nil {
		schema = map[string]any{"type": "string"}
	}
	var a any
	var err error
	switch {
	case file != "":
		b, rerr := os.ReadFile(file)
		if rerr != nil {
			return nil, fmt.Errorf("--answer-file: %w", rerr)
		}
		if schema["type"] == "string" && !json.Valid(b) {
			a = strings.TrimRight(string(b), "\n")
		} else {
			a, err = parseAnswer(map[string]any{}, string(b))
		}
	case schema["type"] == "object":
		a, err = fieldAnswers(schema, values)
	case len(values) == 1:
		a, err = parseAnswer(schema, values[0])
	default:
		return nil, fmt.Errorf("give one --answer for %q", q.Path)
	}
	if err != nil {
		return nil, fmt.Errorf("--answer: %w", err)
	}
	if err := jsonvalue.Validate(schema, a); err != nil {
		return nil, fmt.Errorf("--answer does not match the question's schema: %w", err)
	}
	return a, nil
}
