package batch

import (
	"fmt"
	"io"
	"maps"
	"slices"
	"strings"

	"github.com/flowrun/flowrun/arc"
	"github.com/flowrun/flowrun/figures"
	"github.com/flowrun/flowrun/jsonvalue"
	"github.com/flowrun/flowrun/redact"
	"github.com/flowrun/flowrun/store"
)

// Fold is a value as one line of at most width runes: text as it is, a
// map as its fields (name: value), anything else as JSON, newlines shown
// as ⏎, the cut end saying how much was left out.
func Fold(v any, width int) string {
	s := jsonvalue.Text(v)
	if m, ok := v.(map[string]any); ok {
		parts := make([]string, 0, len(m))
		for _, k := range slices.Sorted(maps.Keys(m)) {
			parts = append(parts, k+": "+jsonvalue.Text(m[k]))
		}
		s = strings.Join(parts, "  ")
	}
	s = strings.ReplaceAll(s, "\n", "⏎")
	r := []rune(s)
	if len(r) <= width {
		return s
	}
	note := fmt.Sprintf("… +%d", len(r)-width)
	keep := max(width-len([]rune(note)), 1)
	return string(r[:keep]) + note
}

// WriteItemText writes what one item took, should have given, gave and
// scored, as plain text lines of about width runes: its inputs, the
// dataset fields its metrics read, its outputs (grids drawn as rows of
// digits), each metric, the judge's reasoning, its human rating and its
// error. Secrets are redacted.
func WriteItemText(w io.Writer, s *Summary, r Row, width int) {
	var b strings.Builder
	verdict := ""
	if r.Pass != nil {
		verdict = "  fail"
		if *r.Pass {
			verdict = "  pass"
		}
	}
	fmt.Fprintf(&b, "item %s  %s%s", r.Key, r.Status, verdict)
	if r.Flaky {
		b.WriteString("  flaky")
	}
	if r.Run != "" {
		fmt.Fprintf(&b, "  run %s", r.Run)
	}
	fmt.Fprintf(&b, "  %s  %s\n", figures.USD(r.CostUSD), figures.Duration(r.DurationMS))
	fields := func(title string, m map[string]any, against map[string]any) {
		if len(m) == 0 {
			return
		}
		fmt.Fprintf(&b, "  %s\n", title)
		wants := arc.TestOutputs(against)
		for _, k := range slices.Sorted(maps.Keys(m)) {
			v := m[k]
			if drawn, ok := arc.Grids(v, wantsFor(k, against, wants)); ok {
				for _, d := range drawn {
					name := k
					if d.Label != "" {
						name += " (" + d.Label + ")"
					}
					fmt.Fprintf(&b, "    %s: %dx%d grid%s\n", name, len(d.Grid), len(d.Grid[0]), arc.AgainstNote(d.Grid, d.Want))
					text, _ := arc.GridText(d.Grid)
					for _, line := range strings.Split(text, "\n") {
						fmt.Fprintf(&b, "      %s\n", line)
					}
				}
				continue
			}
			fmt.Fprintf(&b, "    %s: %s\n", k, Fold(v, max(width-6-len(k), 20)))
		}
	}
	fields("inputs", r.Inputs, nil)
	fields("expected", r.Expected, nil)
	fields("outputs", r.Outputs, r.Expected)
	var scores []string
	for _, m := range s.Metrics {
		if v, ok := r.Scores[m.Name]; ok {
			scores = append(scores, m.Name+" "+scoreWord(v))
		}
	}
	if len(scores) > 0 {
		fmt.Fprintf(&b, "  scores  %s\n", strings.Join(scores, "  "))
	}
	for _, name := range slices.Sorted(maps.Keys(r.Checks)) {
		cs := r.Checks[name]
		fmt.Fprintf(&b, "  checks of %s: %s\n", name, ChecksLine(cs))
		for i, c := range cs.List {
			fmt.Fprintf(&b, "    %s %s\n", checkMark(c), Fold(checkName(c, i), max(width-6, 20)))
			if c.Reason != "" {
				b.WriteString(wrap(c.Reason, width, "        "))
			}
		}
	}
	for _, k := range slices.Sorted(maps.Keys(r.Reasoning)) {
		fmt.Fprintf(&b, "  judge's %s\n%s", k, wrap(r.Reasoning[k], width, "    "))
	}
	if r.Note != "" {
		fmt.Fprintf(&b, "  human note\n%s", wrap(r.Note, width, "    "))
	}
	if r.Error != "" {
		fmt.Fprintf(&b, "  error (%s)\n%s", r.Class, wrap(r.Error, width, "    "))
	}
	io.WriteString(w, redact.String(b.String()))
}

