package main

import (
	"context"
	"fmt"
	"io"
	"slices"
	"strings"
	"text/tabwriter"

	"github.com/flowrun/flowrun/batch"
	"github.com/flowrun/flowrun/figures"
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
	out := textOut{stdout}
	if len(sums) == 0 {
		fmt.Fprintln(out, "no batches yet: flowrun batch PIPELINE --dataset FILE runs one")
		return exitOK
	}
	// Two lines a batch, so that it fits 80 columns: the figures, then
	// what ran over what.
	fmt.Fprintf(out, "%-26s %-9s %9s %6s %9s  %s\n", "BATCH", "STATUS", "DONE", "PASS", "COST", "STARTED")
	for _, s := range sums {
		pass := "-"
		if s.PassRate != nil {
			pass = fmt.Sprintf("%.1f%%", 100*s.PassRate.Rate)
		}
		fmt.Fprintf(out, "%-26s %-9s %9s %6s %9s  %s\n", s.ID, s.Status, fmt.Sprintf("%d/%d", s.Items.Done(), s.Items.Total),
			pass, figures.USD(s.CostUSD), s.Started.Local().Format("01-02 15:04"))
		fmt.Fprintf(out, "  %s\n", clip(s.Pipeline+" on "+s.Dataset, 76))
	}
	return exitOK
}

// clip shortens s to n runes, keeping its end (where a path's file name is).
func clip(s string, n int) string {
	r := []rune(s)
	if len(r) <= n {
		return s
	}
	return "…" + string(r[len(r)-n+1:])
}

func batchShowCmd(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	fs := newFlagSet("batch show", "flowrun batch show BATCH [--format text|json|jsonl|csv]\n\nA batch's summary (items, pass rate with its 95% interval, other metrics, cost,\ntokens, latency, failures by class, slowest and most expensive items) and its\nper-item table. jsonl and csv export the per-item table, one row per item;\njson is the whole summary. BATCH is an id, an unambiguous prefix of one, or last.")
	format := fs.String("format", "text", "text, json (the summary), jsonl or csv (the item table)")
	return storeCmd(fs, args, stdout, stderr, 1, "flowrun batch show: name one batch (flowrun batches lists them)", true, func(st *store.Store, rest []string) int {
		if !slices.Contains([]string{"text", "json", "jsonl", "csv"}, *format) {
			fmt.Fprintf(stderr, "flowrun batch show: --format %q: give text, json, jsonl or csv\n", *format)
			return exitInvalid
		}
		b, err := st.FindBatch(ctx, rest[0])
		if err != nil {
			return storeError(err, stderr)
		}
		s, err := batch.Summarize(ctx, st, b)
		if err != nil {
			return storeError(err, stderr)
		}
		s.Reason = batchReason(s.ID, s.Status, s.Reason)
		switch *format {
		case "json":
			return writeJSON(stdout, s)
		case "jsonl":
			return exported(batch.WriteJSONL(jsonOut{stdout}, s))
		case "csv":
			return exported(batch.WriteCSV(stdout, s))
		}
		printSummary(textOut{stdout}, s)
		return exitOK
	})
}

