package plan

import (
	"fmt"
	"io"
	"strings"
	"text/tabwriter"
)

// width is the widest line Write prints.
const width = 100

// Write prints the plan for a terminal: a table of the nodes that call,
// run or cost anything, the total, the expression behind every symbolic
// figure, and why the unbounded ones are.
func (pl *Plan) Write(w io.Writer) {
	head := fmt.Sprintf("Plan of %s: the most one run can do", pl.Pipeline)
	if len(pl.Given) > 0 {
		head += ", given " + strings.Join(pl.Given, ", ")
	}
	if defaulted := len(pl.Inputs) - len(pl.Given); defaulted > 0 {
		head += fmt.Sprintf("; %d input(s) at their defaults", defaulted)
	}
	if len(pl.Missing) > 0 {
		head += fmt.Sprintf("; not given and no default, so bounds reading them stay symbolic (?): %s", strings.Join(pl.Missing, ", "))
	}
	for _, line := range wrap(head+".", width) {
		fmt.Fprintln(w, line)
	}
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintln(tw, "node\tkind\truns\tcalls\tout tok\tin tok\tcost\tsandbox\ttools\twall s\t")
	shown := pl.Shown()
	for _, n := range shown {
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t\n", clip(n.Path, 28), n.Kind, n.Runs.Text(), n.Calls.Text(),
			n.OutputTokens.Text(), n.InputTokens.Text(), n.USD.USD(), n.SandboxRuns.Text(), n.ToolCalls.Text(), n.WallSeconds.Text())
	}
	t := pl.Total
	fmt.Fprintf(tw, "total\t\t\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t\n", t.Calls.Text(), t.OutputTokens.Text(), t.InputTokens.Text(), t.USD.USD(),
		t.SandboxRuns.Text(), t.ToolCalls.Text(), t.WallSeconds.Text())
	tw.Flush()

	var bounds []string
	for _, n := range shown {
		for _, f := range []struct {
			name string
			f    Figure
		}{{"runs", n.Runs}, {"model calls", n.Calls}, {"output tokens", n.OutputTokens}, {"input tokens", n.InputTokens}, {"cost usd", n.USD}} {
			if f.f.Symbolic() && (f.name == "runs" || !n.Runs.Symbolic() || f.f.Expr() != n.Runs.Expr()) {
				bounds = append(bounds, fmt.Sprintf("%s: %s ≤ %s", n.Path, f.name, f.f.Expr()))
			}
		}
	}
	for _, f := range []struct {
		name string
		f    Figure
	}{{"model calls", t.Calls}, {"output tokens", t.OutputTokens}, {"cost usd", t.USD}} {
		if f.f.Symbolic() {
			bounds = append(bounds, fmt.Sprintf("total: %s ≤ %s", f.name, f.f.Expr()))
		}
	}
	section(w, "Bounds", bounds)
	section(w, "Unbounded", reasons(pl.Unbounded))
	section(w, "Notes", pl.Notes)
	if pl.MaxCostUSD > 0 {
		fmt.Fprintf(w, "\n%s\n", pl.AgainstCap())
	}
}

// Shown are the nodes that call, run or cost anything: the rows of a
// plan's table.
func (pl *Plan) Shown() []*Node {
	var out []*Node
	for _, n := range pl.Nodes {
		if !n.Calls.IsZero() || !n.SandboxRuns.IsZero() || !n.ToolCalls.IsZero() {
			out = append(out, n)
		}
	}
	return out
}

// AgainstCap says how the worst-case cost compares with limits.max_cost_usd.
func (pl *Plan) AgainstCap() string {
	return capText("limits.max_cost_usd", pl.MaxCostUSD, pl.Total.USD, "a run")
}

// capText compares the cap name of limit with the worst case of what
// (a run, the batch).
func capText(name string, limit float64, worst Figure, what string) string {
	v, ok := worst.Value()
	switch {
	case worst.IsUnbounded():
		return fmt.Sprintf("%s %.2f: the worst case has no bound, so the cap may stop %s halfway.", name, limit, what)
	case !ok:
		return fmt.Sprintf("%s %.2f: the worst case depends on inputs not given.", name, limit)
	case v > limit:
		return fmt.Sprintf("%s %.2f is below the worst case %s: the cap may stop %s halfway.", name, limit, worst.USD(), what)
	}
	return fmt.Sprintf("%s %.2f covers the worst case %s.", name, limit, worst.USD())
}

// reasons are rs as lines: node, figure, why, and what to set.
func reasons(rs []Reason) []string {
	var out []string
	for _, r := range rs {
		s := fmt.Sprintf("%s: %s: %s", r.Node, r.Figure, r.Why)
		if r.Fix != "" {
			s += "; " + r.Fix
		}
		out = append(out, s)
	}
	return out
}

// section prints a titled list, each item wrapped to width.
func section(w io.Writer, title string, items []string) {
	if len(items) == 0 {
		return
	}
	fmt.Fprintf(w, "\n%s:\n", title)
	for _, it := range items {
		for i, line := range wrap(it, width-4) {
			if i == 0 {
				fmt.Fprintf(w, "  %s\n", line)
			} else {
				fmt.Fprintf(w, "    %s\n", line)
			}
		}
	}
}

func wrap(s string, n int) []string {
	var lines []string
	line := ""
	for _, word := range strings.Fields(s) {
		if line != "" && len([]rune(line))+1+len([]rune(word)) > n {
			lines = append(lines, line)
			line = word
			continue
		}
		if line != "" {
			line += " "
		}
		line += word
	}
	return append(lines, line)
}

func clip(s string, n int) string {
	if r := []rune(s); len(r) > n {
		return "…" + string(r[len(r)-n+1:])
	}
	return s
}
