package flowtest

import (
	"bytes"
	"context"
	"encoding/xml"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func writeTest(t *testing.T, body string) string {
	t.Helper()
	return writeTestOf(t, func(pipeline string) string { return pipeline }, body)
}

// writeTestOf writes testdata/loop.yaml, changed by edit, and a test file
// for it.
func writeTestOf(t *testing.T, edit func(pipeline string) string, body string) string {
	t.Helper()
	dir := t.TempDir()
	src, err := os.ReadFile("testdata/loop.yaml")
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "loop.yaml"), []byte(edit(string(src))), 0o644); err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(dir, "loop.test.yaml")
	if err := os.WriteFile(path, []byte(body), 0o644); err != nil {
		t.Fatal(err)
	}
	return path
}

func runFile(t *testing.T, body string) (*File, []*Result) {
	t.Helper()
	f, ds := Load(writeTest(t, body))
	if len(ds) > 0 {
		t.Fatalf("load: %s", ds)
	}
	return f, (&Runner{}).RunAll(context.Background(), []*File{f}, nil, 2)
}

const reviseTwice = `
cases:
  - name: revise twice then accept
    mocks:
      critique:
        - {json: {verdict: REVISE}}
        - {json: {verdict: REVISE}}
        - {json: {verdict: ACCEPT}}
    expect:
      outputs: {verdict: ACCEPT}
      route: [refine, critique, route, critique, route, critique, route]
`

func TestMocksServeEachIterationInOrder(t *testing.T) {
	_, results := runFile(t, reviseTwice)
	if !results[0].Pass {
		t.Fatalf("case failed: %s", strings.Join(results[0].Problems, "\n"))
	}
	if got := results[0].Route[len(results[0].Route)-1]; got != "refine[3]/route" {
		t.Errorf("last step %q, want refine[3]/route", got)
	}
}

func TestFailingExpectationShowsTheDiff(t *testing.T) {
	_, results := runFile(t, `
cases:
  - name: wrong
    mocks:
      critique: {json: {verdict: ACCEPT}}
    expect:
      outputs: {verdict: REVISE}
      route: [refine, critique, route, critique]
`)
	r := results[0]
	if r.Pass {
		t.Fatal("a case with wrong expectations passed")
	}
	all := strings.Join(r.Problems, "\n")
	for _, want := range []string{`outputs.verdict:`, `expected "REVISE"`, `got      "ACCEPT"`, "route:", "✗  4 critique", "-"} {
		if !strings.Contains(all, want) {
			t.Errorf("problems lack %q:\n%s", want, all)
		}
	}
}

func TestUnmockedModelNodeIsNamed(t *testing.T) {
	_, results := runFile(t, `
cases:
  - name: no mocks
    expect: {status: completed}
`)
	all := strings.Join(results[0].Problems, "\n")
	if results[0].Pass || !strings.Contains(all, `no mock for node "refine/critique"`) {
		t.Fatalf("want a failure naming the node, got:\n%s", all)
	}
}

func TestMockForUnknownNodeIsPositioned(t *testing.T) {
	_, ds := Load(writeTest(t, `
cases:
  - name: typo
    mocks:
      critque: {json: {verdict: ACCEPT}}
    expect:
      outputs: {verdikt: ACCEPT}
`))
	s := ds.String()
	for _, want := range []string{
		`loop.test.yaml:5:7: error: mocks: the pipeline has no node "critque" (did you mean "critique"?)`,
		`loop.test.yaml:7:17: error: expect.outputs: the pipeline has no output "verdikt" (did you mean "verdict"?)`,
	} {
		if !strings.Contains(s, want) {
			t.Errorf("diagnostics lack %q:\n%s", want, s)
		}
	}
}

func TestMockThatBreaksOutputSchemaIsRefused(t *testing.T) {
	_, ds := Load(writeTest(t, `
cases:
  - name: bad
    mocks:
      critique: {json: {verdict: MAYBE}}
`))
	if !strings.Contains(ds.String(), `loop.test.yaml:5:24: error: mock for "critique" does not match its output_schema`) {
		t.Errorf("got:\n%s", ds)
	}
}

func TestCoverageNamesUncoveredRoutes(t *testing.T) {
	f, results := runFile(t, reviseTwice)
	cov := NewCoverage(f.Pipeline)
	cov.Add(results[0].Events)
	covered, total := cov.Counts()
	// Items: 3 nodes, route's case 1 and default, and the loop's until,
	// exhausted and break exits: 8; the case never breaks or exhausts.
	if covered != 5 || total != 8 {
		t.Errorf("covered %d of %d, want 5 of 8:\n%s", covered, total, cov)
	}
	s := cov.String()
	for _, want := range []string{"refine/route case 1 (when: state.verdict == \"STOP\")", "refine loop exit: exhausted", "refine loop exit: break"} {
		if !strings.Contains(s, want) {
			t.Errorf("report lacks %q:\n%s", want, s)
		}
	}
	_, more := runFile(t, `
cases:
  - name: stop
    mocks: {critique: {json: {verdict: STOP}}}
  - name: never accepts
    mocks: {critique: {json: {verdict: REVISE}}}
`)
	for _, r := range more {
		cov.Add(r.Events)
	}
	if covered, total := cov.Counts(); covered != total {
		t.Errorf("after the stop and exhausted cases, %d of %d:\n%s", covered, total, cov)
	}
}

