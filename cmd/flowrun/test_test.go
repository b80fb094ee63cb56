package main

import (
	"encoding/xml"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// testSuiteDir holds the loop pipeline of flowtest's tests and a test file
// with two passing cases and, unless passing, one failing case.
func testSuiteDir(t *testing.T, passing bool) string {
	t.Helper()
	dir := t.TempDir()
	src, err := os.ReadFile("../../flowtest/testdata/loop.yaml")
	if err != nil {
		t.Fatal(err)
	}
	writeFile(t, dir, "loop.yaml", string(src))
	body := `cases:
  - name: accept at once
    mocks: {critique: {json: {verdict: ACCEPT}}}
    expect: {outputs: {verdict: ACCEPT}, route: [refine, critique, route]}
  - name: stop breaks the loop
    mocks: {critique: {json: {verdict: STOP}}}
    expect: {outputs: {verdict: STOP}, events: [{type: loop_exhausted, count: 0}]}
`
	if !passing {
		body += `  - name: wrong expectation
    mocks: {critique: {json: {verdict: REVISE}}}
    expect: {outputs: {verdict: ACCEPT}, route: [refine, critique, route]}
`
	}
	writeFile(t, dir, "loop.test.yaml", body)
	return dir
}

func TestTestCommandPasses(t *testing.T) {
	code, stdout, stderr := flowrun(t, "test", testSuiteDir(t, true))
	if code != exitOK || !strings.Contains(stdout, "2 passed, 0 failed, 2 cases") {
		t.Fatalf("exit %d\nstdout:\n%s\nstderr:\n%s", code, stdout, stderr)
	}
}

func TestTestCommandFailsWithTheDiff(t *testing.T) {
	code, stdout, stderr := flowrun(t, "test", testSuiteDir(t, false))
	if code != exitFailed {
		t.Fatalf("exit %d, want %d\nstdout:\n%s\nstderr:\n%s", code, exitFailed, stdout, stderr)
	}
	for _, want := range []string{
		"FAIL ", "loop.test.yaml: wrong expectation (", "loop.test.yaml:8:5)",
		"outputs.verdict:", `expected "ACCEPT"`, `got      "REVISE"`,
		"route:", "expected", "actual", "✗  4 -", "refine[1]/critique",
		"2 passed, 1 failed, 3 cases",
	} {
		if !strings.Contains(stdout, want) {
			t.Errorf("stdout lacks %q:\n%s", want, stdout)
		}
	}
	if strings.Contains(stdout, "accept at once") {
		t.Errorf("a passing case was printed without -v:\n%s", stdout)
	}
}

func TestTestCommandRunFilters(t *testing.T) {
	code, stdout, stderr := flowrun(t, "test", "-v", testSuiteDir(t, false), "--run", "^stop")
	if code != exitOK || !strings.Contains(stdout, "1 passed, 0 failed, 1 cases") || !strings.Contains(stdout, "ok   ") ||
		!strings.Contains(stdout, "stop breaks the loop") || strings.Contains(stdout, "accept at once") {
		t.Fatalf("exit %d\nstdout:\n%s\nstderr:\n%s", code, stdout, stderr)
	}
	code, _, stderr = flowrun(t, "test", testSuiteDir(t, true), "--run", "(")
	if code != exitInvalid || !strings.Contains(stderr, "--run: ") {
		t.Fatalf("a bad --run regexp: exit %d: %s", code, stderr)
	}
}

func TestTestCommandInvalidFileIsPositioned(t *testing.T) {
	dir := testSuiteDir(t, true)
	writeFile(t, dir, "loop.test.yaml", `cases:
  - name: typo
    mocks:
      critque: {json: {verdict: ACCEPT}}
`)
	code, stdout, stderr := flowrun(t, "test", dir)
	want := filepath.Join(dir, "loop.test.yaml") + `:4:7: error: mocks: the pipeline has no node "critque" (did you mean "critique"?)`
	if code != exitInvalid || !strings.Contains(stderr, want) {
		t.Fatalf("exit %d, want %d with %q\nstdout:\n%s\nstderr:\n%s", code, exitInvalid, want, stdout, stderr)
	}
}

func TestTestCommandWritesJUnit(t *testing.T) {
	dir := testSuiteDir(t, false)
	out := filepath.Join(t.TempDir(), "junit.xml")
	code, stdout, stderr := flowrun(t, "test", dir, "--junit", out)
	if code != exitFailed {
		t.Fatalf("exit %d\nstdout:\n%s\nstderr:\n%s", code, stdout, stderr)
	}
	b, err := os.ReadFile(out)
	if err != nil {
		t.Fatal(err)
	}
	var got struct {
		Tests  int `xml:"tests,attr"`
		Fails  int `xml:"failures,attr"`
		Suites []struct {
			Tests int `xml:"tests,attr"`
			Fails int `xml:"failures,attr"`
			Cases []struct {
				Name    string `xml:"name,attr"`
				Failure *struct {
					Message string `xml:"message,attr"`
				} `xml:"failure"`
			} `xml:"testcase"`
		} `xml:"testsuite"`
	}
	if err := xml.Unmarshal(b, &got); err != nil {
		t.Fatalf("JUnit does not parse: %v\n%s", err, b)
	}
	if got.Tests != 3 || got.Fails != 1 || len(got.Suites) != 1 || got.Suites[0].Tests != 3 || got.Suites[0].Fails != 1 || len(got.Suites[0].Cases) != 3 {
		t.Fatalf("counts: %+v\n%s", got, b)
	}
	for _, c := range got.Suites[0].Cases {
		if (c.Failure != nil) != (c.Name == "wrong expectation") {
			t.Errorf("case %q: failure %+v", c.Name, c.Failure)
		}
		if c.Failure != nil && !strings.Contains(c.Failure.Message, "outputs.verdict") {
			t.Errorf("failure message %q does not say what failed", c.Failure.Message)
		}
	}
}

// TestTestCommandWithoutSandboxSkips: on a machine without the sandbox's
// Python, the shipped tests that need it are skipped with one line each
// naming what to install, with none of the noise that would follow from
// running them; under CI=true they fail instead.
func TestTestCommandWithoutSandboxSkips(t *testing.T) {
	t.Setenv("XDG_CACHE_HOME", t.TempDir())
	t.Setenv("CI", "")
	code, stdout, stderr := flowrun(t, "test", "../../pipelines")
	if code != exitOK || !strings.Contains(stdout, " 0 failed, ") || !strings.Contains(stdout, " skipped (not runnable here), ") {
		t.Fatalf("exit %d\nstdout:\n%s\nstderr:\n%s", code, stdout, stderr)
	}
	for _, line := range strings.Split(strings.TrimSpace(stdout), "\n") {
		if strings.HasPrefix(line, "SKIP ") && !strings.HasSuffix(line, "Python for WASI is not installed (no "+filepath.Join(os.Getenv("XDG_CACHE_HOME"), "flowrun", "python", "3.13.5", "python.wasm")+"): run flowrun sandbox install python") {
			t.Errorf("a skip line that does not name what to install: %q", line)
		}
		if !strings.HasPrefix(line, "SKIP ") && !strings.Contains(line, " cases in ") {
			t.Errorf("noise: %q", line)
		}
	}
	t.Setenv("CI", "true")
	code, stdout, _ = flowrun(t, "test", "../../pipelines")
	if code != exitFailed || strings.Contains(stdout, "SKIP") || !strings.Contains(stdout, "cannot run here (CI=true counts this as a failure): ") {
		t.Fatalf("CI=true: exit %d\nstdout:\n%s", code, stdout)
	}
}
