package batch

import (
	"os"
	"testing"

	"github.com/flowrun/flowrun/sandbox"
)

// TestMain lets the test binary serve as the sandbox's worker process:
// a batch of a shipped pipeline runs its code in the real sandbox, which
// starts this binary as its worker.
func TestMain(m *testing.M) {
	sandbox.WorkerMain()
	os.Exit(m.Run())
}
