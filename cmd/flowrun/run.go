package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"strconv"
	"strings"

	"github.com/flowrun/flowrun/dsl"
	"github.com/flowrun/flowrun/engine"
	"github.com/flowrun/flowrun/eventview"
	"github.com/flowrun/flowrun/internal/termview"
	"github.com/flowrun/flowrun/mcpserve"
	"github.com/flowrun/flowrun/runtime"
	"github.com/flowrun/flowrun/store"
)

// inputArgs are the flags that give a run's inputs.
type inputArgs struct {
	pairs inputFlags
	file  *string
}

func (a *inputArgs) register(fs *flag.FlagSet) {
	fs.Var(&a.pairs, "input", "an input as `name=value` (repeatable); JSON values are parsed for non-string inputs")
	a.file = fs.String("inputs", "", "read inputs from a JSON or YAML `file`")
}

// load parses the flags of command cmd, loads the one pipeline they name
// and reads its inputs; it returns an exit code when the command should
// stop.
func (a *inputArgs) load(fs *flag.FlagSet, args []string, cmd string, stdout, stderr io.Writer) (*dsl.Pipeline, map[string]any, int, bool) {
	files, code, ok := parseFlags(fs, args, stdout, stderr)
	if !ok {
		return nil, nil, code, false
	}
	if len(files) != 1 {
		fmt.Fprintf(stderr, "flowrun %s: name one pipeline file (see flowrun %s --help)\n", cmd, cmd)
		return nil, nil, exitInvalid, false
	}
	p := loadPipeline(files[0], stderr)
	if p == nil {
		return nil, nil, exitInvalid, false
	}
	inputs, err := engine.ReadInputs(p, *a.file, a.pairs)
	if err != nil {
		return nil, nil, fail(stderr, "flowrun", err), false
	}
	return p, inputs, exitOK, true
}

// inputFlags collects repeated --input k=v flags.
type inputFlags []string

func (f *inputFlags) String() string     { return strings.Join(*f, ",") }
func (f *inputFlags) Set(v string) error { *f = append(*f, v); return nil }

func runCmd(ctx context.Context, args []string, stdin io.Reader, stdout, stderr io.Writer) int {
	fs := newFlagSet("run", "flowrun [run] FILE [--input k=v ...] [--inputs FILE] [--json]\n\nRuns a pipeline. On success stdout holds its outputs as one JSON object;\nprogress goes to stderr. Exit 0 completed, 1 failed or stopped, 2 invalid.")
	var in inputArgs
	in.register(fs)
	asJSON := fs.Bool("json", false, "print one JSON event per line on stdout instead of the outputs")
	showPlan := fs.Bool("plan", false, "print the most the run can call and cost (as flowrun plan does) on stderr, then run")
	stream := streamFlag(fs)
	storePath := storeFlag(fs)
	var mf modelFlags
	mf.register(fs)
	var hf humanFlags
	hf.register(fs)
	p, inputs, code, ok := in.load(fs, args, "run", stdout, stderr)
	if !ok {
		return code
	}
	if *showPlan {
		makePlan(p, inputs, mf.models).Write(stderr)
		fmt.Fprintln(stderr)
	}
	if p.Limits.MaxCostUSD > 0 {
		warnUnpriced(stderr, "flowrun run", p, mf.models)
	}
	eng, err := mf.engine(*storePath, stderr)
	if err != nil {
		return fail(stderr, "flowrun", err)
	}
	defer eng.Close()
	live := liveView(*asJSON, stream, stderr)
	run, err := eng.Start(ctx, p, inputs, engine.RunOptions{Sink: progressSink(*asJSON, stdout, live),
		OnDelta: live.OnDelta(), Human: newHuman(hf, stdin, stderr), Auto: hf.auto, MaxLoops: hf.maxLoops})
	if err != nil {
		return fail(stderr, "flowrun", err)
	}
	return report(run.Wait(), *asJSON, stdout, stderr)
}

