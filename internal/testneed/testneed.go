// Package testneed is the one rule for tests that need more than Go:
// Python for WASI (with numpy), Chromium or Node.js. Where one is missing
// the test skips, with a message that names what to install and is the
// same for every test that needs it (so that internal/testrun lists each
// group on one line); under CI=true, where .ci/run installs them all, it
// fails instead. .ci/run checks the rule once per run by running the
// packages whose tests run Python code with no Python for WASI visible.
package testneed

import (
	"os"
	"os/exec"
	"testing"
)

// Missing is something outside Go that a test needs, and how to get it.
type Missing struct {
	What, Install string
}

var (
	PythonForWASI = Missing{"Python for WASI", "go run ./cmd/flowrun sandbox install python"}
	Numpy         = Missing{"numpy in the sandbox's Python for WASI", "go run ./cmd/flowrun sandbox install python --force"}
	Chromium      = Missing{"Chromium", "apt-get install chromium"}
	NodeJS        = Missing{"Node.js", "apt-get install nodejs npm"}
)

// Need skips t when problem says that m is missing, or fails it under
// CI=true. A nil problem lets the test go on.
func Need(t testing.TB, m Missing, problem error) {
	t.Helper()
	if problem == nil {
		return
	}
	if os.Getenv("CI") == "true" {
		t.Fatalf("CI runs the tests that need %s: %v", m.What, problem)
	}
	t.Skipf("needs %s, which this machine lacks: %s", m.What, m.Install)
}

// Executable is the path of the first of names found on PATH; without
// one, Need decides for m.
func Executable(t testing.TB, m Missing, names ...string) string {
	t.Helper()
	var err error
	for _, name := range names {
		var path string
		if path, err = exec.LookPath(name); err == nil {
			return path
		}
	}
	Need(t, m, err)
	return ""
}
