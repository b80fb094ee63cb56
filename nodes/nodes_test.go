package nodes_test

import (
	"context"
	"os"
	"path/filepath"
	"testing"

	"github.com/flowrun/flowrun/dsl"
	"github.com/flowrun/flowrun/runtime"
	"github.com/flowrun/flowrun/runtime/runtimetest"
)

// The runtime's own semantics (scheduling, state, loops, maps, limits,
// retries, resume) are tested by the YAML cases in runtime/testdata; the
// tests here are about what each node kind does.

// load compiles a pipeline written inline; extra files (prompts, called
// pipelines) are written beside it.
func load(t testing.TB, src string, extra map[string]string) *dsl.Pipeline {
	t.Helper()
	dir := t.TempDir()
	for name, body := range extra {
		if err := os.WriteFile(filepath.Join(dir, name), []byte(body), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	path := filepath.Join(dir, "p.yaml")
	if err := os.WriteFile(path, []byte(src), 0o644); err != nil {
		t.Fatal(err)
	}
	p, ds := dsl.Load(path)
	if p == nil {
		t.Fatalf("load:\n%s", ds)
	}
	return p
}

func run(t testing.TB, p *dsl.Pipeline, kinds runtime.Registry, inputs map[string]any) (*runtime.Result, *runtimetest.Events) {
	t.Helper()
	rec := &runtimetest.Events{}
	res := runtime.Run(context.Background(), kinds, p, inputs, runtime.Options{Sink: rec})
	return res, rec
}

func mustComplete(t *testing.T, res *runtime.Result) {
	t.Helper()
	if res.Status != runtime.StatusCompleted {
		t.Fatalf("status %s, err %v, reason %q", res.Status, res.Err, res.Reason)
	}
}
