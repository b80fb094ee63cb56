// Package sandboxtest holds what tests outside package sandbox need of
// it: whether the sandbox's Python for WASI is there to run their code.
package sandboxtest

import (
	"errors"
	"testing"

	"github.com/flowrun/flowrun/internal/testneed"
	"github.com/flowrun/flowrun/sandbox"
)

// NeedPython lets t go on only where Python for WASI is installed (as
// testneed.Need decides).
func NeedPython(t testing.TB) {
	t.Helper()
	var problem error
	if info := sandbox.PythonStatus(); !info.Installed {
		problem = errors.New(info.Problem)
	}
	testneed.Need(t, testneed.PythonForWASI, problem)
}

// NeedNumpy lets t go on only where the installed Python has numpy.
func NeedNumpy(t testing.TB) {
	t.Helper()
	NeedPython(t)
	var problem error
	if info := sandbox.PythonStatus(); !info.HasPackage("numpy") {
		problem = errors.New(info.Dir + " has no numpy (" + info.Outdated + ")")
	}
	testneed.Need(t, testneed.Numpy, problem)
}
