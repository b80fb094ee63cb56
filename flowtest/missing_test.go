package flowtest

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"testing"

	"github.com/flowrun/flowrun/sandbox"
)

// TestMissingPythonIsTheSandboxError: a case that needs Python for WASI
// where it is not installed is skipped with the sandbox's own error, so
// that a front end tells what to install from its type.
func TestMissingPythonIsTheSandboxError(t *testing.T) {
	dir := t.TempDir()
	for name, body := range map[string]string{
		"code.yaml": `
version: 1
name: c
nodes:
  - id: run_it
    code: {source: "def f(): return 1", call: f}
outputs: {r: nodes.run_it.result}
`,
		"code.test.yaml": `
cases:
  - name: runs
    expect: {outputs: {r: 1}}
`,
	} {
		if err := os.WriteFile(filepath.Join(dir, name), []byte(body), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	f, ds := Load(filepath.Join(dir, "code.test.yaml"))
	if len(ds) > 0 {
		t.Fatalf("load: %s", ds)
	}
	t.Setenv("XDG_CACHE_HOME", t.TempDir()) // where the sandbox looks for Python
	runner := &Runner{}
	defer runner.Close()
	r := runner.RunAll(context.Background(), []*File{f}, nil, 1)[0]
	var ue *sandbox.UnavailableError
	if !errors.As(r.Missing, &ue) || ue.Missing != sandbox.Python || r.Pass || len(r.Problems) > 0 {
		t.Fatalf("missing %#v, pass %v, problems %q", r.Missing, r.Pass, r.Problems)
	}
}
