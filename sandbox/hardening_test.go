package sandbox

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"reflect"
	"runtime/debug"
	"strings"
	"testing"
	"time"

	"github.com/flowrun/flowrun/errclass"
	"github.com/flowrun/flowrun/internal/proc/proctest"
	"github.com/flowrun/flowrun/internal/testwait"
)

// casesFor is the corpus's cases for one issue 10 item.
func casesFor(item int) []hostile {
	var out []hostile
	for _, c := range corpus {
		if c.item == item {
			out = append(out, c)
		}
	}
	return out
}

// assertBuildGone checks that nothing of a Go build under cacheDir is left:
// no process that mentions it (go build, compile, link) and no build
// directory (the go command's own work directory is inside it).
func assertBuildGone(t *testing.T, cacheDir string) {
	t.Helper()
	proctest.WaitGone(t, "processes of the build", func(p proctest.Process) bool { return p.Mentions(cacheDir) })
	if dirs, _ := filepath.Glob(filepath.Join(cacheDir, "go", "build-*")); len(dirs) > 0 {
		t.Fatalf("build directories left: %v", dirs)
	}
}

// TestHardening01GoCompileBounded: compiling model-written Go is bounded by
// the run's timeout (class timeout, the compiler killed with its whole
// process group, its directories removed), by ctx (the caller's error, not
// a compile_error), and by a memory cap.
func TestHardening01GoCompileBounded(t *testing.T) {
	s := New(Options{CacheDir: t.TempDir()})
	defer s.Close()
	t.Run("timeout", func(t *testing.T) {
		for _, c := range casesFor(1) {
			c.run(t, s)
		}
		assertBuildGone(t, s.opts.CacheDir)
	})
	t.Run("cancelled", func(t *testing.T) {
		ctx, cancel := context.WithCancel(context.Background())
		time.AfterFunc(time.Second, cancel)
		start := time.Now()
		res, err := s.Run(ctx, Request{Language: Go, Source: typeBomb(24), Call: "f", Limits: Limits{Timeout: 10 * time.Minute}})
		if !errors.Is(err, context.Canceled) || res != nil {
			t.Fatalf("a compile cut short by its caller must end with the caller's error, got %v %+v", err, res)
		}
		// A cancel that was not heeded would have returned the compile's
		// result above; this bounds how long ending the compiler takes,
		// generously, for a loaded machine.
		if d := time.Since(start); d > 30*time.Second {
			t.Fatalf("Run returned %s after it was cancelled at 1s", d)
		}
		assertBuildGone(t, s.opts.CacheDir)
	})
	t.Run("memory", func(t *testing.T) {
		s.goCache.memory = 64 << 20
		defer func() { s.goCache.memory = goBuildMemory }()
		res, err := s.Run(context.Background(), Request{Language: Go, Source: typeBomb(24), Call: "f", Limits: Limits{Timeout: 10 * time.Minute}})
		if err != nil || res.Error == nil || res.Error.Class != errclass.MemoryLimit {
			t.Fatalf("want memory_limit, got %v %+v", err, res)
		}
		assertBuildGone(t, s.opts.CacheDir)
	})
}

// TestHardening02WorkerExitsWhenItsPipeCloses: a worker whose parent is
// gone (its stdin closes) exits while its guest spins, with no help from
// Pdeathsig or a process group.
func TestHardening02WorkerExitsWhenItsPipeCloses(t *testing.T) {
	s := New(Options{CacheDir: sharedCache(t)})
	defer s.Close()
	j, res, err := s.prepare(context.Background(), Request{Language: Go, Source: goFn("", "for {\n}"), Call: "f", Limits: Limits{}.withDefaults()})
	if err != nil || res != nil {
		t.Fatal(err, res)
	}
	cmd := selfWorker()
	// A -race worker sleeps a second on its way out unless told not to.
	cmd.Env = append(cmd.Env, "GORACE=atexit_sleep_ms=0")
	in, _ := cmd.StdinPipe()
	out, _ := cmd.StdoutPipe()
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	defer cmd.Process.Kill()
	if err := writeJob(in, j); err != nil {
		t.Fatal(err)
	}
	line, err := bufio.NewReader(out).ReadString('\n')
	if err != nil || !strings.Contains(line, `"started":true`) {
		t.Fatalf("%q %v", line, err)
	}
	time.Sleep(200 * time.Millisecond) // the guest is spinning
	in.Close()
	exited := make(chan error, 1)
	go func() { exited <- cmd.Wait() }()
	select {
	case err := <-exited:
		if err != nil {
			t.Fatalf("the worker exited with %v, want 0", err)
		}
	case <-time.After(testwait.Budget()):
		t.Fatalf("the worker is still running %s after its stdin closed", testwait.Budget())
	}
}

