package batch

import (
	"context"
	"encoding/csv"
	"fmt"
	"io"
	"strconv"
	"strings"

	"github.com/flowrun/flowrun/jsonvalue"
	"github.com/flowrun/flowrun/redact"
	"github.com/flowrun/flowrun/store"
)

// Column is a column of a batch's per-item table, as every view and
// export shows it.
type Column struct {
	Name  string
	Value func(Row) any
	Unit  string // "usd" or "ms": how a person reads it; "" otherwise
}

// Columns are the columns of the per-item table: the item, its status,
// the primary metric, the other metrics (each under its own name, or
// score.NAME where that is taken), then cost, tokens, duration, run and
// error, and last the DetailColumns.
func Columns(s *Summary) []Column {
	cols := []Column{
		{"key", func(r Row) any { return r.Key }, ""},
		{"status", func(r Row) any { return string(r.Status) }, ""},
	}
	if s.Repeats != nil {
		cols = append(cols[:1], Column{"repeat", func(r Row) any { return r.Repeat }, ""}, cols[1])
	}
	if s.Primary != "" {
		cols = append(cols, Column{s.Primary, func(r Row) any { return r.Scores[s.Primary] }, ""})
	}
	tail := []Column{
		{"cost_usd", func(r Row) any { return r.CostUSD }, "usd"},
		{"tokens", func(r Row) any { return r.Tokens }, ""},
		{"duration_ms", func(r Row) any { return r.DurationMS }, "ms"},
		{"run", func(r Row) any { return r.Run }, ""},
		{"class", func(r Row) any { return r.Class }, ""},
		{"error", func(r Row) any { return r.Error }, ""},
	}
	tail = append(tail, detailColumns...)
	taken := map[string]bool{"index": true, "pass": true}
	for _, c := range append(cols, tail...) {
		taken[c.Name] = true
	}
	for _, m := range s.Metrics {
		if m.Name == s.Primary {
			continue
		}
		name := m.Name
		if taken[name] {
			name = "score." + name
		}
		cols = append(cols, Column{name, func(r Row) any { return r.Scores[m.Name] }, ""})
	}
	return append(cols, tail...)
}

// detailColumns are what an item took, should have given and gave, and
// why it scored so: the last columns of the exports.
var detailColumns = []Column{
	{"inputs", func(r Row) any { return nilIfEmpty(r.Inputs) }, ""},
	{"expected", func(r Row) any { return nilIfEmpty(r.Expected) }, ""},
	{"outputs", func(r Row) any { return nilIfEmpty(r.Outputs) }, ""},
	{"reasoning", func(r Row) any { return nilIfEmpty(r.Reasoning) }, ""},
	{"checks", func(r Row) any { return nilIfEmpty(r.Checks) }, ""},
	{"note", func(r Row) any {
		if r.Note == "" {
			return nil
		}
		return r.Note
	}, ""},
}

// DetailColumns is how many columns at the end of Columns hold an item's
// inputs, expected fields, outputs, reasoning and note: a view of one line
// per item leaves them out.
var DetailColumns = len(detailColumns)

// nilIfEmpty is m, or nil (an absent cell) when it has nothing.
func nilIfEmpty[V any](m map[string]V) any {
	if len(m) == 0 {
		return nil
	}
	return m
}

// CellText is a cell's value as text: strings as they are, numbers in
// their shortest form, anything else as JSON. Unlike jsonvalue.Text, a
// number never takes an exponent (1e-07 is written 0.0000001): exports
// are read as tables, where a column's numbers should read alike.
func CellText(v any) string {
	switch x := v.(type) {
	case nil:
		return ""
	case string:
		return x
	case float64:
		return strconv.FormatFloat(x, 'f', -1, 64)
	case bool, int:
		return fmt.Sprint(x)
	}
	b, err := jsonvalue.Marshal(v)
	if err != nil {
		return fmt.Sprint(v)
	}
	return string(b)
}

// Record is a row as an export's object: index, pass (the primary
// metric, as the pass rate counts it) and the columns that have a value.
func Record(r Row, cols []Column) map[string]any {
	m := map[string]any{"index": r.Index}
	if r.Pass != nil {
		m["pass"] = *r.Pass
	}
	for _, c := range cols {
		if v := c.Value(r); v != nil {
			m[c.Name] = v
		}
	}
	return m
}

// WriteJSONL writes one JSON object a line per item (Record), secrets
// redacted, each line in one Write.
func WriteJSONL(w io.Writer, s *Summary) error {
	cols := Columns(s)
	for _, r := range s.Rows {
		b, err := jsonvalue.Marshal(Record(r, cols))
		if err != nil {
			return fmt.Errorf("item %s: %w", r.Key, err)
		}
		if _, err := w.Write(append(redact.JSON(b), '\n')); err != nil {
			return err
		}
	}
	return nil
}

// WriteCSV writes the per-item table as CSV: a header, then one record
// per item, secrets redacted and each cell safe to open in a spreadsheet.
func WriteCSV(w io.Writer, s *Summary) error {
	cols := Columns(s)
	cw := csv.NewWriter(w)
	header := []string{"index", "pass"}
	for _, c := range cols {
		header = append(header, c.Name)
	}
	_ = cw.Write(header)
	for _, r := range s.Rows {
		pass := ""
		if r.Pass != nil {
			pass = strconv.FormatBool(*r.Pass)
		}
		rec := []string{strconv.Itoa(r.Index), pass}
		for _, c := range cols {
			rec = append(rec, SpreadsheetSafe(redact.String(CellText(c.Value(r)))))
		}
		_ = cw.Write(rec)
	}
	cw.Flush()
	return cw.Error()
}

// SpreadsheetSafe keeps a cell that came from a model or a dataset from
// running as a formula when the CSV is opened in a spreadsheet: text that
// starts like one gets a leading quote; numbers stay numbers.
func SpreadsheetSafe(cell string) string {
	if cell == "" || !strings.ContainsRune("=+-@\t\r", rune(cell[0])) {
		return cell
	}
	if _, err := strconv.ParseFloat(cell, 64); err == nil {
		return cell
	}
	return "'" + cell
}

// Summaries are the summaries of every batch in st, newest first, without
// their per-item rows: what a list of batches shows.
func Summaries(ctx context.Context, st *store.Store) ([]*Summary, error) {
	all, err := st.Batches(ctx)
	if err != nil {
		return nil, err
	}
	sums := make([]*Summary, 0, len(all))
	for _, b := range all {
		s, err := Summarize(ctx, st, b)
		if err != nil {
			return nil, err
		}
		s.Rows, s.Slowest, s.Costliest = nil, nil, nil
		sums = append(sums, s)
	}
	return sums, nil
}
