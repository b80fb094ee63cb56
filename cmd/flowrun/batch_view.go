package main

import (
	"context"
	"fmt"
	"io"
	"slices"

	"github.com/flowrun/flowrun/batch"
	"github.com/flowrun/flowrun/batch/batchtext"
	"github.com/flowrun/flowrun/internal/termview"
	"github.com/flowrun/flowrun/store"
)

// batchViewCmd runs the batch subcommands that read a batch back: show,
// compare and report. handled is false for any other subcommand.
func batchViewCmd(ctx context.Context, sub string, args []string, stdout, stderr io.Writer) (code int, handled bool) {
	switch sub {
	case "show":
		return batchShowCmd(ctx, args, stdout, stderr), true
	case "compare":
		return batchCompareCmd(ctx, args, stdout, stderr), true
	case "report":
		return batchReportCmd(ctx, args, stdout, stderr), true
	case "rate":
		return batchRateCmd(ctx, args, stdout, stderr), true
	case "label":
		return batchLabelCmd(ctx, args, stdout, stderr), true
	}
	return 0, false
}

func batchesCmd(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	fs := newFlagSet("batches", "flowrun batches [--json]\n\nLists batches, newest first: their status, items done, pass rate and cost.")
	asJSON := fs.Bool("json", false, "print each batch's summary (without its items) as a JSON list")
	storePath := storeFlag(fs)
	rest, code, ok := parseFlags(fs, args, stdout, stderr)
	if !ok {
		return code
	}
	if len(rest) > 0 {
		fmt.Fprintf(stderr, "flowrun batches: unexpected %q (did you mean flowrun batch show %s?)\n", rest[0], rest[0])
		return exitInvalid
	}
	var sums []*batch.Summary
	st, missing, ok := readStore(*storePath, stderr)
	switch {
	case ok:
		defer st.Close()
		var err error
		if sums, err = batch.Summaries(ctx, st); err != nil {
			return storeError(err, stderr)
		}
	case !missing:
		return exitFailed
	}
	if *asJSON {
		if sums == nil {
			sums = []*batch.Summary{}
		}
		return writeJSON(stdout, sums)
	}
	out := termview.Text{W: stdout}
	if len(sums) == 0 {
		fmt.Fprintln(out, "no batches yet: flowrun batch PIPELINE --dataset FILE runs one")
		return exitOK
	}
	batchtext.WriteList(out, sums)
	return exitOK
}

func batchShowCmd(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	fs := newFlagSet("batch show", "flowrun batch show BATCH [--item KEY | --failures] [--format text|json|jsonl|csv]\n\nA batch's summary (items, pass rate with its 95% interval, other metrics, human\nratings and their agreement with the metrics, cost, tokens, latency, failures by\nclass, slowest and most expensive items) and one line per item. --item shows\none item whole: its inputs, the dataset fields its metrics read, its outputs,\neach metric, the judge's reasoning, its rating and error; --failures shows every\nitem that did not pass so. jsonl and csv export the per-item table, one row per\nitem, with inputs, expected and outputs as JSON; json is the whole summary.\nBATCH is an id, an unambiguous prefix of one, or last.")
	format := fs.String("format", "text", "text, json (the summary), jsonl or csv (the item table)")
	itemKey := fs.String("item", "", "show this item (its `key`) whole")
	failures := fs.Bool("failures", false, "show every item that did not pass, whole")
	return storeCmd(fs, args, stdout, stderr, 1, "flowrun batch show: name one batch (flowrun batches lists them)", true, func(st *store.Store, rest []string) int {
		if !slices.Contains([]string{"text", "json", "jsonl", "csv"}, *format) {
			fmt.Fprintf(stderr, "flowrun batch show: --format %q: give text, json, jsonl or csv\n", *format)
			return exitInvalid
		}
		b, err := st.FindBatch(ctx, rest[0])
		if err != nil {
			return storeError(err, stderr)
		}
		s, err := batch.SummarizeDetailed(ctx, st, b)
		if err != nil {
			return storeError(err, stderr)
		}
		s.Reason = batchReason(s.ID, s.Status, s.Reason)
		if *itemKey != "" {
			r, ok := s.Row(*itemKey)
			if !ok {
				fmt.Fprintf(stderr, "flowrun batch show: batch %s has no item %q (flowrun batch show %s lists its items)\n", s.ID, *itemKey, s.ID)
				return exitInvalid
			}
			s.Rows = []batch.Row{r}
		} else if *failures {
			s.Rows = s.Failing()
		}
		switch *format {
		case "json":
			return writeJSON(stdout, s)
		case "jsonl":
			return exported(batch.WriteJSONL(termview.JSONLines{W: stdout}, s))
		case "csv":
			return exported(batch.WriteCSV(stdout, s))
		}
		out := termview.Text{W: stdout}
		if *itemKey != "" || *failures {
			for i, r := range s.Rows {
				if i > 0 {
					fmt.Fprintln(out)
				}
				batch.WriteItemText(out, s, r, termview.Width(stdout))
			}
			if len(s.Rows) == 0 {
				fmt.Fprintln(out, "every item passed")
			}
			return exitOK
		}
		batchtext.WriteSummary(out, s, termview.Width(stdout))
		fmt.Fprintf(out, "\nflowrun batch show %s --item KEY shows an item whole; --failures every one that did not pass\n", s.ID)
		return exitOK
	})
}