// TestHardening09OutputCapAndForgedFrames: output between one and two
// times the cap is output_limit, and code that forges the harness's
// envelope cannot claim a host-decided class or pass more than the cap.
func TestHardening09OutputCapAndForgedFrames(t *testing.T) {
	s := New(Options{CacheDir: sharedCache(t)})
	defer s.Close()
	cases := casesFor(9)
	warm(t, s, cases)
	for _, c := range cases {
		t.Run(c.lang+"/"+c.name, func(t *testing.T) { c.run(t, s) })
	}
}

// TestHardening11LimitsCheckedAtRunTime: limits past what wasm32 addresses
// are an error from Run and from a worker, never a panic or an overflow.
func TestHardening11LimitsCheckedAtRunTime(t *testing.T) {
	s := New(Options{CacheDir: sharedCache(t)})
	defer s.Close()
	for _, l := range []Limits{{MemoryMB: 100000}, {MemoryMB: 268435456}, {MemoryMB: 4097}, {MaxOutputBytes: 1 << 40}} {
		res, err := s.Run(context.Background(), Request{Language: Go, Source: goFn("", "return 1"), Call: "f", Limits: l})
		if err == nil || res != nil {
			t.Errorf("%+v: want an error, got %+v", l, res)
		}
	}
	res, err := s.Run(context.Background(), Request{Language: Go, Source: goFn("", "return 1"), Call: "f", Limits: Limits{MemoryMB: 4096}})
	if err != nil || !res.OK {
		t.Fatalf("4096 MiB is what wasm32 addresses, and allowed: %v %+v", err, res)
	}
	h := &host{}
	defer h.close(context.Background())
	for _, mb := range []int{100000, 268435456, -1} {
		rep, fatal := h.run(context.Background(), &job{Language: Go, MemoryMB: mb, MaxOutput: 1024, CacheDir: sharedCache(t)}, func() {})
		if fatal == nil || rep != nil {
			t.Errorf("a worker given memory_mb %d must refuse the job: %+v", mb, rep)
		}
	}
}

// TestHardening13BigIntSurvives: integers beyond int64 come back exact;
// those that fit are ints and fractions floats, as before.
func TestHardening13BigIntSurvives(t *testing.T) {
	s := New(Options{CacheDir: sharedCache(t)})
	defer s.Close()
	want := []any{json.Number("1267650600228229401496703205376"), json.Number("-9223372036854775809"), 9223372036854775807, 1.5}
	sources := map[string]string{
		Python: pyFn("return [2**100, -2**63 - 1, 2**63 - 1, 1.5]"),
		Go: "package main\n\nimport \"math/big\"\n\nfunc f() any {\n\tbig100 := new(big.Int).Lsh(big.NewInt(1), 100)\n" +
			"\tbelow := new(big.Int).Sub(big.NewInt(-1<<63), big.NewInt(1))\n\treturn []any{big100, below, int64(1<<63 - 1), 1.5}\n}\n",
	}
	for _, lang := range []string{Python, Go} {
		t.Run(lang, func(t *testing.T) {
			if lang == Python {
				needPython(t, s)
			}
			res, err := s.Run(context.Background(), Request{Language: lang, Source: sources[lang], Call: "f"})
			if err != nil || !res.OK {
				t.Fatalf("%v %+v", err, res)
			}
			if !reflect.DeepEqual(res.Result, want) {
				t.Fatalf("result %#v, want %#v", res.Result, want)
			}
		})
	}
}

// TestHardening01NoBuildDirectoryLeftOnError: a compile error also leaves
// no build directory behind.
func TestHardening01NoBuildDirectoryLeftOnError(t *testing.T) {
	dir := t.TempDir()
	s := New(Options{CacheDir: dir})
	defer s.Close()
	res, err := s.Run(context.Background(), Request{Language: Go, Source: goFn("", "return undefinedName"), Call: "f"})
	if err != nil || res.Error == nil || res.Error.Class != errclass.CompileError {
		t.Fatalf("%v %+v", err, res)
	}
	assertBuildGone(t, dir)
	if entries, _ := os.ReadDir(filepath.Join(dir, "go")); len(entries) != 0 {
		t.Fatalf("left in the build cache: %v", entries)
	}
}

// TestHardening02WorkerRefusesABadJob: a job line that is not JSON, or
// that announces an impossible stdin, ends the worker with a fatal "bad
// job" report instead of a read of a negative or 10 TB buffer.
func TestHardening02WorkerRefusesABadJob(t *testing.T) {
	defer debug.SetMemoryLimit(debug.SetMemoryLimit(-1)) // serve sets the worker's
	for _, in := range []string{
		"{not json\n",
		`{"language":"python","stdin_bytes":-1}` + "\n",
		`{"language":"python","stdin_bytes":9999999999999}` + "\nabc",
	} {
		var out bytes.Buffer
		if code := serve(strings.NewReader(in), &out); code != 1 || !strings.Contains(out.String(), `"fatal"`) || !strings.Contains(out.String(), "bad job") {
			t.Errorf("%q: exit %d, said %s", in, code, out.String())
		}
	}
}
