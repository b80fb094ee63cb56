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
	case "rate":
		return batchRateCmd(ctx, args, stdout, stderr), true
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
		s, err := batch.Summarize(ctx, st, b)
		if err != nil {
			return storeError(err, stderr)
		}
		if err := s.ReadDetails(ctx, st); err != nil {
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
			return exported(batch.WriteJSONL(jsonOut{stdout}, s))
		case "csv":
			return exported(batch.WriteCSV(stdout, s))
		}
		out := textOut{stdout}
		if *itemKey != "" || *failures {
			for i, r := range s.Rows {
				if i > 0 {
					fmt.Fprintln(out)
				}
				batch.WriteItemText(out, s, r, width(stdout))
			}
			if len(s.Rows) == 0 {
				fmt.Fprintln(out, "every item passed")
			}
			return exitOK
		}
		printSummary(out, s, width(stdout))
		return exitOK
	})
}

func printSummary(w io.Writer, s *batch.Summary, cols int) {
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
	for _, a := range s.Agreement {
		kappa := "undefined (each gave one verdict throughout)"
		if a.Defined {
			kappa = fmt.Sprintf("%.2f", a.Kappa)
		}
		fmt.Fprintf(w, "  human vs %s: agree on %d of %d rated items, Cohen's kappa %s\n", a.Metric, a.Agree, a.N, kappa)
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
	printItemLines(w, s, cols)
	fmt.Fprintf(w, "\nflowrun batch show %s --item KEY shows an item whole; --failures every one that did not pass\n", s.ID)
}

// printItemLines prints one line per item: its key, status, metrics, cost
// and duration, then its error or else its outputs, folded to fit cols.
func printItemLines(w io.Writer, s *batch.Summary, cols int) {
	var lines strings.Builder
	tw := tabwriter.NewWriter(&lines, 0, 0, 2, ' ', 0)
	table := batch.Columns(s)
	table = table[:len(table)-batch.DetailColumns-3] // without run, class and error: the last column says them
	for i, col := range table {
		if i > 0 {
			fmt.Fprint(tw, "\t")
		}
		fmt.Fprint(tw, strings.ToUpper(strings.TrimSuffix(strings.TrimSuffix(col.Name, "_usd"), "_ms")))
	}
	fmt.Fprintln(tw, "\t\x00")
	for _, r := range s.Rows {
		for i, col := range table {
			if i > 0 {
				fmt.Fprint(tw, "\t")
			}
			switch v := col.Value(r); col.Unit {
			case "usd":
				fmt.Fprint(tw, figures.USD(v.(float64)))
			case "ms":
				fmt.Fprint(tw, figures.Duration(v.(float64)))
			default:
				fmt.Fprint(tw, batch.Fold(batch.CellText(v), 24))
			}
		}
		fmt.Fprintln(tw, "\t\x00")
	}
	tw.Flush()
	// The last column takes what room the table leaves.
	for i, line := range strings.Split(strings.TrimSuffix(lines.String(), "\n"), "\n") {
		line = strings.TrimSuffix(line, "\x00")
		room := max(cols-len([]rune(line)), 16)
		switch {
		case i == 0:
			line += "OUTPUT OR ERROR"
		case s.Rows[i-1].Error != "":
			line += batch.Fold(s.Rows[i-1].Class+": "+s.Rows[i-1].Error, room)
		case s.Rows[i-1].Outputs != nil:
			line += batch.Fold(s.Rows[i-1].Outputs, room)
		}
		fmt.Fprintln(w, strings.TrimRight(line, " "))
	}
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
	fs := newFlagSet("batch compare", "flowrun batch compare A B [--json]\n\nWhat changed from batch A to batch B, item by item (matched by key): the items\nB fixed and broke, the pass-rate change with McNemar's exact test, and the\ncost and latency changes; then each fixed and broken item's outputs in A and B.")
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
		var sums [2]*batch.Summary
		for i, x := range []*store.Batch{a, b} {
			if sums[i], err = batch.Summarize(ctx, st, x); err == nil {
				err = sums[i].ReadDetails(ctx, st)
			}
			if err != nil {
				return storeError(err, stderr)
			}
		}
		c := batch.CompareSummaries(sums[0], sums[1])
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
			printSideBySide(textOut{stdout}, c, width(stdout))
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

// printSideBySide prints each fixed and broken item's outputs in A and
// in B, folded to a line each.
func printSideBySide(w io.Writer, c *batch.Comparison, cols int) {
	pairs := append(append([]batch.Pair{}, c.Fixed...), c.Broken...)
	if len(pairs) == 0 {
		return
	}
	fmt.Fprintln(w, "\noutputs, A then B:")
	for _, p := range pairs {
		fmt.Fprintf(w, "  %s (%s)\n", p.Key, p.Outcome)
		for _, side := range []struct {
			name string
			row  batch.Row
		}{{"A", p.A}, {"B", p.B}} {
			what := any(side.row.Outputs)
			if side.row.Error != "" {
				what = side.row.Class + ": " + side.row.Error
			}
			fmt.Fprintf(w, "    %s  %s\n", side.name, batch.Fold(what, cols-7))
		}
	}
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
	fs := newFlagSet("batch report", "flowrun batch report BATCH [--compare A] [-o FILE]\n\nWrites one self-contained HTML page (it opens with no network): the summary,\na pass-rate chart with 95% intervals, a cost histogram, the item table with\nfilters and each item's inputs, expected fields, outputs (grids drawn) and\njudge's reasoning, and each item's run timeline. With --compare, what changed\nsince batch A first, fixed and broken items side by side.")
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
	for _, sub := range []string{"show", "compare", "report", "rate"} {
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
		fmt.Fprintf(textOut{stdout}, "rated %s in batch %s: %s\n", rest[1], b.ID, verdict)
		return exitOK
	})
}