func TestJUnitParses(t *testing.T) {
	_, results := runFile(t, reviseTwice+`
  - name: fails
    mocks: {critique: {json: {verdict: ACCEPT}}}
    expect: {status: failed}
`)
	var buf bytes.Buffer
	if err := WriteJUnit(&buf, results); err != nil {
		t.Fatal(err)
	}
	var got struct {
		Tests  int `xml:"tests,attr"`
		Fails  int `xml:"failures,attr"`
		Suites []struct {
			Cases []struct {
				Failure *struct {
					Message string `xml:"message,attr"`
				} `xml:"failure"`
			} `xml:"testcase"`
		} `xml:"testsuite"`
	}
	if err := xml.Unmarshal(buf.Bytes(), &got); err != nil {
		t.Fatalf("JUnit does not parse: %v\n%s", err, buf.String())
	}
	if got.Tests != 2 || got.Fails != 1 || len(got.Suites) != 1 || got.Suites[0].Cases[1].Failure == nil {
		t.Errorf("got %+v", got)
	}
	if !strings.Contains(got.Suites[0].Cases[1].Failure.Message, "status: expected failed, got completed") {
		t.Errorf("failure message %q", got.Suites[0].Cases[1].Failure.Message)
	}
}

const exhausted = `
cases:
  - name: never accepts
    mocks:
      critique: {json: {verdict: REVISE}, usage: {prompt: 100000, completion: 10000}}
    expect:
      events:
        - {type: loop_exhausted, node: refine, count: 1}
        - {type: model_turn, node: critique, min: 3, max: 3}
        - {type: node_retry, count: 0}
        - {type: node_started, node: "refine[2]/critique"}
      steps: {min: 1, max: 20}
      cost_usd: {min: 0.0001, max: 0.5}
`

func TestEventsAndBoundsPass(t *testing.T) {
	_, results := runFile(t, exhausted)
	if !results[0].Pass {
		t.Fatalf("case failed: %s", strings.Join(results[0].Problems, "\n"))
	}
}

func TestEventsAndBoundsFailWithWhatHappened(t *testing.T) {
	_, results := runFile(t, `
cases:
  - name: wrong counts
    mocks:
      critique: {json: {verdict: REVISE}, usage: {prompt: 100000, completion: 10000}}
    expect:
      events:
        - {type: loop_exhausted, count: 0}
        - {type: model_turn, node: critique, max: 2}
        - {type: node_retry}
      steps: {max: 2}
      cost_usd: {max: 0.00001}
`)
	r := results[0]
	if r.Pass {
		t.Fatal("a case with wrong event counts and bounds passed")

	}
	all := strings.Join(r.Problems, "\n")
	for _, want := range []string{
		"loop.test.yaml:8:11: events: expected exactly 0 loop_exhausted event(s), got 1 (all loop_exhausted events: 1, at refine)",
		"loop.test.yaml:9:11: events: expected at most 2 model_turn event(s) at critique, got 3 (all model_turn events: 3, at refine[1]/critique, refine[2]/critique, refine[3]/critique)",
		"loop.test.yaml:10:11: events: expected at least 1 node_retry event(s), got 0 (all node_retry events: none)",
		"steps: expected at most 2, got ",
		"cost_usd: expected at most $0.00001, got $0.168",
	} {
		if !strings.Contains(all, want) {
			t.Errorf("problems lack %q:\n%s", want, all)
		}
	}
}

func TestEventExpectationsArePositioned(t *testing.T) {
	_, ds := Load(writeTest(t, `
cases:
  - name: typos
    mocks: {critique: {json: {verdict: ACCEPT}}}
    expect:
      events:
        - {type: loop_exhaustd}
        - {type: question, node: critiq}
        - {type: question, count: 1, max: 2}
        - {node: critique}
      steps: {max: many}
      cost_usd: {min: 2, max: 1, most: 3}
`))
	s := ds.String()
	for _, want := range []string{
		`loop.test.yaml:7:18: error: expect.events: unknown event type "loop_exhaustd"`,
		`(did you mean "loop_exhausted"?)`,
		`loop.test.yaml:8:34: error: expect.events: the pipeline has no node "critiq" (did you mean "critique"?)`,
		`loop.test.yaml:9:35: error: expect.events: write count: or min:/max:, not both`,
		`loop.test.yaml:10:11: error: expect.events: an item needs type:`,
		`loop.test.yaml:11:20: error: expect.steps: max: "many" is not a number`,
		`loop.test.yaml:12:17: error: expect.cost_usd: min 2 is above max 1`,
		`loop.test.yaml:12:34: error: unknown key "most" in expect.cost_usd`,
	} {
		if !strings.Contains(s, want) {
			t.Errorf("diagnostics lack %q:\n%s", want, s)
		}
	}
}

// TestMissingOutputSaidOnce: a that: reading an output the run does not
// have says so once per output, not once per use with expr-lang's
// messages; a run that failed with no outputs says it has none, once.
func TestMissingOutputSaidOnce(t *testing.T) {
	_, results := runFile(t, `
cases:
  - name: reads an output that does not exist
    mocks:
      critique: [{json: {verdict: ACCEPT}}]
    expect:
      that:
        - outputs.score[0] > 1
        - len(outputs.score) == 2
        - outputs.verdict == "ACCEPT"
  - name: the run fails, so no output exists
    mocks:
      critique: [{error: critical}]
    expect:
      outputs: {verdict: ACCEPT}
      that: [outputs.verdict == "ACCEPT", len(outputs.verdict) > 1]
`)
	got := results[0].Problems
	if len(got) != 1 || !strings.Contains(got[0], `reads outputs.score, which the run does not have (outputs: verdict)`) {
		t.Errorf("missing output: problems %q", got)
	}
	got = results[1].Problems
	if len(got) != 2 || !strings.HasPrefix(got[0], "status: expected completed, got failed") ||
		got[1] != "outputs: the run has none, so 3 output expectations were not checked" {
		t.Errorf("failed run: problems %q", got)
	}
}
