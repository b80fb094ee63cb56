package sandbox

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strconv"
	"strings"

	"github.com/tetratelabs/wazero"

	"github.com/flowrun/flowrun/dsl"
	"github.com/tetratelabs/wazero/experimental"
	"github.com/tetratelabs/wazero/imports/wasi_snapshot_preview1"
	"github.com/tetratelabs/wazero/sys"
)

// recycleAfter and recycleRSS bound a worker's life: it asks to be replaced
// after this many runs or once its resident memory passes this size.
const (
	recycleAfter = 500
	recycleRSS   = 1 << 30
)

// WorkerMain runs a sandbox worker on stdin and stdout when this process
// was started as one (FLOWRUN_SANDBOX_WORKER=1), and exits; otherwise it
// returns. Call it first thing in main, and in TestMain of tests that run
// code.
func WorkerMain() {
	if os.Getenv(WorkerEnv) != "1" {
		return
	}
	os.Exit(serve(os.Stdin, os.Stdout))
}

// host is a worker's wazero state: one runtime per memory limit, each with
// its compiled modules, all sharing the on-disk compilation cache.
type host struct {
	cache    wazero.CompilationCache
	runtimes map[int]*limitedRuntime
	// closeOnDone makes wazero check the context in the guest's loops. The
	// workers run without it (they are killed at the deadline instead);
	// BenchmarkCancellationDesign measures what it would cost.
	closeOnDone bool
}

type limitedRuntime struct {
	rt      wazero.Runtime
	modules map[string]wazero.CompiledModule // by path
}

func serve(in io.Reader, out io.Writer) int {
	ctx := context.Background()
	h := &host{runtimes: map[int]*limitedRuntime{}}
	defer h.close(ctx)
	r := bufio.NewReaderSize(in, 1<<20)
	enc := json.NewEncoder(out)
	for runs := 1; ; runs++ {
		line, err := r.ReadBytes('\n')
		if err != nil {
			return 0
		}
		var j job
		if err := json.Unmarshal(line, &j); err != nil {
			_ = enc.Encode(workerMessage{Fatal: fmt.Sprintf("bad job: %v", err)})
			return 1
		}
		res, fatal := h.run(ctx, &j, func() { _ = enc.Encode(workerMessage{Started: true}) })
		if fatal != "" {
			_ = enc.Encode(workerMessage{Fatal: fatal})
			return 1
		}
		recycle := runs >= recycleAfter || rss() > recycleRSS
		_ = enc.Encode(workerMessage{Result: res, Recycle: recycle})
		if recycle {
			return 0
		}
	}
}

func (h *host) close(ctx context.Context) {
	for _, lr := range h.runtimes {
		_ = lr.rt.Close(ctx)
	}
}

// runtimeFor returns the runtime for a memory limit.
func (h *host) runtimeFor(ctx context.Context, cacheDir string, memoryMB int) (*limitedRuntime, error) {
	if lr, ok := h.runtimes[memoryMB]; ok {
		return lr, nil
	}
	if h.cache == nil {
		dir := filepath.Join(cacheDir, "wazero")
		c, err := wazero.NewCompilationCacheWithDir(dir)
		if err != nil {
			return nil, fmt.Errorf("compilation cache %s: %w", dir, err)
		}
		h.cache = c
	}
	cfg := wazero.NewRuntimeConfig().
		WithCompilationCache(h.cache).
		WithMemoryLimitPages(uint32(memoryMB) * 16). // 64 KiB pages
		WithCloseOnContextDone(h.closeOnDone)
	rt := wazero.NewRuntimeWithConfig(ctx, cfg)
	wasi_snapshot_preview1.MustInstantiate(ctx, rt)
	lr := &limitedRuntime{rt: rt, modules: map[string]wazero.CompiledModule{}}
	h.runtimes[memoryMB] = lr
	return lr, nil
}

