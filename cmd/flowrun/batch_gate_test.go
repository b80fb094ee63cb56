package main

import (
	"encoding/xml"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/flowrun/flowrun/batch/batchtest"
)

// qaCase is a batch of qaPipeline over a dataset of items half of which
// expect a wrong answer, with the model client pointed at a QA model.
type qaCase struct {
	dir, pipeline, data, db string
	model                   *batchtest.QAModel
}

// newQACase writes the qa pipeline and a dataset of n items, the even
// ones expecting a wrong answer, into a new directory, and points the
// model client at a new QA model.
func newQACase(t *testing.T, n int) qaCase {
	t.Helper()
	dir := t.TempDir()
	m, srv := newQAModel(t, 0)
	useModel(t, srv)
	return qaCase{dir: dir, pipeline: writeFile(t, dir, "qa.yaml", fmt.Sprintf(qaPipeline, "")),
		data: writeFile(t, dir, "qa.jsonl", strings.Join(batchtest.QAHalfRight(n), "\n")+"\n"), db: filepath.Join(dir, "runs.db"), model: m}
}

// --repeat 3 runs every item three times, and batch show reports each
// item's pass@N, pass^N and class, and the metrics' spread.
func TestBatchRepeatShow(t *testing.T) {
	c := newQACase(t, 2)
	p, data, db, model := c.pipeline, c.data, c.db, c.model
	code, stdout, stderr := flowrun(t, "batch", p, "--dataset", data, "--store", db, "--repeat", "3")
	if code != exitOK {
		t.Fatalf("exit %d\n%s\n%s", code, stdout, stderr)
	}
	if asked := model.Requests(); asked["Q: q1"] != 3 || asked["Q: q2"] != 3 {
		t.Fatalf("asked %v, want each question 3 times", asked)
	}
	containsAll(t, "the batch's item lines", stderr, "  ok   line 1#1 ", "  ok   line 1#3 ", "  miss line 2#2 ", " completed: 6 runs of 2 items, 6 completed, 0 failed;")
	_, items := batchStore(t, db)
	if len(items) != 6 {
		t.Fatalf("%d item runs, want 6", len(items))
	}
	code, stdout, stderr = flowrun(t, "batch", "show", "last", "--store", db)
	if code != exitOK {
		t.Fatalf("show: exit %d\n%s", code, stderr)
	}
	containsAll(t, "batch show", stdout,
		"runs       6 of 2 items: 6 completed,", "pass rate  50.0% (3/6)", "per run (mean)", "\nline 2#3  ",
		"repeats    2 items: 1 always pass, 1 always fail, 0 flaky",
		"pass@N   50.0% (1/2)",
		"line 1                         3/3 passed  pass@3 true  pass^3 true  always-pass",
		"line 2                         0/3 passed  pass@3 false pass^3 false always-fail",
		"chars    mean 2, sd 0 across items, sd 0 within an item")
	if code, _, stderr := flowrun(t, "batch", p, "--dataset", data, "--store", db, "--repeat", "0"); code != exitInvalid || !strings.Contains(stderr, "--repeat 0") {
		t.Fatalf("--repeat 0: exit %d\n%s", code, stderr)
	}
}

// --junit writes one test case per item with its metric values, and
// --fail-under exits 1 when the pass rate is under the floor, 0 when not.
func TestBatchJunitAndFailUnder(t *testing.T) {
	c := newQACase(t, 4)
	p, data, db := c.pipeline, c.data, c.db
	junit := filepath.Join(c.dir, "report.xml")
	code, _, stderr := flowrun(t, "batch", p, "--dataset", data, "--store", db, "--fail-under", "0.6", "--junit", junit)
	if code != exitFailed || !strings.Contains(stderr, "--fail-under: pass rate 50.0% (2/4, exact) is below 60.0%") {
		t.Fatalf("a 50%% batch under --fail-under 0.6: exit %d\n%s", code, stderr)
	}
	raw, err := os.ReadFile(junit)
	if err != nil {
		t.Fatal(err)
	}
	if times := regexp.MustCompile(`time="([^"]*)"`).FindAllStringSubmatch(string(raw), -1); len(times) != 5 {
		t.Errorf("time attributes %q, want one per suite and case", times)
	} else {
		for _, m := range times {
			if !regexp.MustCompile(`^\d+\.\d{3}$`).MatchString(m[1]) {
				t.Errorf("time %q, want seconds to the millisecond", m[1])
			}
		}
	}
	var report struct {
		Suites []struct {
			Tests    int `xml:"tests,attr"`
			Failures int `xml:"failures,attr"`
			Cases    []struct {
				Name    string `xml:"name,attr"`
				Failure *struct {
					Message string `xml:"message,attr"`
				} `xml:"failure"`
			} `xml:"testcase"`
		} `xml:"testsuite"`
	}
	if err := xml.Unmarshal(raw, &report); err != nil || len(report.Suites) != 1 {
		t.Fatalf("the JUnit report: %v\n%s", err, raw)
	}
	s := report.Suites[0]
	if s.Tests != 4 || s.Failures != 2 || s.Cases[0].Name != "line 1" || s.Cases[0].Failure != nil ||
		s.Cases[1].Failure == nil || s.Cases[1].Failure.Message != "answer: A2, expected: wrong" {
		t.Fatalf("the JUnit report:\n%s", raw)
	}
	if code, _, stderr := flowrun(t, "batch", p, "--dataset", data, "--store", db, "--fail-under", "0.5"); code != exitOK {
		t.Fatalf("a 50%% batch under --fail-under 0.5: exit %d\n%s", code, stderr)
	}
	if code, _, stderr := flowrun(t, "batch", p, "--dataset", data, "--store", db, "--fail-under", "80"); code != exitInvalid || !strings.Contains(stderr, "from 0 to 1") {
		t.Fatalf("--fail-under 80: exit %d\n%s", code, stderr)
	}
}

