package main

import (
	"os"
	"os/exec"
	"testing"
)

// flowrunProcess is the flowrun command as a subprocess (the test binary
// re-executed as the CLI), with env added to the test's environment.
func flowrunProcess(t *testing.T, env []string, args ...string) *exec.Cmd {
	t.Helper()
	cmd := exec.Command(os.Args[0], args...)
	// A -race binary waits a second at exit by default; subprocess tests
	// start many.
	cmd.Env = append(append(os.Environ(), "FLOWRUN_TEST_AS_CLI=1", "GORACE=atexit_sleep_ms=0"), env...)
	return cmd
}
