package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"io/fs"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/flowrun/flowrun/engine"
	"github.com/flowrun/flowrun/eventview"
	"github.com/flowrun/flowrun/figures"
	"github.com/flowrun/flowrun/internal/termview"
	"github.com/flowrun/flowrun/mcpserve"
	"github.com/flowrun/flowrun/runtime"
	"github.com/flowrun/flowrun/store"
)

// readStore opens the store for a command that only reads it, so that it
// works where flowrun may not write. missing says there is no store yet.
func readStore(path string, stderr io.Writer) (st *store.Store, missing, ok bool) {
	st, err := store.OpenReadOnly(path)
	switch {
	case errors.Is(err, fs.ErrNotExist):
		return nil, true, false
	case err != nil:
		fmt.Fprintf(stderr, "flowrun: %v\n", err)
		return nil, false, false
	}
	return st, false, true
}

// storeCmd runs a command that works on the run store: it parses fs's
// flags (and --store), requires nargs positional arguments (else prints
// usage and exits 2), opens the store (to read only, for a command that
// only reads) and calls do.
func storeCmd(fs *flag.FlagSet, args []string, stdout, stderr io.Writer, nargs int, usage string, readOnly bool, do func(st *store.Store, rest []string) int) int {
	return storeCmdArgs(fs, args, stdout, stderr, nargs, nargs, usage, readOnly, do)
}

// storeCmdArgs is storeCmd for a command that takes from least to most
// arguments.
func storeCmdArgs(fs *flag.FlagSet, args []string, stdout, stderr io.Writer, least, most int, usage string, readOnly bool, do func(st *store.Store, rest []string) int) int {
	storePath := storeFlag(fs)
	rest, code, ok := parseFlags(fs, args, stdout, stderr)
	if !ok {
		return code
	}
	if len(rest) < least || len(rest) > most {
		fmt.Fprintln(stderr, usage)
		return exitInvalid
	}
	st, code, ok := storeFor(*storePath, readOnly, stderr)
	if !ok {
		return code
	}
	defer st.Close()
	return do(st, rest)
}

// storeFor opens the store at path for a command, to read only when
// readOnly; else it prints why not and returns the exit code: a store
// that is not there is a usage error for a command that reads it.
func storeFor(path string, readOnly bool, stderr io.Writer) (*store.Store, int, bool) {
	if !readOnly {
		st, err := store.Open(path)
		if err != nil {
			fmt.Fprintf(stderr, "flowrun: %v\n", err)
			return nil, exitFailed, false
		}
		return st, exitOK, true
	}
	st, missing, ok := readStore(path, stderr)
	if missing {
		fmt.Fprintf(stderr, "flowrun: no run store at %s: no run has been recorded there (--store or FLOWRUN_STORE names another)\n", path)
		return nil, exitInvalid, false
	}
	return st, exitFailed, ok
}

// storeError prints a store error; unknown runs and snapshots are usage errors.
func storeError(err error, stderr io.Writer) int { return fail(stderr, "flowrun", err) }