// batch compare --fail-on-regression exits 1 when B is significantly
// worse, and --max-broken when more items broke than allowed.
func TestBatchCompareFailOnRegression(t *testing.T) {
	// A passes every item; B only the odd ones: 6 broken, none fixed.
	p, data, db, a := passingBaseline(t, 12)
	if code, _, stderr := flowrun(t, "batch", p, "--dataset", data, "--store", db); code != exitOK {
		t.Fatalf("batch B: exit %d\n%s", code, stderr)
	}
	code, stdout, stderr := flowrun(t, "batch", "compare", a, "last", "--store", db, "--fail-on-regression")
	if code != exitFailed || !strings.Contains(stderr, "B is worse: 6 broken, 0 fixed, McNemar mid-p 0.01562 < 0.05") {
		t.Fatalf("a regression: exit %d\n%s\n%s", code, stdout, stderr)
	}
	if code, _, stderr := flowrun(t, "batch", "compare", a, "last", "--store", db, "--fail-on-regression", "--alpha", "0.01"); code != exitOK {
		t.Fatalf("at alpha 0.01: exit %d\n%s", code, stderr)
	}
	if code, _, stderr := flowrun(t, "batch", "compare", a, "last", "--store", db, "--max-broken", "5"); code != exitFailed || !strings.Contains(stderr, "6 items broke, more than 5") {
		t.Fatalf("--max-broken 5: exit %d\n%s", code, stderr)
	}
	if code, _, stderr := flowrun(t, "batch", "compare", a, "last", "--store", db, "--max-broken", "6"); code != exitOK {
		t.Fatalf("--max-broken 6: exit %d\n%s", code, stderr)
	}
}

// --until-decided runs items in a seeded random order and stops once the
// sequential test against --compare-to decides, exiting 0 and saying what
// it saved; the same seed gives the same order.
func TestBatchUntilDecided(t *testing.T) {
	p, data, db, a := passingBaseline(t, 40)
	var saved []string
	for range 2 {
		code, _, stderr := flowrun(t, "batch", p, "--dataset", data, "--store", db, "--compare-to", a, "--until-decided", "--seed", "3", "--concurrency", "1")
		if code != exitOK || !strings.Contains(stderr, "seed 3 (--seed 3 repeats it)") || !strings.Contains(stderr, "sequential test: worse than batch "+a+" after ") {
			t.Fatalf("until decided: exit %d\n%s", code, stderr)
		}
		line := stderr[strings.Index(stderr, "saved: "):]
		saved = append(saved, line)
		if strings.HasPrefix(line, "saved: 0 of") {
			t.Fatalf("nothing saved:\n%s", stderr)
		}
	}
	if saved[0] != saved[1] {
		t.Fatalf("the same seed saved differently:\n%s\n%s", saved[0], saved[1])
	}
	if code, _, stderr := flowrun(t, "batch", p, "--dataset", data, "--store", db, "--until-decided"); code != exitInvalid || !strings.Contains(stderr, "go together") {
		t.Fatalf("--until-decided alone: exit %d\n%s", code, stderr)
	}
	if code, _, stderr := flowrun(t, "batch", p, "--dataset", data, "--store", db, "--compare-to", a, "--until-decided", "--repeat", "2"); code != exitInvalid || !strings.Contains(stderr, "drop --repeat") {
		t.Fatalf("--until-decided with --repeat: exit %d\n%s", code, stderr)
	}
}

// passingBaseline writes the qa pipeline and a dataset of n items whose
// even ones expect a wrong answer, and runs batch A on them with a metric
// every item passes; it returns the files, the store and A's id.
func passingBaseline(t *testing.T, n int) (pipeline, data, db, a string) {
	c := newQACase(t, n)
	pipeline, data, db = c.pipeline, c.data, c.db
	if code, _, stderr := flowrun(t, "batch", pipeline, "--dataset", data, "--store", db, "--score", `exact=outputs.answer != ""`); code != exitOK {
		t.Fatalf("batch A: exit %d\n%s", code, stderr)
	}
	_, out, _ := flowrun(t, "batches", "--store", db, "--json")
	a = strings.SplitN(strings.SplitN(out, `"id": "`, 2)[1], `"`, 2)[0]
	return pipeline, data, db, a
}

// containsAll reports each of wants that text (what printed it) lacks.
func containsAll(t *testing.T, what, text string, wants ...string) {
	t.Helper()
	for _, want := range wants {
		if !strings.Contains(text, want) {
			t.Errorf("%s lacks %q:\n%s", what, want, text)
		}
	}
}
