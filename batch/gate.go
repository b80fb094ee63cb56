package batch

import (
	"context"
	"errors"
	"fmt"
	"io"
	"maps"
	"os"
	"reflect"
	"slices"
	"sort"
	"strings"
	"unicode/utf8"

	"github.com/flowrun/flowrun/dsl"
	"github.com/flowrun/flowrun/internal/junit"
	"github.com/flowrun/flowrun/runtime"
	"github.com/flowrun/flowrun/store"
)

// GateError says a batch or a comparison misses what a CI gate asked of
// it: the pass rate under its floor, a significant regression, too many
// items broken.
type GateError struct {
	Reasons []string
}

func (e *GateError) Error() string { return strings.Join(e.Reasons, "; ") }

// CheckPassRate is a *GateError when s's primary pass rate is below min
// (0-1), or when s has no primary metric to gate on.
func CheckPassRate(s *Summary, min float64) error {
	if s.PassRate == nil {
		return &GateError{Reasons: []string{fmt.Sprintf("pass rate below %.4g: the batch has no boolean metric to pass by", min)}}
	}
	if s.PassRate.Rate < min {
		return &GateError{Reasons: []string{fmt.Sprintf("pass rate %.1f%% (%d/%d, %s) is below %.1f%%",
			100*s.PassRate.Rate, s.PassRate.Passed, s.PassRate.N, s.Primary, 100*min)}}
	}
	return nil
}

// Gate is what flowrun batch checks once a batch's run has ended.
type Gate struct {
	// FailUnder is the least primary pass rate (0-1) a completed batch
	// passes with; negative: no floor.
	FailUnder float64
	// JUnit is the path to write a JUnit XML report of the batch to; "":
	// none.
	JUnit string
}

// GateResult is what applying a Gate did and found.
type GateResult struct {
	JUnit  string     // the report written; "" when none was asked for
	Failed *GateError // why the batch misses FailUnder; nil when it does not or was not checked
}

// Apply writes g's JUnit report of batch id as the store has it and,
// when the batch completed, checks its pass rate against FailUnder (a
// batch that did not complete has failed already). The error says what
// could not be read or written.
func (g Gate) Apply(ctx context.Context, st *store.Store, id string, completed bool) (GateResult, error) {
	var res GateResult
	if g.JUnit == "" && g.FailUnder < 0 {
		return res, nil
	}
	b, err := st.Batch(ctx, id)
	if err != nil {
		return res, err
	}
	s, err := Summarize(ctx, st, b)
	if err == nil && g.JUnit != "" {
		// A failure says what the item gave, read from its run.
		err = s.ReadDetails(ctx, st)
	}
	if err != nil {
		return res, err
	}
	if g.JUnit != "" {
		if err := writeJUnitFile(g.JUnit, s); err != nil {
			return res, err
		}
		res.JUnit = g.JUnit
	}
	if g.FailUnder >= 0 && completed {
		errors.As(CheckPassRate(s, g.FailUnder), &res.Failed)
	}
	return res, nil
}

func writeJUnitFile(path string, s *Summary) error {
	f, err := os.Create(path)
	if err != nil {
		return fmt.Errorf("writing %s: %w", path, err)
	}
	if err := WriteJUnit(f, s); err != nil {
		f.Close()
		return err
	}
	if err := f.Close(); err != nil {
		return fmt.Errorf("writing %s: %w", path, err)
	}
	return nil
}

// RegressionGate is what a comparison must not show.
type RegressionGate struct {
	// FailOnRegression fails when B is significantly worse than A: more
	// broken than fixed with McNemar's mid-p value below Alpha.
	FailOnRegression bool
	Alpha            float64
	// MaxBroken fails when more than this many items broke (negative: no
	// limit).
	MaxBroken int
}

// Check is a *GateError naming every way c misses g.
func (g RegressionGate) Check(c *Comparison) error {
	var reasons []string
	if g.FailOnRegression && len(c.Broken) > len(c.Fixed) && c.MidPValue < g.Alpha {
		reasons = append(reasons, fmt.Sprintf("B is worse: %d broken, %d fixed, McNemar mid-p %.4g < %.4g", len(c.Broken), len(c.Fixed), c.MidPValue, g.Alpha))
	}
	if g.MaxBroken >= 0 && len(c.Broken) > g.MaxBroken {
		reasons = append(reasons, fmt.Sprintf("%d items broke, more than %d", len(c.Broken), g.MaxBroken))
	}
	if reasons == nil {
		return nil
	}
	return &GateError{Reasons: reasons}
}