// exported is the exit code of an export that wrote to stdout.
func exported(err error) int {
	if err != nil {
		return exitFailed
	}
	return exitOK
}

func batchCompareCmd(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	fs := newFlagSet("batch compare", "flowrun batch compare [A] B [--json]\n\nWhat changed from batch A to batch B: first what differs between the pipelines\nthey ran (a diff of the pipeline file and of every prompt, schema or code file\nits load read) and the settings (dataset, model overrides, sampling); then item\nby item (matched by key) the items B fixed and broke, the pass-rate change with\nMcNemar's exact test, and the cost and latency changes; then each fixed and\nbroken item's outputs in A and B. With B alone, A is the batch before B of the\nsame pipeline over the same dataset.")
	asJSON := fs.Bool("json", false, "print the comparison as JSON")
	var gate compareGate
	gate.register(fs)
	var pj pairwiseFlags
	pj.register(fs)
	return storeCmdArgs(fs, args, stdout, stderr, 1, 2, "flowrun batch compare: name two batches, the earlier first, or one to compare with the batch before it (flowrun batches lists them)", true, func(st *store.Store, rest []string) int {
		a, b, err := comparedBatches(ctx, st, rest, stderr)
		if err != nil {
			return storeError(err, stderr)
		}
		if a == nil {
			fmt.Fprintf(stderr, "flowrun batch compare: no batch of %s over %s ran before %s: name the batch to compare it with: flowrun batch compare A %s\n",
				b.Pipeline, b.Dataset, b.ID, b.ID)
			return exitInvalid
		}
		c, err := batch.CompareBatches(ctx, st, a, b)
		if err != nil {
			return storeError(err, stderr)
		}
		judged, err := pj.judge(ctx, st, c, stderr)
		if err != nil {
			return fail(stderr, "flowrun batch compare: --judge", err)
		}
		code := exitOK
		switch {
		case *asJSON && judged != nil:
			code = writeJSON(stdout, map[string]any{"comparison": c, "pairwise": judged})
		case *asJSON:
			code = writeJSON(stdout, c)
		default:
			batchtext.WriteComparison(termview.Text{W: stdout}, c)
			batchtext.WriteSideBySide(termview.Text{W: stdout}, c, termview.Width(stdout))
			batchtext.WritePairwise(termview.Text{W: stdout}, judged)
		}
		if judged != nil && judged.Stopped != "" {
			fmt.Fprintf(stderr, "flowrun batch compare: the --judge stopped: %s; raise --max-cost-usd to judge every item\n", judged.Stopped)
		}
		if err := gate.Check(c); err != nil && code == exitOK {
			return fail(stderr, "flowrun batch compare", err)
		}
		return code
	})
}

// comparedBatches are the batches refs name, A then B; given B alone, A
// is the batch before it (batch.Previous), which it says on stderr, or nil
// when there is none.
func comparedBatches(ctx context.Context, st *store.Store, refs []string, stderr io.Writer) (a, b *store.Batch, err error) {
	if b, err = st.FindBatch(ctx, refs[len(refs)-1]); err != nil {
		return nil, nil, err
	}
	if len(refs) == 2 {
		a, err = st.FindBatch(ctx, refs[0])
		return a, b, err
	}
	if a, err = batch.Previous(ctx, st, b); a != nil {
		fmt.Fprintf(stderr, "comparing with %s, the batch before %s of %s over %s\n", batchName(a), b.ID, b.Pipeline, b.Dataset)
	}
	return a, b, err
}

// batchName is a batch's id with its label, if it has one.
func batchName(b *store.Batch) string {
	if b.Label == "" {
		return b.ID
	}
	return fmt.Sprintf("%s (%q)", b.ID, b.Label)
}

