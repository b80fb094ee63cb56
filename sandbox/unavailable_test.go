package sandbox

import (
	"context"
	"errors"
	"strings"
	"testing"

	"github.com/flowrun/flowrun/errclass"
)

// TestPythonMissingIsTyped: a missing Python for WASI is an
// *UnavailableError naming python, of class sandbox_unavailable, whether
// Check finds it or a worker process does (the worker sends the error
// itself, not only its text); its message says what is wrong and leaves
// the command to type to the front end.
func TestPythonMissingIsTyped(t *testing.T) {
	dir := t.TempDir()
	s := New(Options{PythonDir: dir, CacheDir: sharedCache(t), Workers: 1})
	defer s.Close()
	j := &job{Language: Python, MemoryMB: 64, MaxOutput: 1024, PythonDir: dir, CacheDir: sharedCache(t)}
	res, fromWorker := s.runOnWorker(context.Background(), j, Limits{}.withDefaults(), 0)
	if res != nil {
		t.Fatalf("the worker ran the job: %+v", res)
	}
	for name, err := range map[string]error{"Check": s.Check(Python), "the worker": fromWorker} {
		var ue *UnavailableError
		if !errors.As(err, &ue) || ue.Missing != Python || errclass.Of(err) != errclass.SandboxUnavailable {
			t.Fatalf("%s: %#v, want an *UnavailableError missing python", name, err)
		}
		if msg := err.Error(); !strings.HasPrefix(msg, "sandbox unavailable: Python for WASI is not installed (") || strings.Contains(msg, "sandbox install") {
			t.Errorf("%s: message %q", name, msg)
		}
	}
}
