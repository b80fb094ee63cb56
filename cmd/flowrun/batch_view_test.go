package main

import (
	"encoding/csv"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/flowrun/flowrun/batch/batchtest"
	"github.com/flowrun/flowrun/store"
)

// viewStore records two batches of the same 14 items, B fixing 8 and
// breaking 2 of A's, and returns the store's path.
func viewStore(t *testing.T) string {
	t.Helper()
	path := filepath.Join(t.TempDir(), "flowrun.db")
	st, err := store.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	batchtest.Record(t, st, "b20261122T100000-aaaa", append(batchtest.Keys("k", 13), "gone"), "PPFFFFFFFFPPFP", 1, "")
	batchtest.Record(t, st, "b20261122T110000-bbbb", append(batchtest.Keys("k", 13), "new"), "FFPPPPPPPPPPFE", 2, "bad \x1b]0;title\x07 reply")
	return path
}

func TestBatchesList(t *testing.T) {
	path := viewStore(t)
	code, out, errOut := flowrun(t, "batches", "--store", path)
	if code != exitOK {
		t.Fatalf("exit %d: %s", code, errOut)
	}
	lines := strings.Split(strings.TrimRight(out, "\n"), "\n")
	if len(lines) != 5 || !strings.HasPrefix(lines[1], "b20261122T110000-bbbb") || !strings.HasPrefix(lines[3], "b20261122T100000-aaaa") {
		t.Fatalf("want the newest batch first, two lines each:\n%s", out)
	}
	for _, l := range lines {
		if n := len([]rune(l)); n > 80 {
			t.Errorf("line of %d columns: %q", n, l)
		}
	}
	if !strings.Contains(lines[1], "completed") || !strings.Contains(lines[1], "14/14") || !strings.Contains(lines[1], "71.4%") ||
		!strings.Contains(lines[2], "pipelines/solve.yaml on tasks.jsonl") {
		t.Errorf("B's lines: %q %q", lines[1], lines[2])
	}
	code, out, _ = flowrun(t, "batches", "--store", path, "--json")
	var list []map[string]any
	if err := json.Unmarshal([]byte(out), &list); code != exitOK || err != nil || len(list) != 2 || list[0]["id"] != "b20261122T110000-bbbb" {
		t.Fatalf("--json: exit %d, %v\n%s", code, err, out)
	}
	if code, out, _ := flowrun(t, "batches", "--store", filepath.Join(t.TempDir(), "none.db")); code != exitOK || !strings.Contains(out, "no batches yet") {
		t.Errorf("no store: exit %d %q", code, out)
	}
}

func TestBatchShow(t *testing.T) {
	path := viewStore(t)
	code, out, errOut := flowrun(t, "batch", "show", "last", "--store", path)
	if code != exitOK {
		t.Fatalf("exit %d: %s", code, errOut)
	}
	for _, want := range []string{
		"batch b20261122T110000-bbbb",
		"items      14: 13 completed, 1 failed, 0 stopped, 0 waiting, 0 pending",
		"pass rate  71.4% (10/14), 95% interval 45.4%-88.3% (solved)",
		"exact    50.0% (7/14)",
		"steps    mean 7 over 13 items",
		"latency    p50 1.50s, p95 2.67s",
		"k09  completed  true    true   9      $0.018  900     1.80s",
		"model_error",
		`bad \x1b]0;title\x07 reply`,
		"KEY", "SOLVED", "EXACT", "STEPS", "COST", "DURATION",
	} {
		if !strings.Contains(out, want) {
			t.Errorf("show lacks %q:\n%s", want, out)
		}
	}
	if strings.Contains(out, "\x1b") {
		t.Error("a control character from the store reached the terminal")
	}
	// jsonl: one object a line per item, metrics as fields.
	code, out, _ = flowrun(t, "batch", "show", "b20261122T11", "--store", path, "--format", "jsonl")
	lines := strings.Split(strings.TrimSpace(out), "\n")
	var first, last map[string]any
	if code != exitOK || len(lines) != 14 || json.Unmarshal([]byte(lines[0]), &first) != nil || json.Unmarshal([]byte(lines[13]), &last) != nil {
		t.Fatalf("jsonl: exit %d\n%s", code, out)
	}
	if first["key"] != "k01" || first["solved"] != false || first["exact"] != true || first["steps"] != 1.0 || first["pass"] != false ||
		last["status"] != "failed" || last["class"] != "model_error" {
		t.Errorf("jsonl rows %v / %v", first, last)
	}
	// csv: a header, then one row per item.
	code, out, _ = flowrun(t, "batch", "show", "last", "--store", path, "--format", "csv")
	recs, err := csv.NewReader(strings.NewReader(out)).ReadAll()
	if code != exitOK || err != nil || len(recs) != 15 {
		t.Fatalf("csv: exit %d, %v\n%s", code, err, out)
	}
	if strings.Join(recs[0], ",") != "index,pass,key,status,solved,exact,steps,cost_usd,tokens,duration_ms,run,class,error,inputs,expected,outputs,reasoning,checks,note" ||
		strings.Join(recs[3][:7], ",") != "2,true,k03,completed,true,true,3" {
		t.Errorf("csv header %v, row %v", recs[0], recs[3])
	}
	code, out, _ = flowrun(t, "batch", "show", "last", "--store", path, "--format", "json")
	var s map[string]any
	if code != exitOK || json.Unmarshal([]byte(out), &s) != nil || s["primary"] != "solved" || len(s["rows"].([]any)) != 14 {
		t.Errorf("json: exit %d\n%.400s", code, out)
	}
	if code, _, errOut := flowrun(t, "batch", "show", "b2026", "--store", path); code != exitInvalid || !strings.Contains(errOut, "ambiguous") {
		t.Errorf("ambiguous prefix: exit %d %s", code, errOut)
	}
	if code, _, errOut := flowrun(t, "batch", "show", "last", "--store", path, "--format", "xml"); code != exitInvalid || !strings.Contains(errOut, "xml") {
		t.Errorf("bad format: exit %d %s", code, errOut)
	}
}