func resumeCmd(ctx context.Context, args []string, stdin io.Reader, stdout, stderr io.Writer) int {
	fs := newFlagSet("resume", "flowrun resume RUN [--answer field=value ...] [--from SNAPSHOT|CHECKPOINT] [--set state.NAME=VALUE ...] [--input NAME=VALUE ...] [--allow-changed] [--json]\n\nContinues a run from its last checkpoint; finished nodes are not run again.\nA run waiting on a question takes its answer with --answer (or --answer-file).\nWith --from, forks: a new run continues from that snapshot or checkpoint\nand the original is left untouched. --set changes a state variable at the\ncheckpoint the run goes on from, --input an input of a fork; each value is\nread as --input reads one and checked against its declared type first.")
	from := fs.String("from", "", "fork from this snapshot `label` or checkpoint number")
	allow := fs.Bool("allow-changed", false, "resume even if the pipeline file changed since the run started")
	asJSON := fs.Bool("json", false, "print one JSON event per line on stdout instead of the outputs")
	stream := streamFlag(fs)
	storePath := storeFlag(fs)
	var mf modelFlags
	mf.register(fs)
	var hf humanFlags
	hf.register(fs)
	var answers inputFlags
	fs.Var(&answers, "answer", "answer the question the run waits on: `field=value` (repeatable), or the value itself")
	answerFile := fs.String("answer-file", "", "read the answer from a JSON or text `file`")
	var sets, inputs inputFlags
	fs.Var(&sets, "set", "go on with state variable NAME set to VALUE: `state.NAME=VALUE` (repeatable)")
	fs.Var(&inputs, "input", "fork with input NAME set to VALUE: `NAME=VALUE` (repeatable; needs --from)")
	rest, code, ok := parseFlags(fs, args, stdout, stderr)
	if !ok {
		return code
	}
	if len(rest) != 1 {
		fmt.Fprintln(stderr, "flowrun resume: name one run (flowrun runs lists them)")
		return exitInvalid
	}
	eng, err := mf.engine(*storePath, stderr)
	if err != nil {
		return fail(stderr, "flowrun resume", err)
	}
	defer eng.Close()
	st, err := eng.Store()
	if err != nil {
		return fail(stderr, "flowrun", err)
	}
	prev, err := st.FindRun(ctx, rest[0])
	if err != nil {
		return storeError(err, stderr)
	}
	hf.auto = hf.auto || prev.Spec.Auto // a run started with --auto goes on with it
	human := newHuman(hf, stdin, stderr)
	live := liveView(*asJSON, stream, stderr)
	o := engine.ResumeOptions{RunOptions: engine.RunOptions{Sink: progressSink(*asJSON, stdout, live), OnDelta: live.OnDelta(),
		Human: human, Auto: hf.auto, MaxLoops: hf.maxLoops}, AllowChanged: *allow, Edits: sets}
	for _, in := range inputs {
		o.Edits = append(o.Edits, "inputs."+in)
	}
	run, later, err := eng.Continue(ctx, prev, engine.Continuation{From: *from, Answers: answers, AnswerFile: *answerFile}, o)
	var misfit *engine.AnswerError
	if errors.As(err, &misfit) {
		fmt.Fprintf(stderr, "flowrun resume: --answer: %v\n", misfit.Err)
		return exitInvalid
	}
	if err != nil {
		return storeError(err, stderr)
	}
	code = report(run.Wait(), *asJSON, stdout, stderr)
	if later != nil && !later.Used() {
		fmt.Fprintf(stderr, "flowrun resume: --answer was not used: the run asked no question\n")
	}
	if later != nil && later.Refused() != nil {
		fmt.Fprintf(stderr, "flowrun resume: %v\n", later.Refused())
		return exitInvalid
	}
	return code
}