func storeFlag(fs *flag.FlagSet) *string {
	return fs.String("store", store.DefaultPath(), "the run store (SQLite `file`; FLOWRUN_STORE sets the default)")
}

func progressSink(asJSON bool, stdout io.Writer, live *termview.Timeline) runtime.EventSink {
	if asJSON {
		return termview.JSONEvents{W: stdout}
	}
	return live
}

// liveView is the progress view on stderr; it also shows model text as
// it streams in when --stream says so, by default on a terminal.
func liveView(asJSON bool, stream *optionalBool, stderr io.Writer) *termview.Timeline {
	t := &termview.Timeline{W: stderr}
	if asJSON {
		return t
	}
	if stream.set {
		t.Stream = stream.on
	} else if f, ok := termview.FileOf(stderr); ok && termview.IsTerminal(f) {
		t.Stream = true
	}
	return t
}

// optionalBool is a boolean flag that knows whether it was given.
type optionalBool struct{ set, on bool }

func (b *optionalBool) String() string   { return strconv.FormatBool(b.on) }
func (b *optionalBool) IsBoolFlag() bool { return true }
func (b *optionalBool) Set(v string) error {
	on, err := strconv.ParseBool(v)
	if err != nil {
		return errors.New("give true or false")
	}
	b.set, b.on = true, on
	return nil
}

func streamFlag(fs *flag.FlagSet) *optionalBool {
	b := &optionalBool{}
	fs.Var(b, "stream", "show the model's text as it arrives, under the live line (default: on when stderr is a terminal; --stream=false turns it off)")
	return b
}

// report prints how a run ended and returns the exit code.
func report(res *runtime.Result, asJSON bool, stdout, stderr io.Writer) int {
	if !asJSON && res.Outputs != nil && res.Status == runtime.StatusCompleted {
		writeJSON(stdout, res.Outputs)
	}
	switch res.Status {
	case runtime.StatusCompleted:
		return exitOK
	case runtime.StatusWaiting:
		q := res.Pending
		if q.Kind == runtime.QuestionConfirm {
			fmt.Fprintf(stderr, "flowrun: run %s is waiting: running %s needs your confirmation.\n", res.RunID, q.Path)
		} else {
			fmt.Fprintf(stderr, "flowrun: run %s is waiting for an answer (%s): %s\n", res.RunID, q.Path, q.Text)
		}
		for _, l := range eventview.QuestionContext(q) {
			fmt.Fprintf(stderr, "  %s\n", l)
		}
		fmt.Fprintf(stderr, "To continue: %s\n", mcpserve.AnswerCommand(res.RunID, q))
		return exitOK
	case runtime.StatusStopped:
		hint := "flowrun resume " + res.RunID
		switch {
		case res.Pending != nil:
			hint = mcpserve.AnswerCommand(res.RunID, res.Pending)
		case res.Limit != "":
			hint = "raise the limit in the pipeline, then flowrun resume " + res.RunID + " --allow-changed"
		}
		fmt.Fprintf(stderr, "flowrun: run %s stopped: %s\nTo continue: %s\n", res.RunID, res.Reason, hint)
	default:
		fmt.Fprintf(stderr, "flowrun: run %s failed: %s\n", res.RunID, explain(res.Err))
		var lost *store.LostError
		if !errors.As(res.Err, &lost) {
			fmt.Fprintf(stderr, "After fixing the cause, continue it with: flowrun resume %s\n", res.RunID)
		}
	}
	return exitFailed
}

func firstLine(s string) string {
	line, _, _ := strings.Cut(s, "\n")
	return line
}

// loadPipeline loads a pipeline, printing its diagnostics (warnings too);
// nil when it does not load.
func loadPipeline(path string, stderr io.Writer) *dsl.Pipeline {
	p, ds := dsl.Load(path)
	if len(ds) > 0 {
		fmt.Fprintln(stderr, diagnosticsText(ds))
	}
	return p
}