func printSummary(w io.Writer, s *batch.Summary) {
	fmt.Fprintf(w, "batch %s  %s (%s) on %s  %s", s.ID, s.Name, s.Pipeline, s.Dataset, s.Status)
	if s.Reason != "" {
		fmt.Fprintf(w, " (%s)", s.Reason)
	}
	fmt.Fprintf(w, "\nstarted %s\n\n", s.Started.Local().Format("2006-01-02 15:04:05"))
	c := s.Items
	fmt.Fprintf(w, "items      %d: %d completed, %d failed, %d stopped, %d waiting, %d pending", c.Total, c.Completed, c.Failed, c.Stopped, c.Waiting, c.Pending)
	if c.Running > 0 {
		fmt.Fprintf(w, ", %d running", c.Running)
	}
	if c.Interrupted > 0 {
		fmt.Fprintf(w, ", %d interrupted", c.Interrupted)
	}
	fmt.Fprintln(w)
	if s.PassRate != nil {
		fmt.Fprintf(w, "pass rate  %s (%s)%s\n", rateText(s.PassRate), s.Primary, finishedNote(s.PassRate, s.Items.Total))
	} else {
		fmt.Fprintln(w, "pass rate  - (no boolean metric was scored)")
	}
	for _, m := range s.Metrics {
		switch {
		case m.Primary:
		case m.Rate != nil:
			fmt.Fprintf(w, "  %-8s %s\n", m.Name, rateText(m.Rate))
		case m.Kind == "mean":
			fmt.Fprintf(w, "  %-8s mean %.4g over %d items\n", m.Name, m.Mean, m.N)
		default:
			fmt.Fprintf(w, "  %-8s not a boolean or a number: see the item table\n", m.Name)
		}
	}
	fmt.Fprintf(w, "cost       %s total, %s per item (mean)\n", figures.USD(s.CostUSD), figures.USD(s.CostPerItem))
	fmt.Fprintf(w, "tokens     %d\n", s.Tokens)
	fmt.Fprintf(w, "latency    p50 %s, p95 %s\n", figures.Duration(s.P50MS), figures.Duration(s.P95MS))
	printRepeats(w, s.Repeats)
	if len(s.Failures) > 0 {
		fmt.Fprintln(w, "\nfailures by class:")
		for _, f := range s.Failures {
			fmt.Fprintf(w, "  %-18s %4d  %s: %s\n", f.Class, f.Count, strings.Join(f.Keys, ", "), clip(firstLine(f.Error), 80))
		}
	}
	for _, list := range []struct {
		title string
		rows  []batch.Row
	}{{"slowest", s.Slowest}, {"most expensive", s.Costliest}} {
		if len(list.rows) == 0 {
			continue
		}
		fmt.Fprintf(w, "\n%s:\n", list.title)
		for _, r := range list.rows {
			fmt.Fprintf(w, "  %-30s %9s %9s  run %s\n", r.Key, figures.Duration(r.DurationMS), figures.USD(r.CostUSD), r.Run)
		}
	}
	fmt.Fprintln(w)
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	cols := batch.Columns(s)
	for i, col := range cols {
		if i > 0 {
			fmt.Fprint(tw, "\t")
		}
		fmt.Fprint(tw, strings.ToUpper(strings.TrimSuffix(strings.TrimSuffix(col.Name, "_usd"), "_ms")))
	}
	fmt.Fprintln(tw)
	for _, r := range s.Rows {
		for i, col := range cols {
			if i > 0 {
				fmt.Fprint(tw, "\t")
			}
			switch v := col.Value(r); col.Unit {
			case "usd":
				fmt.Fprint(tw, figures.USD(v.(float64)))
			case "ms":
				fmt.Fprint(tw, figures.Duration(v.(float64)))
			default:
				fmt.Fprint(tw, firstLine(batch.CellText(v)))
			}
		}
		fmt.Fprintln(tw)
	}
	tw.Flush()
}

func rateText(r *batch.Rate) string {
	return fmt.Sprintf("%.1f%% (%d/%d), 95%% interval %.1f%%-%.1f%%", 100*r.Rate, r.Passed, r.N, 100*r.Low, 100*r.High)
}

// finishedNote says, when not every item finished (a stopped batch), over
// how many items a rate is.
func finishedNote(r *batch.Rate, total int) string {
	if r.N == total {
		return ""
	}
	return fmt.Sprintf(" over the %d of %d items that finished", r.N, total)
}

// exported is the exit code of an export that wrote to stdout.
func exported(err error) int {
	if err != nil {
		return exitFailed
	}
	return exitOK
}

func batchCompareCmd(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	fs := newFlagSet("batch compare", "flowrun batch compare A B [--json]\n\nWhat changed from batch A to batch B, item by item (matched by key): the items\nB fixed and broke, the pass-rate change with McNemar's exact test, and the\ncost and latency changes.")
	asJSON := fs.Bool("json", false, "print the comparison as JSON")
	var gate compareGate
	gate.register(fs)
	var pj pairwiseFlags
	pj.register(fs)
	return storeCmd(fs, args, stdout, stderr, 2, "flowrun batch compare: name two batches, the earlier first (flowrun batches lists them)", true, func(st *store.Store, rest []string) int {
		a, err := st.FindBatch(ctx, rest[0])
		if err != nil {
			return storeError(err, stderr)
		}
		b, err := st.FindBatch(ctx, rest[1])
		if err != nil {
			return storeError(err, stderr)
		}
		c, err := batch.Compare(ctx, st, a, b)
		if err != nil {
			return storeError(err, stderr)
		}
		judged, err := pj.judge(ctx, st, c)
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
			printComparison(textOut{stdout}, c)
			printPairwise(textOut{stdout}, judged)
		}
		if err := gate.Check(c); err != nil && code == exitOK {
			return fail(stderr, "flowrun batch compare", err)
		}
		return code
	})
}