func batchReportCmd(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	fs := newFlagSet("batch report", "flowrun batch report BATCH [--compare A] [-o FILE]\n\nWrites one self-contained HTML page (it opens with no network): the summary,\na pass-rate chart with 95% intervals, a cost histogram, the item table with\nfilters and each item's inputs, expected fields, outputs (grids drawn) and\njudge's reasoning, and each item's run timeline. With --compare, what changed\nsince batch A first, fixed and broken items side by side. Without it, A is the\nbatch before BATCH of the same pipeline over the same dataset, when there is\none (--compare none: no comparison).")
	against := fs.String("compare", "", "compare with this earlier `batch` (A; default: the one before, of the same pipeline and dataset; none: no comparison)")
	out := fs.String("o", "", "the HTML `file` to write (default BATCH.html)")
	return storeCmd(fs, args, stdout, stderr, 1, "flowrun batch report: name one batch (flowrun batches lists them)", true, func(st *store.Store, rest []string) int {
		refs := rest
		if *against != "" {
			refs = []string{*against, rest[0]}
		}
		var a, b *store.Batch
		var err error
		if *against == "none" {
			b, err = st.FindBatch(ctx, rest[0])
		} else {
			a, b, err = comparedBatches(ctx, st, refs, stderr)
		}
		if err != nil {
			return storeError(err, stderr)
		}
		path := *out
		if path == "" {
			path = b.ID + ".html"
		}
		if err := batch.WriteReportFile(ctx, st, path, b, a); err != nil {
			fmt.Fprintf(stderr, "flowrun batch report: %v\n", err)
			return exitFailed
		}
		fmt.Fprintf(termview.Text{W: stdout}, "wrote %s\n", path)
		return exitOK
	})
}

// The view commands are subcommands of flowrun batch, beside run and resume.
func init() {
	for _, sub := range []string{"show", "compare", "report", "rate", "label"} {
		batchCommands[sub] = func(ctx context.Context, args []string, _ io.Reader, stdout, stderr io.Writer) int {
			code, _ := batchViewCmd(ctx, sub, args, stdout, stderr)
			return code
		}
	}
}

func batchRateCmd(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	fs := newFlagSet("batch rate", "flowrun batch rate BATCH ITEM --pass|--fail [--note TEXT]\n\nRecords your verdict on one item of a batch (ITEM is its key), replacing any\nearlier one: the ratings are the metric human, which batch show, compare and\nreport use, with their agreement (Cohen's kappa) with each pass/fail metric.")
	pass := fs.Bool("pass", false, "the item passes")
	failed := fs.Bool("fail", false, "the item fails")
	note := fs.String("note", "", "why, in a few words")
	return storeCmd(fs, args, stdout, stderr, 2, "flowrun batch rate: name a batch and one of its items, then --pass or --fail", false, func(st *store.Store, rest []string) int {
		if *pass == *failed {
			fmt.Fprintln(stderr, "flowrun batch rate: give exactly one of --pass and --fail")
			return exitInvalid
		}
		b, err := st.FindBatch(ctx, rest[0])
		if err != nil {
			return storeError(err, stderr)
		}
		if err := st.Rate(ctx, &store.Rating{Batch: b.ID, Key: rest[1], Pass: *pass, Note: *note}); err != nil {
			return storeError(err, stderr)
		}
		verdict := "fail"
		if *pass {
			verdict = "pass"
		}
		fmt.Fprintf(termview.Text{W: stdout}, "rated %s in batch %s: %s\n", rest[1], b.ID, verdict)
		return exitOK
	})
}

func batchLabelCmd(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	fs := newFlagSet("batch label", "flowrun batch label BATCH TEXT [--description SENTENCE]\n\nNames a batch after it ran, as flowrun batch --label does, replacing its\nlabel and description: batches, batch show, compare, the report and the web UI\nshow them.")
	description := fs.String("description", "", "say in a `sentence` what the batch tried")
	return storeCmd(fs, args, stdout, stderr, 2, "flowrun batch label: name a batch and its label: flowrun batch label BATCH TEXT", false, func(st *store.Store, rest []string) int {
		b, err := st.FindBatch(ctx, rest[0])
		if err != nil {
			return storeError(err, stderr)
		}
		if err := st.LabelBatch(ctx, b.ID, rest[1], *description); err != nil {
			return storeError(err, stderr)
		}
		fmt.Fprintf(termview.Text{W: stdout}, "labelled batch %s %q\n", b.ID, rest[1])
		return exitOK
	})
}
