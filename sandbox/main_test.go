package sandbox

import (
	"os"
	"testing"
)

// TestMain lets the test binary serve as the sandbox's worker process.
func TestMain(m *testing.M) {
	WorkerMain()
	os.Exit(m.Run())
}
