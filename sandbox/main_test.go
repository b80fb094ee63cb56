package sandbox

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"testing"
)

// TestMain lets the test binary serve as the sandbox's worker process.
func TestMain(m *testing.M) {
	WorkerMain()
	os.Exit(run(m))
}

func run(m *testing.M) int {
	if raceBuilt {
		// Under the race detector wazero compiles python.wasm and each Go
		// build several times slower (the package took 22 minutes in CI),
		// and what the detector would watch there is wazero's compiler.
		// So workers are flowrun built without it: the host side (pool,
		// builds, limits) stays race-checked, and so do the workers that
		// TestPoolStartsAtMostWorkers and TestHardening02 start themselves.
		dir, err := os.MkdirTemp("", "flowrun-worker-")
		if err != nil {
			fmt.Fprintln(os.Stderr, err)
			return 1
		}
		defer os.RemoveAll(dir)
		exe := filepath.Join(dir, "flowrun")
		build := exec.Command("go", "build", "-o", exe, "github.com/flowrun/flowrun/cmd/flowrun")
		if out, err := build.CombinedOutput(); err != nil {
			fmt.Fprintf(os.Stderr, "building a worker without -race: %v\n%s", err, out)
			return 1
		}
		newWorker = func() *exec.Cmd { return workerAt(exe) }
	}
	return m.Run()
}
