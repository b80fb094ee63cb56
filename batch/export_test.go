package batch

import (
	"bytes"
	"context"
	"strings"
	"testing"

	"github.com/flowrun/flowrun/batch/batchtest"
)

func exportFixture() *Summary {
	pass := false
	return &Summary{Primary: "solved",
		Metrics: []Metric{{Name: "solved", Primary: true}, {Name: "tokens"}, {Name: "exact"}},
		Rows: []Row{{Index: 3, Key: "t3", Status: "failed", Pass: &pass, Scores: map[string]any{"solved": false, "tokens": 7.5},
			CostUSD: 0.25, Tokens: 40, DurationMS: 1200, Run: "r3", Class: "model_error", Error: "=HYPERLINK(\"x\")"}}}
}

// TestColumnsRenameTakenMetrics: the other metrics follow the primary,
// and one whose name a fixed column has is score.NAME.
func TestColumnsRenameTakenMetrics(t *testing.T) {
	var names []string
	for _, c := range Columns(exportFixture()) {
		names = append(names, c.Name)
	}
	want := "key status solved score.tokens exact cost_usd tokens duration_ms run class error inputs expected outputs reasoning checks note"
	if got := strings.Join(names, " "); got != want {
		t.Fatalf("columns %s, want %s", got, want)
	}
}

// TestExports: JSONL has index, pass and every column with a value; CSV
// has every column, a formula-like cell defused.
func TestExports(t *testing.T) {
	var jl, cv bytes.Buffer
	if err := WriteJSONL(&jl, exportFixture()); err != nil {
		t.Fatal(err)
	}
	wantJSONL := `{"class":"model_error","cost_usd":0.25,"duration_ms":1200,"error":"=HYPERLINK(\"x\")","index":3,"key":"t3","pass":false,"run":"r3","score.tokens":7.5,"solved":false,"status":"failed","tokens":40}` + "\n"
	if jl.String() != wantJSONL {
		t.Errorf("jsonl:\n%s\nwant:\n%s", jl.String(), wantJSONL)
	}
	if err := WriteCSV(&cv, exportFixture()); err != nil {
		t.Fatal(err)
	}
	wantCSV := "index,pass,key,status,solved,score.tokens,exact,cost_usd,tokens,duration_ms,run,class,error,inputs,expected,outputs,reasoning,checks,note\n" +
		"3,false,t3,failed,false,7.5,,0.25,40,1200,r3,model_error,\"'=HYPERLINK(\"\"x\"\")\",,,,,,\n"
	if cv.String() != wantCSV {
		t.Errorf("csv:\n%s\nwant:\n%s", cv.String(), wantCSV)
	}
}

func TestSpreadsheetSafe(t *testing.T) {
	for in, want := range map[string]string{"=HYPERLINK(\"x\")": "'=HYPERLINK(\"x\")", "@SUM(A1)": "'@SUM(A1)", "-1.5": "-1.5", "+2": "+2", "plain": "plain", "": ""} {
		if got := SpreadsheetSafe(in); got != want {
			t.Errorf("SpreadsheetSafe(%q) = %q, want %q", in, got, want)
		}
	}
}

// TestSummariesWithoutRows: every batch, newest first, without the
// per-item rows a list does not show.
func TestSummariesWithoutRows(t *testing.T) {
	st := batchtest.OpenStore(t)
	batchtest.Record(t, st, "b20261126T100000-aaaa", batchtest.Keys("t", 2), "PF", 1, "")
	batchtest.Record(t, st, "b20261126T110000-bbbb", batchtest.Keys("t", 3), "PPF", 1, "")
	sums, err := Summaries(context.Background(), st)
	if err != nil || len(sums) != 2 {
		t.Fatalf("%d summaries, %v", len(sums), err)
	}
	if sums[0].ID != "b20261126T110000-bbbb" || sums[0].Items.Total != 3 || sums[0].Rows != nil || sums[0].Slowest != nil || sums[0].Costliest != nil {
		t.Errorf("newest: %+v", sums[0])
	}
}
