package main

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/flowrun/flowrun/dsl"
	"github.com/flowrun/flowrun/plan"
)

const bounded = "../../plan/testdata/bounded.yaml"

// TestPlanCommand: flowrun plan prints a table no wider than 100
// columns with the total and the expressions behind it, and --json the
// same figures as data.
func TestPlanCommand(t *testing.T) {
	code, stdout, stderr := flowrun(t, "plan", bounded, "--input", "rounds=3")
	if code != exitOK {
		t.Fatalf("exit %d: %s", code, stderr)
	}
	_, wide, _ := flowrun(t, "plan", "../../pipelines/arc_evolve.yaml", "--input", "generations=5", "--input", "population=8")
	for _, line := range strings.Split(stdout+wide, "\n") {
		if utf8.RuneCountInString(line) > 100 {
			t.Errorf("a line of %d columns: %q", utf8.RuneCountInString(line), line)
		}
	}
	for _, want := range []string{"given rounds", "rounds/ask", "total: model calls ≤ 2 × inputs.rounds", "limits.max_cost_usd 0.50 is below the worst case"} {
		if !strings.Contains(stdout, want) {
			t.Errorf("no %q in\n%s", want, stdout)
		}
	}
	code, stdout, _ = flowrun(t, "plan", bounded, "--input", "rounds=3", "--json")
	var pl struct {
		Total struct {
			Calls struct {
				Value *float64 `json:"value"`
				Bound string   `json:"bound"`
			} `json:"model_calls"`
		} `json:"total"`
	}
	if err := json.Unmarshal([]byte(stdout), &pl); code != exitOK || err != nil || pl.Total.Calls.Value == nil || *pl.Total.Calls.Value != 13 {
		t.Fatalf("--json: exit %d, %v, calls %+v in\n%s", code, err, pl.Total.Calls, stdout)
	}
	if code, _, stderr := flowrun(t, "plan"); code != exitInvalid || !strings.Contains(stderr, "name one pipeline file") {
		t.Fatalf("plan with no file: exit %d, %s", code, stderr)
	}
	if _, out, _ := flowrun(t, "--help"); !strings.Contains(out, "flowrun plan FILE") {
		t.Fatalf("--help does not list plan:\n%s", out)
	}
}

// TestValidateWarnsOfACapBelowTheWorstCase: validate warns at
// limits.max_cost_usd's line:col (and at an input budget_usd's) when a
// run's worst case (inputs at their defaults) passes it, and says nothing
// of a cap that covers it.
func TestValidateWarnsOfACapBelowTheWorstCase(t *testing.T) {
	dir := t.TempDir()
	src, err := os.ReadFile(bounded)
	if err != nil {
		t.Fatal(err)
	}
	callee, _ := os.ReadFile(filepath.Join(filepath.Dir(bounded), "callee.yaml"))
	writeFile(t, dir, "callee.yaml", string(callee))
	withDefault := strings.Replace(string(src), "rounds: {type: integer}", "rounds: {type: integer, default: 2}", 1)
	tight := writeFile(t, dir, "tight.yaml", withDefault)
	code, stdout, stderr := flowrun(t, "validate", tight)
	if code != exitOK || !strings.Contains(stdout, "tight.yaml: ok") ||
		!strings.Contains(stderr, "tight.yaml:8:24: warning: limits.max_cost_usd is $0.50 but a run may cost up to $1.4930") {
		t.Fatalf("exit %d\n%s%s", code, stdout, stderr)
	}
	roomy := writeFile(t, dir, "roomy.yaml", strings.Replace(withDefault, "max_cost_usd: 0.5", "max_cost_usd: 5", 1))
	if code, _, stderr := flowrun(t, "validate", roomy); code != exitOK || stderr != "" {
		t.Fatalf("a cap above the worst case: exit %d, %s", code, stderr)
	}
	budget := writeFile(t, dir, "budget.yaml", strings.Replace(strings.Replace(withDefault, "max_cost_usd: 0.5", "max_cost_usd: 5", 1),
		"inputs:\n", "inputs:\n  budget_usd: {type: number, default: 0.25}\n", 1))
	if code, _, stderr := flowrun(t, "validate", budget); code != exitOK ||
		!strings.Contains(stderr, "budget.yaml:4:3: warning: the default of input budget_usd is $0.25 but a run may cost up to") {
		t.Fatalf("a budget_usd below the worst case: exit %d, %s", code, stderr)
	}
}

