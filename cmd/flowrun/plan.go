package main

import (
	"fmt"
	"io"
	"os"
	"strings"

	"github.com/flowrun/flowrun/dsl"
	"github.com/flowrun/flowrun/internal/termview"
	"github.com/flowrun/flowrun/jsonvalue"
	"github.com/flowrun/flowrun/plan"
)

func planCmd(args []string, stdout, stderr io.Writer) int {
	fs := newFlagSet("plan", "flowrun plan FILE [--input k=v ...] [--inputs FILE] [--json]\n\nPrints the most one run can do, before a token is spent: per node and in\ntotal, model calls, output tokens, cost, sandbox runs, tool calls and wall\ntime, each with the expression that bounds it, and what leaves a figure\nunbounded. Inputs not given take their defaults; bounds reading an input\nwith neither stay symbolic. Nothing is run. See docs/plan.md.")
	var in inputArgs
	in.register(fs)
	asJSON := fs.Bool("json", false, "print the plan as one JSON object")
	var models inputFlags
	fs.Var(&models, "model", "plan with another model id for a named model, as `NAME=MODEL` (repeatable)")
	p, inputs, code, ok := in.load(fs, args, "plan", stdout, stderr)
	if !ok {
		return code
	}
	pl := makePlan(p, inputs, models)
	if *asJSON {
		return writeJSON(stdout, pl)
	}
	pl.Write(termview.Text{W: stdout})
	return exitOK
}

// makePlan bounds a run of p with inputs and the NAME=MODEL overrides.
func makePlan(p *dsl.Pipeline, inputs map[string]any, overrides []string) *plan.Plan {
	priced := *p
	priced.Models = overridden(p, overrides)
	return plan.Make(&priced, plan.Options{Inputs: inputs})
}

// costWarnings warn, at limits.max_cost_usd and at an input budget_usd's
// default, of a cap that a run's worst case (with the inputs' defaults)
// passes: the run may be stopped halfway. A worst case that depends on
// data is flowrun plan's to explain, not a warning.
func costWarnings(p *dsl.Pipeline) dsl.Diagnostics {
	pl := plan.Make(p, plan.Options{})
	worst, ok := pl.Total.USD.Value()
	if !ok {
		return nil
	}
	var ds dsl.Diagnostics
	warn := func(pos dsl.Pos, name string, cap float64) {
		if worst <= cap {
			return
		}
		ds = append(ds, dsl.Diagnostic{Pos: pos, Severity: dsl.Warning, Line: sourceLine(pos),
			Message: fmt.Sprintf("%s is $%.2f but a run may cost up to %s (≤ %s): a run may stop halfway; raise it, or lower the bounds flowrun plan %s lists",
				name, cap, pl.Total.USD.USD(), pl.Total.USD.Expr(), p.Path)})
	}
	if p.Limits.MaxCostUSD > 0 {
		warn(p.Limits.MaxCostPos, "limits.max_cost_usd", p.Limits.MaxCostUSD)
	}
	for _, in := range p.Inputs {
		if v, isNum := jsonvalue.Number(in.Default); in.Name == "budget_usd" && in.HasDefault && isNum && v > 0 {
			warn(in.Pos, "the default of input budget_usd", v)
		}
	}
	return ds
}

// sourceLine is the text of the line at pos, for a diagnostic's caret.
func sourceLine(pos dsl.Pos) string {
	b, err := os.ReadFile(pos.File)
	if err != nil {
		return ""
	}
	lines := strings.Split(string(b), "\n")
	if pos.Line < 1 || pos.Line > len(lines) {
		return ""
	}
	return strings.TrimSuffix(lines[pos.Line-1], "\r")
}