func (lr *limitedRuntime) compile(ctx context.Context, path string) (wazero.CompiledModule, error) {
	if m, ok := lr.modules[path]; ok {
		return m, nil
	}
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	m, err := lr.rt.CompileModule(ctx, b)
	if err != nil {
		return nil, err
	}
	// Go builds are many and small; keep a bounded set.
	if len(lr.modules) > 64 {
		for k, old := range lr.modules {
			_ = old.Close(ctx)
			delete(lr.modules, k)
			break
		}
	}
	lr.modules[path] = m
	return m, nil
}

// run runs one job in a fresh module instance. fatal is set when nothing
// can run in this worker.
func (h *host) run(ctx context.Context, j *job, started func()) (res *Result, fatal string) {
	lr, err := h.runtimeFor(ctx, j.CacheDir, j.MemoryMB)
	if err != nil {
		return nil, err.Error()
	}
	modPath := j.Module
	fsConfig := wazero.NewFSConfig()
	args := []string{"guest"}
	if j.Language == Python {
		wasm, stdlib, problem := pythonLayout(j.PythonDir)
		if problem != "" {
			return nil, "Python for WASI is not installed (" + problem + "): run flowrun sandbox install python"
		}
		modPath = wasm
		fsConfig = fsConfig.WithReadOnlyDirMount(stdlib, pythonGuestLib)
		args = pythonArgs
	}
	compiled, err := lr.compile(ctx, modPath)
	if err != nil {
		if j.Language == Wasm {
			return failed(ClassCompileError, "loading module %s: %v", filepath.Base(modPath), err), ""
		}
		return nil, fmt.Sprintf("compiling %s: %v", modPath, err)
	}
	stdout := &cappedBuffer{limit: 2*j.MaxOutput + 4096} // the user's output, then the result envelope
	stderr := &cappedBuffer{limit: j.MaxOutput}
	cfg := wazero.NewModuleConfig().
		WithName("").
		WithArgs(args...).
		WithStdin(strings.NewReader(string(j.Stdin))).
		WithStdout(stdout).
		WithStderr(stderr).
		WithFSConfig(fsConfig).
		WithStartFunctions("_start")
	// No WithEnv, WithSysWalltime, WithSysNanotime or WithRandSource: the
	// guest gets no environment, a fixed clock and a fixed random source.
	started()
	runErr := instantiate(experimental.WithMemoryAllocator(ctx, mmapAllocator{}), lr.rt, compiled, cfg)
	return outcome(j, runErr, stdout, stderr), ""
}

// instantiate runs the module's start function, turning a panic from a
// capped writer into an error.
func instantiate(ctx context.Context, rt wazero.Runtime, compiled wazero.CompiledModule, cfg wazero.ModuleConfig) (err error) {
	defer func() {
		if r := recover(); r != nil {
			if e, ok := r.(error); ok && errors.Is(e, errOutputLimit) {
				err = errOutputLimit
				return
			}
			err = fmt.Errorf("%v", r)
		}
	}()
	mod, err := rt.InstantiateModule(ctx, compiled, cfg)
	if mod != nil {
		_ = mod.Close(ctx)
	}
	return err
}

