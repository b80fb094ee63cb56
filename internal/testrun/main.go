// Command testrun runs the repository's tests (go test -race -timeout 30m
// ./..., or go test with the arguments given) and prints what go test
// hides when it passes: which tests skipped and why, so that a machine
// without Python for WASI, Chromium or Node.js shows what it did not test
// and what to install. It prints each package's result, the output of
// failed tests, the skips grouped by reason, and a closing "N passed, N
// failed, N skipped" line, and exits as go test did.
package main

import (
	"bufio"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"os/exec"
	"regexp"
	"slices"
	"strings"
)

// event is one line of go test -json (cmd/test2json).
type event struct {
	Action     string
	Package    string
	ImportPath string // build-output, build-fail
	Test       string
	Elapsed    float64
	Output     string
}

// position is the file:line prefix t.Skip and t.Log put before a message.
var position = regexp.MustCompile(`^\s*\w[\w.-]*\.go:\d+: `)

func main() {
	args := os.Args[1:]
	if len(args) == 0 {
		args = []string{"-race", "-timeout", "30m", "./..."}
	}
	cmd := exec.Command("go", append([]string{"test", "-json"}, args...)...)
	cmd.Stderr = os.Stderr
	out, err := cmd.StdoutPipe()
	if err != nil {
		fmt.Fprintln(os.Stderr, "testrun:", err)
		os.Exit(2)
	}
	if err := cmd.Start(); err != nil {
		fmt.Fprintln(os.Stderr, "testrun:", err)
		os.Exit(2)
	}
	s := summarize(out, os.Stdout)
	err = cmd.Wait()
	s.report(os.Stdout)
	code := 0
	if err != nil {
		code = 1
		if ee, ok := err.(*exec.ExitError); ok {
			code = ee.ExitCode()
		}
	}
	if code == 0 && s.failed > 0 {
		code = 1
	}
	os.Exit(code)
}

type summary struct {
	passed, failed int
	skips          map[string][]string // reason -> "package TestName"
	reasons        []string            // in the order first seen
}

// summarize reads go test's events, printing package results and failed
// tests' output to w as they come.
func summarize(r io.Reader, w io.Writer) *summary {
	s := &summary{skips: map[string][]string{}}
	output := map[string][]string{} // package + test -> its output lines
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 1<<20), 64<<20)
	for sc.Scan() {
		var e event
		if json.Unmarshal(sc.Bytes(), &e) != nil {
			fmt.Fprintln(w, sc.Text()) // not an event: go test's own words
			continue
		}
		key := e.Package + " " + e.Test
		switch e.Action {
		case "build-output":
			fmt.Fprint(w, e.Output)
		case "output":
			output[key] = append(output[key], e.Output)
		case "pass":
			if e.Test == "" {
				fmt.Fprintf(w, "ok   %s %.1fs\n", e.Package, e.Elapsed)
			} else {
				s.passed++
			}
			delete(output, key)
		case "fail":
			if e.Test != "" {
				s.failed++
			}
			fmt.Fprint(w, strings.Join(output[key], ""))
			if e.Test == "" {
				fmt.Fprintf(w, "FAIL %s %.1fs\n", e.Package, e.Elapsed)
			}
			delete(output, key)
		case "skip":
			if e.Test == "" {
				delete(output, key) // a package with no tests
				continue
			}
			reason := skipReason(output[key])
			if _, seen := s.skips[reason]; !seen {
				s.reasons = append(s.reasons, reason)
			}
			s.skips[reason] = append(s.skips[reason], strings.TrimPrefix(e.Package, "github.com/flowrun/flowrun/")+" "+e.Test)
			delete(output, key)
		}
	}
	return s
}

// skipReason is the message a skipped test gave: its last line of output
// before the "--- SKIP" line, without the file:line prefix.
func skipReason(lines []string) string {
	for _, l := range slices.Backward(lines) {
		l = strings.TrimSpace(l)
		if l == "" || strings.HasPrefix(l, "--- SKIP") || strings.HasPrefix(l, "=== ") {
			continue
		}
		return position.ReplaceAllString(l, "")
	}
	return "(no reason given)"
}

// report prints the skips, grouped by reason, and the closing counts.
func (s *summary) report(w io.Writer) {
	skipped := 0
	for _, r := range s.reasons {
		tests := s.skips[r]
		skipped += len(tests)
		shown := tests
		if len(shown) > 4 {
			shown = shown[:4]
		}
		more := ""
		if n := len(tests) - len(shown); n > 0 {
			more = fmt.Sprintf(", and %d more", n)
		}
		fmt.Fprintf(w, "skipped %d: %s (%s%s)\n", len(tests), r, strings.Join(shown, ", "), more)
	}
	fmt.Fprintf(w, "%d passed, %d failed, %d skipped\n", s.passed, s.failed, skipped)
}
