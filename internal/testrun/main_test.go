package main

import (
	"strings"
	"testing"
)

// A stream as go test -json writes it: a passing test, two skips for the
// same reason, one for another, and a failure with its output.
const stream = `{"Action":"run","Package":"example/sandbox","Test":"TestA"}
{"Action":"output","Package":"example/sandbox","Test":"TestA","Output":"=== RUN   TestA\n"}
{"Action":"pass","Package":"example/sandbox","Test":"TestA","Elapsed":0.1}
{"Action":"output","Package":"example/sandbox","Test":"TestB","Output":"=== RUN   TestB\n"}
{"Action":"output","Package":"example/sandbox","Test":"TestB","Output":"    corpus_test.go:215: Python for WASI is not installed: run flowrun sandbox install python\n"}
{"Action":"output","Package":"example/sandbox","Test":"TestB","Output":"--- SKIP: TestB (0.00s)\n"}
{"Action":"skip","Package":"example/sandbox","Test":"TestB"}
{"Action":"output","Package":"example/nodes","Test":"TestC/sub","Output":"    code_test.go:27: Python for WASI is not installed: run flowrun sandbox install python\n"}
{"Action":"skip","Package":"example/nodes","Test":"TestC/sub"}
{"Action":"output","Package":"example/web","Test":"TestD","Output":"    browser_test.go:40: no chromium on PATH: apt-get install chromium\n"}
{"Action":"skip","Package":"example/web","Test":"TestD"}
{"Action":"output","Package":"example/web","Test":"TestE","Output":"    web_test.go:9: got 2, want 3\n"}
{"Action":"fail","Package":"example/web","Test":"TestE"}
{"Action":"fail","Package":"example/web","Elapsed":1.5}
{"Action":"pass","Package":"example/sandbox","Elapsed":2}
`

func TestSummaryGroupsSkipsByReason(t *testing.T) {
	var out strings.Builder
	s := summarize(strings.NewReader(stream), &out)
	s.report(&out)
	got := out.String()
	for _, want := range []string{
		"web_test.go:9: got 2, want 3\nFAIL example/web 1.5s\n",
		"ok   example/sandbox 2.0s\n",
		"skipped 2: Python for WASI is not installed: run flowrun sandbox install python (example/sandbox TestB, example/nodes TestC/sub)\n",
		"skipped 1: no chromium on PATH: apt-get install chromium (example/web TestD)\n",
		"\n1 passed, 1 failed, 3 skipped\n",
	} {
		if !strings.Contains(got, want) {
			t.Errorf("missing %q in:\n%s", want, got)
		}
	}
	if strings.Contains(got, "=== RUN") {
		t.Errorf("a passing test's output is go test's to hide:\n%s", got)
	}
}