// planFigure is a figure of flowrun plan --json.
type planFigure struct {
	Value     *float64 `json:"value"`
	Bound     string   `json:"bound"`
	Unbounded bool     `json:"unbounded"`
}

// mostCompletion is the max_tokens TestPlanBoundsEveryShippedRun gives
// every model: above every reply in the shipped cassettes.
const mostCompletion = 4096

// TestPlanBoundsEveryShippedRun: for every shipped pipeline, the run its
// cassette replays makes no more model calls, writes no more output
// tokens and costs no more than flowrun plan says, with the same inputs;
// a figure the plan leaves unbounded comes with the reason. The shipped
// pipelines set no max_tokens, so their cost is unbounded; planned again
// with one on every model, output and cost are checked too.
func TestPlanBoundsEveryShippedRun(t *testing.T) {
	needPython(t)
	for _, s := range shipped {
		t.Run(s.pipeline, func(t *testing.T) {
			path := filepath.Join("..", "..", "pipelines", s.pipeline)
			code, stdout, stderr := flowrun(t, append([]string{path, "--json", "--store", filepath.Join(t.TempDir(), "runs.db")}, s.args...)...)
			if code != exitOK {
				t.Fatalf("run: exit %d\n%s", code, stderr)
			}
			var calls, output, cost, most float64
			for _, line := range strings.Split(strings.TrimSpace(stdout), "\n") {
				var ev struct {
					Type string `json:"type"`
					Turn struct {
						Reply struct {
							Turns int `json:"turns"`
						} `json:"reply"`
						Usage   struct{ Completion float64 }
						CostUSD float64 `json:"cost_usd"`
					} `json:"turn"`
				}
				if err := json.Unmarshal([]byte(line), &ev); err != nil {
					t.Fatalf("%v: %s", err, line)
				}
				if ev.Type == "model_turn" {
					calls += float64(max(ev.Turn.Reply.Turns, 1))
					output += ev.Turn.Usage.Completion
					most = max(most, ev.Turn.Usage.Completion)
					cost += ev.Turn.CostUSD
				}
			}
			if calls == 0 {
				t.Fatal("the replay made no model calls")
			}
			code, stdout, stderr = flowrun(t, "plan", path, "--json")
			var pl struct {
				Total struct {
					Calls  planFigure `json:"model_calls"`
					Output planFigure `json:"output_tokens"`
					Cost   planFigure `json:"cost_usd"`
				} `json:"total"`
				Unbounded []struct{ Node, Figure, Why string } `json:"unbounded"`
			}
			if err := json.Unmarshal([]byte(stdout), &pl); code != exitOK || err != nil {
				t.Fatalf("plan: exit %d, %v\n%s", code, err, stderr)
			}
			for _, c := range []struct {
				name   string
				actual float64
				f      planFigure
			}{{"model calls", calls, pl.Total.Calls}, {"output tokens", output, pl.Total.Output}, {"cost", cost, pl.Total.Cost}} {
				switch {
				case c.f.Unbounded && len(pl.Unbounded) == 0:
					t.Errorf("%s: unbounded, and the plan says not why", c.name)
				case c.f.Unbounded:
				case c.f.Value == nil:
					t.Errorf("%s ≤ %s: not evaluated with the run's inputs", c.name, c.f.Bound)
				case c.actual > *c.f.Value+1e-9:
					t.Errorf("%s: the run took %v, the plan bounds it by %v (%s)", c.name, c.actual, *c.f.Value, c.f.Bound)
				}
			}
			t.Logf("calls %v ≤ %s, output %v ≤ %s, cost %v ≤ %s", calls, pl.Total.Calls.Bound, output, pl.Total.Output.Bound, cost, pl.Total.Cost.Bound)

			// With every model's replies bounded, as a server bounds them
			// by max_tokens, output and cost have bounds that must hold.
			p, ds := dsl.Load(path)
			if p == nil {
				t.Fatal(ds)
			}
			for _, m := range p.Models {
				m.MaxTokens = mostCompletion
			}
			if most > mostCompletion {
				t.Fatalf("a reply of %v tokens: raise mostCompletion", most)
			}
			bounded := plan.Make(p, plan.Options{})
			for _, c := range []struct {
				name   string
				actual float64
				f      plan.Figure
			}{{"output tokens", output, bounded.Total.OutputTokens}, {"cost", cost, bounded.Total.USD}} {
				v, ok := c.f.Value()
				if !ok && !c.f.IsUnbounded() || ok && c.actual > v+1e-9 {
					t.Errorf("with max_tokens %d, %s: the run took %v, the plan bounds it by %s (%s)", mostCompletion, c.name, c.actual, c.f.Text(), c.f.Expr())
				}
			}
			t.Logf("with max_tokens %d: output %v ≤ %s, cost %v ≤ %s", mostCompletion, output, bounded.Total.OutputTokens.Text(), cost, bounded.Total.USD.USD())
		})
	}
}