func runsCmd(args []string, stdout, stderr io.Writer) int {
	if len(args) > 0 && args[0] == "prune" {
		return pruneCmd(args[1:], stdout, stderr)
	}
	fs := newFlagSet("runs", "flowrun runs [--limit N] [--pipeline FILE|NAME] [--status S] [--batch BATCH] [--batch-items] [--json]\n       flowrun runs prune --older-than 30d\n\nLists runs, newest first: the most recent 20 unless --limit says otherwise.\nRuns made for batch items are left out unless --batch-items or --batch asks for them.")
	asJSON := fs.Bool("json", false, "print the runs as a JSON list")
	limit := fs.Int("limit", 20, "list at most `N` runs, the newest (0 lists all)")
	pipeline := fs.String("pipeline", "", "only runs of this pipeline `file or name`")
	status := fs.String("status", "", "only runs with this `status`: "+strings.Join(runtime.StatusNames(), ", "))
	batchRef := fs.String("batch", "", "only the runs of this `batch`'s items (an id, a prefix of one, or last)")
	batchItems := fs.Bool("batch-items", false, "list the runs made for batch items too")
	storePath := storeFlag(fs)
	rest, code, ok := parseFlags(fs, args, stdout, stderr)
	if !ok {
		return code
	}
	if len(rest) > 0 {
		fmt.Fprintf(stderr, "flowrun runs: unexpected %q (did you mean flowrun show %s?)\n", rest[0], rest[0])
		return exitInvalid
	}
	q := store.RunQuery{PipelineFile: *pipeline, BatchItems: *batchItems, Limit: *limit}
	if *status != "" {
		var err error
		if q.Status, err = runtime.ParseStatus(*status); err != nil {
			fmt.Fprintf(stderr, "flowrun runs: --status %v\n", err)
			return exitInvalid
		}
	}
	if *limit < 0 {
		fmt.Fprintf(stderr, "flowrun runs: --limit %d: give a number of runs, or 0 for all\n", *limit)
		return exitInvalid
	}
	var runs []*store.Run
	total := 0
	st, missing, ok := readStore(*storePath, stderr)
	switch {
	case ok:
		defer st.Close()
		ctx := context.Background()
		if *batchRef != "" {
			b, err := st.FindBatch(ctx, *batchRef)
			if err != nil {
				return storeError(err, stderr)
			}
			q.Batch = b.ID
		}
		var err error
		if runs, total, err = st.RunsMatching(ctx, q); err != nil {
			return storeError(err, stderr)
		}
	case !missing:
		return exitFailed
	}
	if *asJSON {
		out := make([]map[string]any, 0, len(runs))
		for _, r := range runs {
			out = append(out, runJSON(r))
		}
		return writeJSON(stdout, out)
	}
	w := tabwriter.NewWriter(termview.Text{W: stdout}, 0, 0, 2, ' ', 0)
	fmt.Fprintln(w, "ID\tPIPELINE\tSTATUS\tSTARTED\tDURATION\tCOST\tTOKENS")
	for _, r := range runs {
		fmt.Fprintf(w, "%s\t%s\t%s\t%s\t%s\t%s\t%d\n", r.ID, r.Pipeline, r.Status, r.Started.Local().Format("2006-01-02 15:04:05"),
			runDuration(r), figures.USD(r.CostUSD), r.Tokens)
	}
	w.Flush()
	if more := total - len(runs); more > 0 {
		fmt.Fprintf(stdout, "... and %d older (--limit 0 lists all)\n", more)
	}
	if !*batchItems && q.Batch == "" && st != nil {
		if n, err := st.HiddenBatchRuns(context.Background(), q); err == nil && n > 0 {
			fmt.Fprintf(stdout, "%d batch item runs not shown (--batch BATCH or --batch-items lists them)\n", n)
		}
	}
	return exitOK
}

// runJSON is r as the CLI prints it: its reason says what continues it.
func runJSON(r *store.Run) map[string]any {
	m := r.JSON()
	if r.Reason != "" {
		m["reason"] = runReason(r)
	}
	return m
}

func runDuration(r *store.Run) string {
	return figures.Duration(float64(r.Duration()) / float64(time.Millisecond))
}

func pruneCmd(args []string, stdout, stderr io.Writer) int {
	fs := newFlagSet("runs prune", "flowrun runs prune --older-than AGE\n\nDeletes runs that started more than AGE ago (30d, 12h, 90m) and are not running.")
	older := fs.String("older-than", "", "age such as `30d`, 12h or 90m")
	storePath := storeFlag(fs)
	rest, code, ok := parseFlags(fs, args, stdout, stderr)
	if !ok {
		return code
	}
	age, err := figures.ParseAge(*older)
	if err != nil || len(rest) > 0 {
		fmt.Fprintln(stderr, "flowrun runs prune: give --older-than as 30d, 12h or 90m")
		return exitInvalid
	}
	st, code, ok := storeFor(*storePath, false, stderr)
	if !ok {
		return code
	}
	defer st.Close()
	n, err := st.Prune(context.Background(), time.Now().Add(-age))
	if err != nil {
		return storeError(err, stderr)
	}
	fmt.Fprintf(termview.Text{W: stdout}, "deleted %d run(s) older than %s\n", n, *older)
	return exitOK
}

func showCmd(args []string, stdout, stderr io.Writer) int {
	fs := newFlagSet("show", "flowrun show RUN [--json] [--at CHECKPOINT]\n\nPrints a run's timeline: nodes with their paths, durations and errors,\nits inputs, and what each checkpoint changed in its state. With --at,\nprints the state after that checkpoint and what it changed.")
	asJSON := fs.Bool("json", false, "print the run and its events as JSON")
	at := fs.Int64("at", 0, "print the state after checkpoint `N` and what it changed")
	return storeCmd(fs, args, stdout, stderr, 1, "flowrun show: name one run (flowrun runs lists them)", true, func(st *store.Store, rest []string) int {
		if *at > 0 {
			return showAt(st, rest[0], *at, stdout, stderr)
		}
		return show(st, rest[0], *asJSON, stdout, stderr)
	})
}