func printComparison(w io.Writer, c *batch.Comparison) {
	for _, s := range []struct {
		label string
		side  batch.Side
	}{{"A", c.A}, {"B", c.B}} {
		pass := "no pass/fail metric"
		if s.side.PassRate != nil {
			pass = fmt.Sprintf("pass %.1f%% (%s)", 100*s.side.PassRate.Rate, s.side.Primary)
		}
		fmt.Fprintf(w, "%s  %s  %s (%s), %d items, %s\n", s.label, s.side.ID, s.side.Name, s.side.Pipeline, s.side.Items, pass)
	}
	if c.A.Primary != c.B.Primary {
		fmt.Fprintf(w, "note: A passes by %q and B by %q\n", c.A.Primary, c.B.Primary)
	}
	fmt.Fprintf(w, "\n%d items in both", c.Matched)
	if len(c.OnlyA)+len(c.OnlyB) > 0 {
		fmt.Fprintf(w, " (%d only in A, %d only in B)", len(c.OnlyA), len(c.OnlyB))
	}
	fmt.Fprintf(w, "\npass rate  %.1f%% -> %.1f%%  (%+.1f points)\n", 100*c.PassA.Rate, 100*c.PassB.Rate, 100*c.Delta)
	fmt.Fprintf(w, "items      %d fixed, %d broken, %d same (%d passed in both, %d failed in both)\n",
		len(c.Fixed), len(c.Broken), c.SamePass+c.SameFail, c.SamePass, c.SameFail)
	verdict := "could well be chance"
	if c.PValue < 0.05 {
		verdict = "unlikely to be chance"
	}
	fmt.Fprintf(w, "McNemar    p = %.4g: %s (exact test on the %d items that changed)\n", c.PValue, verdict, len(c.Fixed)+len(c.Broken))
	fmt.Fprintf(w, "cost       %s -> %s per item (%s), total %s -> %s (%s)\n",
		figures.USD(c.CostUSD.MeanA), figures.USD(c.CostUSD.MeanB), figures.USDChange(c.CostUSD.MeanDelta), figures.USD(c.CostUSD.A), figures.USD(c.CostUSD.B), figures.USDChange(c.CostUSD.Delta))
	fmt.Fprintf(w, "latency    %s -> %s per item (%s), total %s -> %s\n",
		figures.Duration(c.LatencyMS.MeanA), figures.Duration(c.LatencyMS.MeanB), figures.DurationChange(c.LatencyMS.MeanDelta),
		figures.Duration(c.LatencyMS.A), figures.Duration(c.LatencyMS.B))
	keyList(w, "fixed (failed in A, passed in B)", pairKeys(c.Fixed))
	keyList(w, "broken (passed in A, failed in B)", pairKeys(c.Broken))
	keyList(w, "only in A", c.OnlyA)
	keyList(w, "only in B", c.OnlyB)
}

func pairKeys(ps []batch.Pair) []string {
	out := make([]string, len(ps))
	for i, p := range ps {
		out[i] = p.Key
	}
	return out
}

// keyList prints a titled list of keys, wrapped to 80 columns.
func keyList(w io.Writer, title string, ks []string) {
	if len(ks) == 0 {
		return
	}
	fmt.Fprintf(w, "\n%s: %d\n", title, len(ks))
	line := " "
	for _, k := range ks {
		if len(line)+1+len(k) > 80 && line != " " {
			fmt.Fprintln(w, line)
			line = " "
		}
		line += " " + k
	}
	fmt.Fprintln(w, line)
}

func batchReportCmd(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	fs := newFlagSet("batch report", "flowrun batch report BATCH [--compare A] [-o FILE]\n\nWrites one self-contained HTML page (it opens with no network): the summary,\na pass-rate chart with 95% intervals, a cost histogram, the item table and\neach item's run timeline. With --compare, what changed since batch A first.")
	against := fs.String("compare", "", "compare with this earlier `batch` (A)")
	out := fs.String("o", "", "the HTML `file` to write (default BATCH.html)")
	return storeCmd(fs, args, stdout, stderr, 1, "flowrun batch report: name one batch (flowrun batches lists them)", true, func(st *store.Store, rest []string) int {
		b, err := st.FindBatch(ctx, rest[0])
		if err != nil {
			return storeError(err, stderr)
		}
		var a *store.Batch
		if *against != "" {
			if a, err = st.FindBatch(ctx, *against); err != nil {
				return storeError(err, stderr)
			}
		}
		path := *out
		if path == "" {
			path = b.ID + ".html"
		}
		if err := batch.WriteReportFile(ctx, st, path, b, a); err != nil {
			fmt.Fprintf(stderr, "flowrun batch report: %v\n", err)
			return exitFailed
		}
		fmt.Fprintf(textOut{stdout}, "wrote %s\n", path)
		return exitOK
	})
}

// The view commands are subcommands of flowrun batch, beside run and resume.
func init() {
	for _, sub := range []string{"show", "compare", "report"} {
		batchCommands[sub] = func(ctx context.Context, args []string, _ io.Reader, stdout, stderr io.Writer) int {
			code, _ := batchViewCmd(ctx, sub, args, stdout, stderr)
			return code
		}
	}
}