// TestRunPlanPrintsThenRuns: flowrun run --plan prints the plan on
// stderr and then runs, its outputs on stdout as without it.
func TestRunPlanPrintsThenRuns(t *testing.T) {
	code, stdout, stderr := flowrun(t, "run", "../../pipelines/counter.yaml", "--plan", "--store", filepath.Join(t.TempDir(), "runs.db"))
	if code != exitOK || !strings.Contains(stderr, "Plan of counter: the most one run can do") {
		t.Fatalf("exit %d, stderr:\n%s", code, stderr)
	}
	var outputs map[string]any
	if err := json.Unmarshal([]byte(stdout), &outputs); err != nil || len(outputs) == 0 {
		t.Fatalf("stdout is not the outputs: %v\n%s", err, stdout)
	}
}

// TestBatchPlanRunsNothing: flowrun batch --plan adds up every item's
// plan times --repeat, compares it with --max-cost-usd, and creates no
// batch.
func TestBatchPlanRunsNothing(t *testing.T) {
	dir := t.TempDir()
	callee, _ := os.ReadFile(filepath.Join(filepath.Dir(bounded), "callee.yaml"))
	writeFile(t, dir, "callee.yaml", string(callee))
	src, _ := os.ReadFile(bounded)
	p := writeFile(t, dir, "bounded.yaml", string(src))
	data := writeFile(t, dir, "items.jsonl", `{"rounds": 1}`+"\n"+`{"rounds": 3}`+"\n")
	store := filepath.Join(dir, "runs.db")
	code, stdout, stderr := flowrun(t, "batch", p, "--dataset", data, "--repeat", "2", "--max-cost-usd", "1", "--plan", "--store", store)
	// The plan of rounds=1 calls 2 + 7 and of rounds=3 6 + 7: 22 calls a
	// repeat.
	if code != exitOK || !strings.Contains(stdout, "2 item(s) × 2 repeat(s) = 4 run(s)") || !strings.Contains(stdout, "model calls 44,") ||
		!strings.Contains(stdout, "the batch's cost cap 1.00 is below the worst case") {
		t.Fatalf("exit %d\n%s%s", code, stdout, stderr)
	}
	if _, err := os.Stat(store); err == nil {
		t.Fatal("batch --plan opened a store: it must run nothing")
	}
}

// TestPlanDocExampleIsReal keeps docs/plan.md's worked example what
// flowrun plan prints.
func TestPlanDocExampleIsReal(t *testing.T) {
	doc, err := os.ReadFile("../../docs/plan.md")
	if err != nil {
		t.Fatal(err)
	}
	_, rest, ok := strings.Cut(string(doc), "$ flowrun plan pipelines/arc_evolve.yaml\n")
	shown, _, ok2 := strings.Cut(rest, "```")
	if !ok || !ok2 {
		t.Fatal("docs/plan.md has no arc_evolve example")
	}
	if _, got, _ := flowrun(t, "plan", "../../pipelines/arc_evolve.yaml"); got != shown {
		t.Fatalf("docs/plan.md shows\n%s\nflowrun plan prints\n%s", shown, got)
	}
}