// outcome reads what a run produced.
func outcome(j *job, runErr error, stdout, stderr *cappedBuffer) *Result {
	out := stdout.buf.String()
	res := &Result{Stderr: stderr.buf.String()}
	if stdout.flooded || stderr.flooded || errors.Is(runErr, errOutputLimit) {
		res.Stdout = out
		if i := strings.Index(out, envelopeMarker(j.Nonce)); i >= 0 {
			res.Stdout = out[:i]
		}
		if len(res.Stdout) > j.MaxOutput {
			res.Stdout = res.Stdout[:j.MaxOutput]
		}
		res.Error = &Error{Class: ClassOutputLimit, Message: fmt.Sprintf("the code wrote more than %d bytes to stdout or stderr and was stopped", j.MaxOutput)}
		return res
	}
	var exit *sys.ExitError
	if runErr != nil && !(errors.As(runErr, &exit) && exit.ExitCode() == 0) {
		res.Stdout = out
		if errors.As(runErr, &exit) {
			// A harness always exits 0; anything else is the guest's own
			// exit, or a Go runtime's fatal error.
			res.Error = exitError(int(exit.ExitCode()), res.Stderr)
		} else {
			res.Error = trapError(runErr)
		}
		return res
	}
	if j.Language == Wasm {
		return wasmResult(j, out, res)
	}
	marker := envelopeMarker(j.Nonce)
	i := strings.LastIndex(out, marker)
	if i < 0 {
		res.Stdout = out
		res.Error = &Error{Class: ClassRuntimeError, Message: "the code ended the program before it finished (sys.exit or os._exit?)"}
		return res
	}
	res.Stdout = out[:i]
	var env struct {
		Result json.RawMessage `json:"result"`
		Error  *Error          `json:"error"`
	}
	if err := json.Unmarshal([]byte(out[i+len(marker):]), &env); err != nil {
		res.Error = &Error{Class: ClassRuntimeError, Message: "the sandbox harness's result was cut short"}
		return res
	}
	if env.Error != nil {
		res.Error = env.Error
		return res
	}
	res.OK = true
	if len(env.Result) > 0 {
		v, err := decodeJSON(env.Result)
		if err != nil {
			return &Result{Stdout: res.Stdout, Stderr: res.Stderr, Error: &Error{Class: ClassBadResult, Message: err.Error()}}
		}
		res.Result = v
	}
	return res
}

// envelopeMarker starts the harness's report on stdout; the nonce keeps
// the code's own output from being taken for it by accident.
func envelopeMarker(nonce string) string { return "\n\x1eflowrun-result-" + nonce + "\n" }

// exitError describes a guest that exited with a non-zero status.
func exitError(code int, stderr string) *Error {
	switch {
	case strings.Contains(stderr, "fatal error: out of memory"):
		return &Error{Class: ClassMemoryLimit, Message: "the code ran out of memory"}
	case strings.Contains(stderr, "goroutine stack exceeds"):
		return &Error{Class: ClassRuntimeError, Message: "the code recursed too deeply (stack overflow)"}
	case strings.Contains(stderr, "fatal error: "):
		i := strings.Index(stderr, "fatal error: ")
		return &Error{Class: ClassRuntimeError, Message: firstLine(stderr[i:])}
	}
	return &Error{Class: ClassRuntimeError, Message: fmt.Sprintf("the code exited with status %d", code)}
}

func firstLine(s string) string {
	if i := strings.IndexByte(s, '\n'); i >= 0 {
		return s[:i]
	}
	return s
}

// trapError describes a guest that trapped (stack overflow, memory
// exhausted, unreachable).
func trapError(err error) *Error {
	msg := err.Error()
	switch {
	case strings.Contains(msg, "out of memory"), strings.Contains(msg, "memory limit"):
		return &Error{Class: ClassMemoryLimit, Message: "the code ran out of memory: " + msg}
	case strings.Contains(msg, "stack overflow"), strings.Contains(msg, "call stack exhausted"):
		return &Error{Class: ClassRuntimeError, Message: "the code recursed too deeply (stack overflow)"}
	}
	return &Error{Class: ClassRuntimeError, Message: "the code crashed: " + msg}
}

// wasmResult reads a user module's result: its whole stdout, as JSON.
func wasmResult(j *job, out string, res *Result) *Result {
	if strings.TrimSpace(out) == "" {
		res.OK = true
		return res
	}
	v, err := decodeJSON([]byte(out))
	if err != nil {
		res.Stdout = out
		res.Error = &Error{Class: ClassBadResult, Message: "a wasm module's stdout is its result and must be JSON: " + err.Error()}
		return res
	}
	res.OK, res.Result = true, v
	return res
}

func decodeJSON(b []byte) (any, error) {
	v, err := dsl.FromJSON(b)
	if err != nil {
		return nil, fmt.Errorf("the result is not JSON: %v", err)
	}
	return v, nil
}

// rss is this process's resident memory in bytes.
func rss() int64 {
	b, err := os.ReadFile("/proc/self/statm")
	if err != nil {
		return 0
	}
	f := strings.Fields(string(b))
	if len(f) < 2 {
		return 0
	}
	pages, _ := strconv.ParseInt(f[1], 10, 64)
	return pages * int64(os.Getpagesize())
}