// readRun reads what flowrun show shows of the run ref names.
func readRun(st *store.Store, ref string) (*eventview.RunView, error) {
	ctx := context.Background()
	r, err := st.FindRun(ctx, ref)
	if err != nil {
		return nil, err
	}
	p, _ := engine.Recorded(r)
	return eventview.ReadRun(ctx, st, r, p, time.Now())
}

func showAt(st *store.Store, runID string, seq int64, stdout, stderr io.Writer) int {
	v, err := readRun(st, runID)
	if err != nil {
		return storeError(err, stderr)
	}
	r := v.Run
	step, ok := eventview.StepAt(v.Steps, seq)
	if !ok {
		fmt.Fprintf(stderr, "flowrun show: run %s has no checkpoint %d (it has %d; flowrun show %s lists them)\n", r.ID, seq, len(v.Steps), r.ID)
		return exitInvalid
	}
	stdout = termview.Text{W: stdout}
	fmt.Fprintf(stdout, "run %s after checkpoint %d (%s)\n", r.ID, step.Seq, step.Path)
	if step.Scoped {
		fmt.Fprintln(stdout, "(a node inside a map item, a parallel branch or a called pipeline: it writes its own scope's state)")
	}
	printChanges(stdout, "changes", step.Changes)
	termview.Values(stdout, "state", step.State)
	fmt.Fprintf(stdout, "to fork from here with an edit: flowrun resume %s --from %d --set state.KEY=VALUE\n", r.ID, step.Seq)
	return exitOK
}

// printChanges prints what a checkpoint changed in the state, a line a
// key, under a title; "no change" when nothing did.
func printChanges(w io.Writer, title string, changes []eventview.Change) {
	if len(changes) == 0 {
		fmt.Fprintf(w, "%s: none\n", title)
		return
	}
	fmt.Fprintf(w, "%s:\n", title)
	for _, c := range changes {
		fmt.Fprintf(w, "  %s\n", c)
	}
}

func show(st *store.Store, runID string, asJSON bool, stdout, stderr io.Writer) int {
	v, err := readRun(st, runID)
	if err != nil {
		return storeError(err, stderr)
	}
	r, events, cps := v.Run, v.Events, v.Checkpoints
	if asJSON {
		m := runJSON(r)
		m["tokens_estimated"] = v.TokensEstimated
		m["events"] = events
		m["checkpoints"] = cps
		m["snapshots"] = v.Snapshots
		return writeJSON(stdout, m)
	}
	stdout = termview.Text{W: stdout}
	fmt.Fprintf(stdout, "run %s  %s (%s)  %s\n", r.ID, r.PipelineName, r.Pipeline, r.Status)
	fmt.Fprintf(stdout, "started %s, %s, %d steps, %d checkpoints, %s, %d tokens",
		r.Started.Local().Format("2006-01-02 15:04:05"), runDuration(r), r.Steps, len(cps), figures.USD(r.CostUSD), r.Tokens)
	if v.TokensEstimated {
		fmt.Fprint(stdout, " (some counted locally: the server reported no usage)")
	}
	fmt.Fprintln(stdout)
	if r.ParentRun != "" {
		fmt.Fprintf(stdout, "forked from run %s at checkpoint %d\n", r.ParentRun, r.ParentSeq)
	}
	for _, e := range events {
		for _, ed := range e.Edits {
			fmt.Fprintf(stdout, "edited %s\n", eventview.EditString(ed))
		}
	}
	termview.Values(stdout, "inputs", r.Inputs)
	tl := &termview.Timeline{W: stdout, Exchange: true}
	for _, e := range events {
		if e.Type == runtime.EventRunStarted {
			continue
		}
		tl.Event(e)
	}
	for _, line := range v.InFlight {
		fmt.Fprintf(stdout, "in flight: %s\n", line)
	}
	termview.Values(stdout, "outputs", r.Outputs)
	if r.Error != "" {
		fmt.Fprintf(stdout, "error: %s\n", r.Error)
	}
	switch {
	case r.Reason == "":
	case r.Status == runtime.StatusWaiting:
		fmt.Fprintln(stdout, r.Reason)
	default:
		fmt.Fprintf(stdout, "%s: %s\n", r.Status, runReason(r))
	}
	if q := r.Pending; q != nil {
		for _, l := range eventview.QuestionContext(q) {
			fmt.Fprintf(stdout, "  %s\n", l)
		}
		fmt.Fprintf(stdout, "to continue: %s\n", mcpserve.AnswerCommand(r.ID, q))
	}
	if len(cps) > 0 {
		fmt.Fprintf(stdout, "checkpoints (flowrun resume %s --from N forks from one):\n", r.ID)
		w := tabwriter.NewWriter(stdout, 0, 0, 2, ' ', 0)
		for _, c := range cps {
			// In-flight records (a long stream writes one every few
			// seconds) are in show --json; nodes are what one forks at.
			if c.InFlight != nil {
				continue
			}
			fmt.Fprintf(w, "  %d\t%s\t%s\n", c.Seq, c.Path, c.Created.Local().Format("2006-01-02 15:04:05.000"))
			if step, ok := eventview.StepAt(v.Steps, c.Seq); ok {
				for _, ch := range step.Changes {
					fmt.Fprintf(w, "  \t\t%s\n", ch)
				}
			}
		}
		w.Flush()
	}
	for _, s := range v.Snapshots {
		fmt.Fprintf(stdout, "snapshot %q at checkpoint %d (%s)\n", s.Label, s.Seq, s.Kind)
	}
	return exitOK
}

