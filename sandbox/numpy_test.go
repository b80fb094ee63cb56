package sandbox

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/flowrun/flowrun/internal/testneed"
)

// needNumpy lets a numpy test go on only where s's Python has numpy.
func needNumpy(t *testing.T, s *Sandbox) {
	t.Helper()
	needNumpyAt(t, s.opts.PythonDir)
}

// needNumpyAt lets a test go on only where the Python for WASI in dir
// has numpy, as testneed decides.
func needNumpyAt(t *testing.T, dir string) {
	t.Helper()
	needPythonAt(t, dir)
	var problem error
	if info := PythonStatusAt(dir); !info.HasPackage("numpy") {
		problem = fmt.Errorf("%s has no numpy (%s)", info.Dir, info.Outdated)
	}
	testneed.Need(t, testneed.Numpy, problem)
}

func runPython(t *testing.T, s *Sandbox, src string, limits Limits) *Result {
	t.Helper()
	res, err := s.Run(context.Background(), Request{Language: Python, Source: src, Call: "f", Limits: limits})
	if err != nil {
		t.Fatalf("the sandbox failed instead of the code: %v", err)
	}
	return res
}

func TestNumpyImports(t *testing.T) {
	s := New(Options{CacheDir: sharedCache(t)})
	defer s.Close()
	needNumpy(t, s)
	// wasm32 is a 32-bit platform: numpy's default integer (intp) and C
	// long are 32 bits, as docs/sandbox.md says.
	res := runPython(t, s, pyFn("import numpy as np, numpy.testing\nreturn [np.__version__, np.rot90(np.arange(4).reshape(2, 2)).tolist(), np.linalg.det(np.eye(2)), np.fft.rfft([1, 0, 0, 0]).real.tolist(), str(np.array([1]).dtype), str(np.array([2**31 - 1], dtype=np.int32).sum() + 0)]"), Limits{})
	if !res.OK {
		t.Fatalf("import numpy: %+v", res.Error)
	}
	want := []any{"2.2.4", []any{[]any{1.0, 3.0}, []any{0.0, 2.0}}, 1.0, []any{1.0, 1.0, 1.0}, "int32", "2147483647"}
	if got := asJSON(t, res.Result); !reflect.DeepEqual(got, want) {
		t.Errorf("got %v, want %v", got, want)
	}
}

// TestNumpyARCOperations compares the sandbox's numpy with the expected
// values in testdata/numpy_arc.golden.json, which a native numpy wrote
// (bookworm's python3-numpy 1.24). Where /usr/bin/python3 has numpy, the
// golden file is checked against it too, so it cannot drift from numpy.
func TestNumpyARCOperations(t *testing.T) {
	src, err := os.ReadFile("testdata/numpy_arc.py")
	if err != nil {
		t.Fatal(err)
	}
	golden, err := os.ReadFile("testdata/numpy_arc.golden.json")
	if err != nil {
		t.Fatal(err)
	}
	var want map[string]any
	if err := json.Unmarshal(golden, &want); err != nil {
		t.Fatal(err)
	}
	t.Run("native", func(t *testing.T) {
		cmd := exec.Command("/usr/bin/python3", "-c", "import runpy, json, sys; print(json.dumps(runpy.run_path(sys.argv[1])['f']()))", "testdata/numpy_arc.py")
		var stderr bytes.Buffer
		cmd.Stderr = &stderr
		out, err := cmd.Output()
		if err != nil {
			t.Skipf("no native numpy to check the golden file with: %v %s", err, stderr.String())
		}
		var got map[string]any
		if err := json.Unmarshal(out, &got); err != nil {
			t.Fatal(err)
		}
		compareOps(t, got, want)
	})
	s := New(Options{CacheDir: sharedCache(t)})
	defer s.Close()
	needNumpy(t, s)
	res := runPython(t, s, string(src), Limits{})
	if !res.OK {
		t.Fatalf("%+v", res.Error)
	}
	got, ok := res.Result.(map[string]any)
	if !ok {
		t.Fatalf("result %T", res.Result)
	}
	compareOps(t, got, want)
}

func compareOps(t *testing.T, got, want map[string]any) {
	t.Helper()
	for k, w := range want {
		if g, ok := got[k]; !ok || !reflect.DeepEqual(asJSON(t, g), w) {
			t.Errorf("%s: got %v, want %v", k, g, w)
		}
	}
	if len(got) != len(want) {
		t.Errorf("%d results, want %d", len(got), len(want))
	}
}