// wantsFor are the expected grids an output named name is compared with,
// per test input: those of the expected field of the same name when
// there is one, else the item's test outputs (arc.TestOutputs).
func wantsFor(name string, expected map[string]any, tests [][][]int) [][][]int {
	if v, ok := expected[name]; ok {
		return arc.TestOutputs(map[string]any{name: v})
	}
	return tests
}

// ChecksLine sums up a metric's checks: how many passed of those
// checked, their weighted score and the threshold it was held to.
func ChecksLine(cs store.Checks) string {
	passed, checked := 0, 0
	for _, c := range cs.List {
		if c.Pass != nil {
			checked++
			if *c.Pass {
				passed++
			}
		}
	}
	line := fmt.Sprintf("%d of %d passed", passed, checked)
	if n := len(cs.List) - checked; n > 0 {
		line += fmt.Sprintf(", %d not checked", n)
	}
	if checked > 0 {
		line += fmt.Sprintf(", score %.2f", cs.Score)
	}
	if cs.Threshold > 0 {
		line += fmt.Sprintf(" (threshold %g)", cs.Threshold)
	}
	return line
}

// checkMark is ✓ for a check that passed, ✗ for one that failed, and –
// for one that was not checked.
func checkMark(c store.Check) string {
	switch {
	case c.Pass == nil:
		return "–"
	case *c.Pass:
		return "✓"
	}
	return "✗"
}

// checkName is a check's name, or its place in the list when it has none.
func checkName(c store.Check, i int) string {
	if c.Name != "" {
		return c.Name
	}
	return fmt.Sprintf("check %d", i+1)
}

// scoreWord is a metric value in a line of text.
func scoreWord(v any) string {
	switch x := v.(type) {
	case bool:
		if x {
			return "✓"
		}
		return "✗"
	}
	return jsonvalue.Text(v)
}

// wrap breaks text into lines of at most width runes at spaces, each
// line indented.
func wrap(text string, width int, indent string) string {
	var b strings.Builder
	limit := max(width-len(indent), 20)
	for _, para := range strings.Split(strings.TrimRight(text, "\n"), "\n") {
		line := ""
		for _, word := range strings.Fields(para) {
			if line != "" && len([]rune(line))+1+len([]rune(word)) > limit {
				b.WriteString(indent + line + "\n")
				line = ""
			}
			if line != "" {
				line += " "
			}
			line += word
		}
		b.WriteString(indent + line + "\n")
	}
	return b.String()
}

// Failing are the rows that did not pass: failed, stopped or scored as
// not passing the primary metric.
func (s *Summary) Failing() []Row {
	var out []Row
	for _, r := range s.Rows {
		if failing(r) {
			out = append(out, r)
		}
	}
	return out
}

// failing says whether a row did not pass: it finished and failed the
// primary metric, or it has an error.
func failing(r Row) bool {
	return r.Error != "" || r.Pass != nil && !*r.Pass && finished(r.Status)
}

// Failing is failing(r), for the pages that draw a row that did not
// pass apart, open, as the report does.
func (r Row) Failing() bool { return failing(r) }

// failsOf names the boolean metrics a row fails, space-separated.
func failsOf(r Row) string {
	var out []string
	for _, k := range slices.Sorted(maps.Keys(r.Scores)) {
		if r.Scores[k] == false {
			out = append(out, k)
		}
	}
	return strings.Join(out, " ")
}

// Row finds an item's row by key (its first run), or one run of it by
// the run's name (line 2#3).
func (s *Summary) Row(key string) (Row, bool) {
	i := slices.IndexFunc(s.Rows, func(r Row) bool { return r.Key == key || r.Name == key })
	if i < 0 {
		return Row{}, false
	}
	return s.Rows[i], true
}