// WriteJUnit writes s as a JUnit XML report, one test case per item run
// (named as RunName does: KEY, or KEY#R for run R of an item run several
// times): a
// completed item that misses its primary metric is a failure, an item
// whose run failed or stopped is an error, an item without a result is
// skipped. A failure's message says what the item gave against what it
// was expected to give (from rows with their details read, see
// ReadDetails), and each case carries its metric values, run id and
// error, so a CI page shows why an item failed.
func WriteJUnit(w io.Writer, s *Summary) error {
	suite := junit.Suite{Name: s.Name + " on " + s.Dataset}
	for _, r := range s.Rows {
		c := junit.Case{Name: r.Name, Classname: s.Name, Seconds: r.DurationMS / 1000, Output: junitDetail(r)}
		switch {
		case r.Status == runtime.StatusCompleted && r.Class == "" && (r.Pass == nil || *r.Pass):
		case r.Status == runtime.StatusCompleted && r.Class == "":
			c.Failure = &junit.Problem{Message: s.missed(r) + failedChecks(r.Checks[s.Primary]), Type: s.Primary, Text: c.Output}
		case finished(r.Status):
			c.Error = &junit.Problem{Message: firstLine(r.Error), Type: r.Class, Text: c.Output}
		default:
			c.Skipped = "no result yet: " + string(r.Status)
		}
		suite.Cases = append(suite.Cases, c)
	}
	return junit.Write(w, []junit.Suite{suite})
}

// missed says what a completed item that failed gave against what it was
// expected to give: each output its primary metric compares with a
// dataset field and that differs from it ("label: billing, expected:
// account"); else its outputs beside the dataset fields the metrics read;
// else, with neither read, its scores.
func (s *Summary) missed(r Row) string {
	var parts []string
	for _, e := range s.expects[s.Primary] {
		got, want := r.Outputs[e.Output], r.Expected[e.Item]
		if r.Outputs != nil && !reflect.DeepEqual(got, want) {
			parts = append(parts, fmt.Sprintf("%s: %s, expected: %s", e.Output, shortValue(got), shortValue(want)))
		}
	}
	switch {
	case parts != nil:
		return strings.Join(parts, "; ")
	case len(r.Outputs) > 0 && len(r.Expected) > 0:
		return fmt.Sprintf("%s failed: got %s; expected %s", s.Primary, fieldsLine(r.Outputs), fieldsLine(r.Expected))
	}
	return fmt.Sprintf("%s failed: %s", s.Primary, ScoreLine(r.Scores))
}

// fieldsLine is fields as name: value, by name, each value cut short.
func fieldsLine(fields map[string]any) string {
	parts := make([]string, 0, len(fields))
	for _, k := range slices.Sorted(maps.Keys(fields)) {
		parts = append(parts, k+": "+shortValue(fields[k]))
	}
	return strings.Join(parts, ", ")
}

// shortValue is a value on one line of at most 80 characters.
func shortValue(v any) string {
	text := strings.Join(strings.Fields(dsl.Stringify(v)), " ")
	if utf8.RuneCountInString(text) > 80 {
		text = string([]rune(text)[:79]) + "…"
	}
	return text
}

func junitDetail(r Row) string {
	var b strings.Builder
	fmt.Fprintf(&b, "status: %s\nrun: %s\nscores: %s\n", r.Status, r.Run, ScoreLine(r.Scores))
	for _, name := range slices.Sorted(maps.Keys(r.Checks)) {
		cs := r.Checks[name]
		fmt.Fprintf(&b, "checks of %s: %s\n", name, ChecksLine(cs))
		for i, c := range cs.List {
			fmt.Fprintf(&b, "  %s %s", checkMark(c), checkName(c, i))
			if c.Reason != "" {
				fmt.Fprintf(&b, ": %s", c.Reason)
			}
			b.WriteString("\n")
		}
	}
	if r.Error != "" {
		fmt.Fprintf(&b, "error (%s): %s\n", r.Class, r.Error)
	}
	return b.String()
}

// failedChecks names the checks that failed, for a failure's one line:
// which of the item's asserts it missed.
func failedChecks(cs store.Checks) string {
	var names []string
	for i, c := range cs.List {
		if c.Pass != nil && !*c.Pass {
			names = append(names, checkName(c, i))
		}
	}
	if len(names) == 0 {
		return ""
	}
	return "; failed: " + strings.Join(names, ", ")
}

// ScoreLine is the scores as name=value, by name.
func ScoreLine(scores map[string]any) string {
	names := make([]string, 0, len(scores))
	for n := range scores {
		names = append(names, n)
	}
	sort.Strings(names)
	parts := make([]string, len(names))
	for i, n := range names {
		parts[i] = n + "=" + dsl.Stringify(scores[n])
	}
	return strings.Join(parts, " ")
}

func firstLine(s string) string {
	line, _, _ := strings.Cut(s, "\n")
	return line
}