func snapshotCmd(args []string, stdout, stderr io.Writer) int {
	fs := newFlagSet("snapshot", "flowrun snapshot RUN --label LABEL\n\nStores an immutable snapshot of the run's current checkpoint.")
	label := fs.String("label", "", "the snapshot's `label` (unique per run)")
	return storeCmd(fs, args, stdout, stderr, 1, "flowrun snapshot: name one run and give --label", false, func(st *store.Store, rest []string) int {
		if *label == "" {
			fmt.Fprintln(stderr, "flowrun snapshot: name one run and give --label")
			return exitInvalid
		}
		r, err := st.FindRun(context.Background(), rest[0])
		if err != nil {
			return storeError(err, stderr)
		}
		s, err := st.Snapshot(context.Background(), r.ID, *label)
		if err != nil {
			return storeError(err, stderr)
		}
		fmt.Fprintf(termview.Text{W: stdout}, "snapshot %q of run %s at checkpoint %d\n", s.Label, s.Run, s.Seq)
		return exitOK
	})
}

func snapshotsCmd(args []string, stdout, stderr io.Writer) int {
	fs := newFlagSet("snapshots", "flowrun snapshots RUN [--json]\n\nLists a run's snapshots.")
	asJSON := fs.Bool("json", false, "print the snapshots as JSON")
	return storeCmd(fs, args, stdout, stderr, 1, "flowrun snapshots: name one run", true, func(st *store.Store, rest []string) int {
		r, err := st.FindRun(context.Background(), rest[0])
		if err != nil {
			return storeError(err, stderr)
		}
		snaps, err := st.Snapshots(context.Background(), r.ID)
		if err != nil {
			return storeError(err, stderr)
		}
		if *asJSON {
			return writeJSON(stdout, snaps)
		}
		w := tabwriter.NewWriter(termview.Text{W: stdout}, 0, 0, 2, ' ', 0)
		fmt.Fprintln(w, "LABEL\tCHECKPOINT\tKIND\tCREATED")
		for _, s := range snaps {
			fmt.Fprintf(w, "%s\t%d\t%s\t%s\n", s.Label, s.Seq, s.Kind, s.Created.Local().Format("2006-01-02 15:04:05"))
		}
		w.Flush()
		return exitOK
	})
}

func rollbackCmd(args []string, stdout, stderr io.Writer) int {
	fs := newFlagSet("rollback", "flowrun rollback RUN SNAPSHOT\n\nMakes a snapshot the run's current state and records a rollback snapshot.\nIt runs nothing: flowrun resume RUN continues from there.")
	return storeCmd(fs, args, stdout, stderr, 2, "flowrun rollback: name a run and one of its snapshots", false, func(st *store.Store, rest []string) int {
		r, err := st.FindRun(context.Background(), rest[0])
		if err != nil {
			return storeError(err, stderr)
		}
		s, err := st.Rollback(context.Background(), r.ID, rest[1])
		if err != nil {
			return storeError(err, stderr)
		}
		fmt.Fprintf(termview.Text{W: stdout}, "run %s rolled back to checkpoint %d (recorded as snapshot %q); continue with: flowrun resume %s\n", s.Run, s.Seq, s.Label, s.Run)
		return exitOK
	})
}
