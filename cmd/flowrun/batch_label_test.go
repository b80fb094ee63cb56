package main

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/chromedp/chromedp"

	"github.com/flowrun/flowrun/batch/batchtest"
)

// iterated runs the loop a person runs: a labelled batch of a pipeline
// whose prompt is a file, a batch over another dataset, then the prompt
// edited and the pipeline run again over the first dataset with a model
// override. It returns the directory, the store and the three batch ids.
func iterated(t *testing.T) (dir, db string, ids [3]string) {
	t.Helper()
	dir = t.TempDir()
	p := writeFile(t, dir, "qa.yaml", strings.Replace(fmt.Sprintf(qaPipeline, ""), `prompt: "Q: ${{ inputs.question }}"`, `prompt: {file: prompt.md}`, 1))
	writeFile(t, dir, "prompt.md", "Q: ${{ inputs.question }}\n")
	data := writeFile(t, dir, "qa.jsonl", strings.Join(batchtest.QAHalfRight(4), "\n")+"\n")
	other := writeFile(t, dir, "other.jsonl", strings.Join(batchtest.QAHalfRight(2), "\n")+"\n")
	_, srv := newQAModel(t, 0)
	useModel(t, srv)
	db = filepath.Join(dir, "runs.db")
	runs := [][]string{
		{"--dataset", data, "--label", "baseline", "--description", "the prompt asks the question alone"},
		{"--dataset", other},
		{"--dataset", data, "--label", "one word", "--model", "default=gpt-4.1-nano"},
	}
	for i, args := range runs {
		if i == 2 {
			writeFile(t, dir, "prompt.md", "Q: ${{ inputs.question }}\nAnswer in one word.\n")
		}
		code, stdout, stderr := flowrun(t, append([]string{"batch", p, "--store", db, "--json"}, args...)...)
		if code != exitOK && code != exitFailed {
			t.Fatalf("batch %d: exit %d\n%s\n%s", i, code, stdout, stderr)
		}
		m := regexp.MustCompile(`"batch": ?"([^"]+)"`).FindStringSubmatch(stdout)
		if m == nil {
			t.Fatalf("batch %d printed no id:\n%s", i, stdout)
		}
		ids[i] = m[1]
	}
	return dir, db, ids
}

// TestBatchLabelAndCompareWithPrevious: a batch's label and description
// show in batch show and batches; batch label renames one; batch compare
// with one batch picks the batch before it of the same pipeline and
// dataset (not the newer one over another dataset), says so, and opens
// with the prompt file's diff and the model override; a batch against
// itself reads as the same pipeline; a first batch has nothing to compare
// with, which is a usage error.
func TestBatchLabelAndCompareWithPrevious(t *testing.T) {
	_, db, ids := iterated(t)
	a, other, b := ids[0], ids[1], ids[2]

	code, out, errOut := flowrun(t, "batch", "show", a, "--store", db)
	if code != exitOK || !strings.Contains(out, "label      baseline\n") || !strings.Contains(out, "description the prompt asks the question alone\n") {
		t.Errorf("show: exit %d\n%s%s", code, out, errOut)
	}
	if code, out, errOut := flowrun(t, "batch", "label", other, "other data", "--store", db); code != exitOK || !strings.Contains(out, `labelled batch `+other+` "other data"`) {
		t.Errorf("label: exit %d %s%s", code, out, errOut)
	}
	_, out, _ = flowrun(t, "batches", "--store", db)
	for _, want := range []string{`"one word"  `, `"other data"  `, `"baseline"  `} {
		if !strings.Contains(out, want) {
			t.Errorf("batches lacks %s:\n%s", want, out)
		}
	}

	code, out, errOut = flowrun(t, "batch", "compare", b, "--store", db)
	if code != exitOK {
		t.Fatalf("compare B: exit %d\n%s%s", code, out, errOut)
	}
	if want := fmt.Sprintf(`comparing with %s ("baseline"), the batch before %s`, a, b); !strings.Contains(errOut, want) {
		t.Errorf("compare B does not say it picked A: %q", errOut)
	}
	for _, want := range []string{
		"A  " + a + ` "baseline"  qa (`,
		"B  " + b + ` "one word"  qa (`,
		"changes from A to B:\n  prompt.md (changed)\n    @@ -1,1 +1,2 @@\n     Q: ${{ inputs.question }}\n    +Answer in one word.\n",
		"  model overrides  none -> default=gpt-4.1-nano\n",
		"0 fixed, 2 broken", // the model's answers now carry the prompt's second line
		"    B  answer: A1⏎Answer in one word.",
	} {
		if !strings.Contains(out, want) {
			t.Errorf("compare B lacks %q:\n%s", want, out)
		}
	}
	if strings.Index(out, "changes from A to B") > strings.Index(out, "pass rate") {
		t.Errorf("the changes do not come first:\n%s", out)
	}

	_, out, _ = flowrun(t, "batch", "compare", a, b, "--store", db, "--json")
	var c struct {
		A       struct{ Label string }
		Changes struct {
			Files []struct {
				Path  string
				Lines []string
			}
		}
	}
	if err := json.Unmarshal([]byte(out), &c); err != nil || c.A.Label != "baseline" || len(c.Changes.Files) != 1 || c.Changes.Files[0].Path != "prompt.md" {
		t.Errorf("--json: %v %+v\n%s", err, c, out)
	}
	report := filepath.Join(t.TempDir(), "report.html")
	if code, out, errOut := flowrun(t, "batch", "report", b, "--compare", a, "-o", report, "--store", db); code != exitOK {
		t.Fatalf("report: exit %d %s%s", code, out, errOut)
	}
	page, err := os.ReadFile(report)
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{`<span class="label">one word</span>`, `“baseline” (A)`, `<h3>What changed from A to B</h3>`,
		`<ins>&#43;Answer in one word.</ins>`, `<td class="fname">model overrides</td><td>none</td><td>default=gpt-4.1-nano</td>`} {
		if !strings.Contains(string(page), want) {
			t.Errorf("the report lacks %s", want)
		}
	}
	if code, out, _ := flowrun(t, "batch", "compare", a, a, "--store", db); code != exitOK || !strings.Contains(out, "changes    none: same pipeline, same files, same settings\n") {
		t.Errorf("A against A: exit %d\n%s", code, out)
	}
	code, _, errOut = flowrun(t, "batch", "compare", a, "--store", db)
	if code != exitInvalid || !strings.Contains(errOut, "no batch of") || !strings.Contains(errOut, "flowrun batch compare A "+a) {
		t.Errorf("the first batch alone: exit %d %q", code, errOut)
	}
	if _, out, _ := flowrun(t, "batch", "--help"); !strings.Contains(out, "-label TEXT") || !strings.Contains(out, "-description sentence") {
		t.Errorf("batch --help lacks --label or --description:\n%s", out)
	}
}