func TestBatchCompareCLI(t *testing.T) {
	path := viewStore(t)
	code, out, errOut := flowrun(t, "batch", "compare", "b20261122T10", "last", "--store", path)
	if code != exitOK {
		t.Fatalf("exit %d: %s", code, errOut)
	}
	for _, want := range []string{
		"13 items in both (1 only in A, 1 only in B)",
		"pass rate  30.8% -> 76.9%  (+46.2 points)",
		"8 fixed, 2 broken, 3 same (2 passed in both, 1 failed in both)",
		"p = 0.1094: could well be chance",
		"fixed (failed in A, passed in B): 8\n  k03 k04 k05 k06 k07 k08 k09 k10\n",
		"broken (passed in A, failed in B): 2\n  k01 k02\n",
		"outputs, A then B:\n  k03 (fixed)\n    A  answer: The answer is k03\n    B  answer: bad",
		"only in A: 1\n  gone\n", "only in B: 1\n  new\n",
	} {
		if !strings.Contains(out, want) {
			t.Errorf("compare lacks %q:\n%s", want, out)
		}
	}
	code, out, _ = flowrun(t, "batch", "compare", "b20261122T10", "last", "--store", path, "--json")
	var c map[string]any
	if code != exitOK || json.Unmarshal([]byte(out), &c) != nil || c["p_value"] != 0.109375 || len(c["fixed"].([]any)) != 8 {
		t.Errorf("--json: exit %d\n%.300s", code, out)
	}
	// B alone is compared with the batch before it, of its pipeline and
	// dataset.
	code, out, errOut = flowrun(t, "batch", "compare", "last", "--store", path)
	if code != exitOK || !strings.Contains(errOut, "comparing with b20261122T100000-aaaa, the batch before b20261122T110000-bbbb") ||
		!strings.Contains(out, "8 fixed, 2 broken") {
		t.Errorf("one batch: exit %d %s\n%s", code, errOut, out)
	}
	if code, _, _ := flowrun(t, "batch", "compare", "a", "b", "c", "--store", path); code != exitInvalid {
		t.Errorf("three batches: exit %d", code)
	}
}

func TestBatchReportCLI(t *testing.T) {
	path := viewStore(t)
	out := filepath.Join(t.TempDir(), "report.html")
	code, stdout, errOut := flowrun(t, "batch", "report", "last", "--compare", "b20261122T10", "-o", out, "--store", path)
	if code != exitOK || !strings.Contains(stdout, "wrote "+out) {
		t.Fatalf("exit %d: %s %s", code, stdout, errOut)
	}
	page, err := os.ReadFile(out)
	if err != nil || !strings.Contains(string(page), `id="run-b20261122T110000-bbbb-r14"`) || !strings.Contains(string(page), "Fixed <span") {
		t.Fatalf("report: %v\n%.300s", err, page)
	}
	// B alone is compared with the batch before it, and says so; the
	// first batch, or --compare none, has a report of its own.
	code, _, errOut = flowrun(t, "batch", "report", "last", "-o", out, "--store", path)
	page, err = os.ReadFile(out)
	if code != exitOK || err != nil || !strings.Contains(errOut, "comparing with b20261122T100000-aaaa, the batch before b20261122T110000-bbbb") || !strings.Contains(string(page), "Fixed <span") {
		t.Errorf("one batch: exit %d %s %v", code, errOut, err)
	}
	for _, args := range [][]string{{"b20261122T10"}, {"last", "--compare", "none"}} {
		code, _, errOut = flowrun(t, append(append([]string{"batch", "report"}, args...), "-o", out, "--store", path)...)
		page, err = os.ReadFile(out)
		if code != exitOK || err != nil || strings.Contains(errOut, "comparing") || strings.Contains(string(page), "Fixed <span") {
			t.Errorf("%v: exit %d %s %v: compared", args, code, errOut, err)
		}
	}
	if code, _, errOut := flowrun(t, "batch", "report", "nope", "--store", path); code != exitInvalid || !strings.Contains(errOut, "no batch") {
		t.Errorf("unknown batch: exit %d %s", code, errOut)
	}
	if code, _, errOut := flowrun(t, "batch", "frobnicate"); code != exitInvalid || !strings.Contains(errOut, "flowrun batch") {
		t.Errorf("unknown subcommand: exit %d %s", code, errOut)
	}
}