// TestNumpyRandom: the distributions whose C code numpy.random's legacy
// module (mtrand) compiles a second copy of, with other integer types.
// Statically linked, the two copies' symbols collided and poisson and
// multinomial crashed the guest; build.sh now renames the legacy copy's.
// The legacy stream for a seed is numpy's compatibility promise, so its
// values are fixed; Generator's are checked for shape and range.
func TestNumpyRandom(t *testing.T) {
	s := New(Options{CacheDir: sharedCache(t)})
	defer s.Close()
	needNumpy(t, s)
	res := runPython(t, s, pyFn(`import numpy as np
rng = np.random.default_rng(12345)
p = rng.poisson(3.0, size=1000)
m = rng.multinomial(20, [0.2, 0.3, 0.5], size=4)
b = rng.binomial(10, 0.5, size=100)
h = rng.hypergeometric(10, 5, 6, size=100)
np.random.seed(0)
legacy = [np.random.randint(0, 10, 5).tolist(), np.random.poisson(3.0, 5).tolist(), np.random.binomial(10, 0.5, 5).tolist()]
return {"poisson": [int(p.min()) >= 0, 2.7 < float(p.mean()) < 3.3], "multinomial": m.sum(axis=1).tolist(),
        "binomial": [int(b.min()) >= 0, int(b.max()) <= 10], "hypergeometric": [int(h.min()) >= 1, int(h.max()) <= 6],
        "legacy": legacy}`), Limits{})
	if !res.OK {
		t.Fatalf("%+v", res.Error)
	}
	// numpy 1.24 on the host gives the same legacy values (RandomState's
	// streams are frozen).
	want := map[string]any{
		"poisson":        []any{true, true},
		"multinomial":    []any{20.0, 20.0, 20.0, 20.0},
		"binomial":       []any{true, true},
		"hypergeometric": []any{true, true},
		"legacy":         []any{[]any{5.0, 0.0, 3.0, 3.0, 7.0}, []any{5.0, 4.0, 1.0, 7.0, 3.0}, []any{5.0, 4.0, 6.0, 5.0, 5.0}},
	}
	if got := asJSON(t, res.Result); !reflect.DeepEqual(got, want) {
		t.Errorf("got %v\nwant %v", got, want)
	}
}

// TestNumpyOwnTests runs some of numpy's own test modules in the guest
// with a pytest subset (testdata/numpy_selftest.py). The modules kept are
// those covering what ARC code uses (stacking, padding, set operations,
// tiling, index tricks) and importing only what the sandbox has; most of
// numpy's suite needs hypothesis, its test-only C extensions, threads,
// subprocesses or files (see docs/sandbox.md).
func TestNumpyOwnTests(t *testing.T) {
	src, err := os.ReadFile("testdata/numpy_selftest.py")
	if err != nil {
		t.Fatal(err)
	}
	s := New(Options{CacheDir: sharedCache(t)})
	defer s.Close()
	needNumpy(t, s)
	modules := []string{
		"numpy._core.tests.test_shape_base",
		"numpy.lib.tests.test_arraypad",
		"numpy.lib.tests.test_arraysetops",
		"numpy.lib.tests.test_shape_base",
		"numpy.lib.tests.test_index_tricks",
	}
	res, err := s.Run(context.Background(), Request{Language: Python, Source: string(src), Call: "f", Args: []any{modules},
		Limits: Limits{Timeout: 10 * time.Minute, MemoryMB: 512}})
	if err != nil {
		t.Fatal(err)
	}
	if !res.OK {
		t.Fatalf("%+v", res.Error)
	}
	var report struct {
		Modules  map[string]map[string]int
		Failures []string
	}
	b, _ := json.Marshal(res.Result)
	if err := json.Unmarshal(b, &report); err != nil {
		t.Fatal(err)
	}
	total := 0
	for _, m := range modules {
		c := report.Modules[m]
		t.Logf("%s: %v", m, c)
		if c["passed"] < 20 {
			t.Errorf("%s: only %d tests passed", m, c["passed"])
		}
		total += c["passed"]
		if c["failed"] > 0 {
			t.Errorf("%s: %d failed", m, c["failed"])
		}
	}
	t.Logf("%d passed in %.1f s", total, res.DurationMS/1000)
	if len(report.Failures) > 0 {
		t.Errorf("failures:\n%s", strings.Join(report.Failures, "\n"))
	}
}

// asJSON is v as encoding/json decodes it into an any (numbers float64),
// whatever types the sandbox's result decoding chose.
func asJSON(t *testing.T, v any) any {
	t.Helper()
	b, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	var out any
	if err := json.Unmarshal(b, &out); err != nil {
		t.Fatal(err)
	}
	return out
}