// TestComparePageInBrowser drives the web UI in Chromium from B's batch
// page: its Compare with list names batches by label and date and
// preselects the batch before B of its pipeline and dataset; comparing
// opens on the prompt's diff and the model override, and each flipped
// item shows its input and expected value beside A's and B's outputs.
// FLOWRUN_DOCS_SCREENSHOT=1 writes the compare page to
// docs/img/compare.png.
func TestComparePageInBrowser(t *testing.T) {
	dir, db, ids := iterated(t)
	base, _ := serve(t, dir, "--store", db)
	b := browser(t)(t)
	b.do("open B's batch page", chromedp.Navigate(base+"batches/"+ids[2]), chromedp.WaitVisible(chromedp.CSS("#compare-with")))
	selected := b.value(`document.querySelector('#compare-with select').selectedOptions[0].value`)
	text := b.text(`#compare-with select option:checked`)
	if selected != ids[0] || !strings.HasPrefix(text, "baseline · ") || !strings.HasSuffix(text, "(previous)") {
		t.Errorf("Compare with preselects %s %q, want %s, the baseline", selected, text, ids[0])
	}
	if all := b.text(`#compare-with select`); !strings.Contains(all, "other.jsonl") || strings.Contains(all, ids[1]) {
		t.Errorf("the options name batches by id, not label and date:\n%s", all)
	}
	b.shot("batch-page")
	b.do("compare", chromedp.Click(chromedp.CSS(`#compare-with button`)), chromedp.WaitVisible(chromedp.CSS("section.changes")))
	changes := b.text("section.changes")
	for _, want := range []string{"prompt.md", "+Answer in one word.", "model overrides", "none", "default=gpt-4.1-nano"} {
		if !strings.Contains(changes, want) {
			t.Errorf("the changes lack %q:\n%s", want, changes)
		}
	}
	if !b.eval(`document.querySelector("section.changes pre.diff ins").textContent === "+Answer in one word."`) {
		t.Error("the added prompt line is not marked as added")
	}
	pair := b.text("tbody.pair table.side")
	for _, want := range []string{"input question", "q1", "expected", "A1", "output answer"} {
		if !strings.Contains(pair, want) {
			t.Errorf("the flipped item lacks %q:\n%s", want, pair)
		}
	}
	if strings.Contains(pair, "expected expected") {
		t.Errorf("the dataset's field expected is labelled twice:\n%s", pair)
	}
	b.docShot("compare")
	if _, err := os.Stat(filepath.Join(b.dir, "compare.png")); err != nil {
		t.Error(err)
	}
}
