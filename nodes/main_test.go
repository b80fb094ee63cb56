package nodes_test

import (
	"os"
	"testing"

	"github.com/flowrun/flowrun/sandbox"
)

// TestMain lets the test binary serve as the sandbox's worker process.
func TestMain(m *testing.M) {
	sandbox.WorkerMain()
	os.Exit(m.Run())
}
