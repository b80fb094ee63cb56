package main

import (
	"bufio"
	"context"
	"flag"
	"fmt"
	"io"
	"os"
	"strings"
	"sync"

	"github.com/flowrun/flowrun/engine"
	"github.com/flowrun/flowrun/eventview"
	"github.com/flowrun/flowrun/internal/termview"
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

// terminalHuman answers questions: with --auto, then at the terminal's
// prompt. With neither the run waits.
type terminalHuman struct {
	mu          sync.Mutex
	in          *bufio.Reader
	out         io.Writer
	interactive bool
	auto        bool
}

// newHuman reads answers from stdin when it is a terminal (or when
// FLOWRUN_INTERACTIVE=1 says a program plays the terminal), unless --no-input.
func newHuman(f humanFlags, stdin io.Reader, out io.Writer) *terminalHuman {
	file, isFile := stdin.(*os.File)
	interactive := !f.noInput && (os.Getenv("FLOWRUN_INTERACTIVE") == "1" || (isFile && termview.IsTerminal(file)))
	return &terminalHuman{in: bufio.NewReader(stdin), out: out, interactive: interactive, auto: f.auto}
}

func (h *terminalHuman) Answer(ctx context.Context, q runtime.Question) (any, bool, error) {
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.auto {
		if a, ok := runtime.AutoAnswer(q); ok {
			return a, true, nil
		}
	}
	if !h.interactive {
		return nil, false, nil
	}
	for {
		fmt.Fprintln(h.out)
		for _, l := range eventview.QuestionContext(&q) {
			fmt.Fprintf(h.out, "  %s\n", l)
		}
		fmt.Fprintf(h.out, "? %s\n", q.Text)
		fmt.Fprintf(h.out, "  (%s) > ", engine.AnswerHint(q))
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
		a, perr := engine.ParseAnswer(q.Schema, line)
		if perr == nil {
			perr = jsonvalue.Validate(q.Schema, a)
		}
		if perr == nil {
			return a, true, nil
		}
		fmt.Fprintf(h.out, "  not a valid answer: %v\n", perr)
	}
}
