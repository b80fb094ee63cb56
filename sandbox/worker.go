package sandbox

import (
	"bufio"
	"bytes"
	"context"
	"crypto/rand"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"runtime/debug"
	"strconv"
	"strings"
	"sync"

	"github.com/tetratelabs/wazero"
	"github.com/tetratelabs/wazero/api"
	"github.com/tetratelabs/wazero/experimental"
	"github.com/tetratelabs/wazero/imports/wasi_snapshot_preview1"
	"github.com/tetratelabs/wazero/sys"

	"github.com/flowrun/flowrun/errclass"
	"github.com/flowrun/flowrun/internal/proc"
	"github.com/flowrun/flowrun/sandbox/bounds"
)

// recycleAfter and recycleRSS bound a worker's life: it asks to be replaced
// after this many runs or once its resident memory passes this size, and
// after recycleBlind runs where its resident memory cannot be read. A
// replacement costs a cold start (reading the image, loading the compiled
// module: a quarter of a second or more), which at 500 runs was a fifth
// of a scoring map's time on 2 cores.
const (
	recycleAfter = 10_000
	recycleBlind = 500
	recycleRSS   = 1 << 30
)

// WorkerMain runs a sandbox worker on stdin and stdout when this process
// was started as one (FLOWRUN_SANDBOX_WORKER=1), or the reaper that kills
// flowrun's child processes when flowrun dies (see internal/proc), and
// exits; otherwise it returns. Call it first thing in main, and in TestMain
// of tests that run code.
func WorkerMain() {
	proc.Main()
	if os.Getenv(WorkerEnv) != "1" {
		return
	}
	os.Exit(serve(jobInput(), os.Stdout))
}

// host is a worker's wazero state: one runtime and its compiled modules,
// sharing the on-disk compilation cache. The runtime allows what wasm32
// addresses; each run's guestMemory enforces the run's own limit.
type host struct {
	cache   wazero.CompilationCache
	rt      wazero.Runtime
	modules map[string]wazero.CompiledModule // by path
	images  map[string]imageResult           // by Python directory
	// closeOnDone makes wazero check the context in the guest's loops. The
	// workers run without it (they are killed at the deadline instead);
	// BenchmarkCancellationDesign measures what it would cost.
	closeOnDone bool
	// ready is a Python instance for the next call, made from the image
	// or kept from the last call, while the worker waited for it; spent is
	// the last call's instance, closed or kept after its report went out
	// (see prepareNext).
	ready, spent *instance
	// wasiChanged says the current call changed its instance's WASI state
	// (wasiWatch); reused counts the calls served by a kept instance.
	wasiChanged bool
	reused      int
}

func serve(in io.Reader, out io.Writer) int {
	ctx := context.Background()
	debug.SetMemoryLimit(recycleRSS)
	h := &host{}
	defer h.close(ctx)
	jobs := make(chan jobRead)
	go readJobs(in, jobs)
	enc := json.NewEncoder(out)
	for runs := 1; ; runs++ {
		next := <-jobs
		if next.err != nil {
			_ = enc.Encode(workerMessage{Fatal: &UnavailableError{Reason: fmt.Sprintf("bad job: %v", next.err)}})
			return 1
		}
		j := next.job
		rep, fatal := h.run(ctx, j, func() { _ = enc.Encode(workerMessage{Started: true}) })
		if fatal != nil {
			_ = enc.Encode(workerMessage{Fatal: fatal})
			return 1
		}
		size := rss()
		recycle := runs >= recycleAfter || size > recycleRSS || size == 0 && runs >= recycleBlind
		_ = enc.Encode(workerMessage{Report: rep, Recycle: recycle})
		if recycle {
			return 0
		}
		h.prepareNext(ctx, j)
	}
}

// readJobs passes on the parent's jobs. The pipe closing means the parent
// is gone (or wants this worker gone), so the worker exits at once, even
// while a guest spins: on systems without a parent-death signal this is
// what keeps a worker from outliving flowrun.
func readJobs(in io.Reader, jobs chan<- jobRead) {
	r := bufio.NewReaderSize(in, 1<<20)
	for {
		line, err := r.ReadBytes('\n')
		if err != nil {
			os.Exit(0)
		}
		j := new(job)
		// A bad job ends the worker (serve reports it): nothing more is read.
		if err := json.Unmarshal(line, j); err != nil {
			jobs <- jobRead{err: err}
			return
		}
		if j.StdinBytes < 0 || j.StdinBytes > bounds.MaxMemoryMB<<20 {
			jobs <- jobRead{err: fmt.Errorf("stdin of %d bytes", j.StdinBytes)}
			return
		}
		j.Stdin = make([]byte, j.StdinBytes)
		if _, err := io.ReadFull(r, j.Stdin); err != nil {
			os.Exit(0)
		}
		jobs <- jobRead{job: j}
	}
}

// jobRead is a job as readJobs read it, or why it could not.
type jobRead struct {
	job *job
	err error
}

func (h *host) close(ctx context.Context) {
	h.spent.close(ctx)
	h.ready.close(ctx)
	if h.rt != nil {
		_ = h.rt.Close(ctx)
	}
}

func (h *host) runtime(ctx context.Context, cacheDir string) error {
	if h.rt != nil {
		return nil
	}
	dir := filepath.Join(cacheDir, "wazero")
	c, err := wazero.NewCompilationCacheWithDir(dir)
	if err != nil {
		return fmt.Errorf("compilation cache %s: %w", dir, err)
	}
	cfg := wazero.NewRuntimeConfig().WithCompilationCache(c).WithCloseOnContextDone(h.closeOnDone)
	h.cache, h.rt, h.modules = c, wazero.NewRuntimeWithConfig(ctx, cfg), map[string]wazero.CompiledModule{}
	wasi_snapshot_preview1.MustInstantiate(experimental.WithFunctionListenerFactory(ctx, wasiWatch{&h.wasiChanged}), h.rt)
	return nil
}

func (h *host) compile(ctx context.Context, path string) (wazero.CompiledModule, error) {
	if m, ok := h.modules[path]; ok {
		return m, nil
	}
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	m, err := h.rt.CompileModule(ctx, b)
	if err != nil {
		return nil, err
	}
	// Go builds are many and small; keep a bounded set.
	if len(h.modules) > 64 {
		for k, old := range h.modules {
			_ = old.Close(ctx)
			delete(h.modules, k)
			break
		}
	}
	h.modules[path] = m
	return m, nil
}

// run runs one job in a fresh module instance. fatal is set when nothing
// can run in this worker.
func (h *host) run(ctx context.Context, j *job, started func()) (rep *report, fatal *UnavailableError) {
	h.spent.close(ctx)
	h.spent = nil
	coldStart := ""
	defer func() {
		if rep != nil {
			rep.ColdStart = coldStart
		}
	}()
	if j.MemoryMB < 1 || j.MemoryMB > bounds.MaxMemoryMB || j.MaxOutput < 1 || j.MaxOutput > bounds.MaxOutputBytes {
		return nil, &UnavailableError{Reason: fmt.Sprintf("bad job: memory limit %d MiB, output limit %d bytes", j.MemoryMB, j.MaxOutput)}
	}
	if err := h.runtime(ctx, j.CacheDir); err != nil {
		return nil, &UnavailableError{Reason: err.Error()}
	}
	cfg := wazero.NewModuleConfig().WithName("").WithArgs("guest")
	modPath := j.Module
	if j.Language == Python {
		wasm, stdlib, problem := pythonLayout(j.PythonDir)
		if problem != "" {
			return nil, pythonMissing(problem)
		}
		modPath, cfg = wasm, pythonModuleConfig(stdlib)
		// An image that cannot be made leaves the cold start: slower, and
		// the same to the code. The report says why, for the parent to tell.
		img, err := h.pythonImage(ctx, j.PythonDir, j.CacheDir)
		if img != nil {
			return h.runFromImage(ctx, j, img, started), nil
		} else if err != nil {
			coldStart = err.Error()
		}
	}
	compiled, err := h.compile(ctx, modPath)
	if err != nil {
		if j.Language == Wasm {
			return &report{Error: &Error{Class: errclass.CompileError, Message: fmt.Sprintf("loading module %s: %v", filepath.Base(modPath), err)}}, nil
		}
		return nil, &UnavailableError{Reason: fmt.Sprintf("compiling %s: %v", modPath, err)}
	}
	inst := newInstance(j, &guestMemory{limit: uint64(j.MemoryMB) << 20})
	defer debug.SetGCPercent(debug.SetGCPercent(-1))
	started()
	runErr := inst.start(ctx, h.rt, compiled, inst.config(cfg).WithStartFunctions("_start"))
	inst.close(ctx)
	return inst.outcome(j, runErr), nil
}

// runFromImage runs a Python job in an instance that starts from the
// image: the one made or kept while the worker waited for this job when
// it fits (the same installation and memory limit), or a new one. Each is
// as the image left it: one made has run nothing, one kept was proven
// back to the image and its memory reset (reuse.go).
func (h *host) runFromImage(ctx context.Context, j *job, img *pythonImage, started func()) *report {
	inst := h.ready
	h.ready = nil
	if inst != nil && inst.warm != j.warmth() {
		inst.close(ctx)
		inst = nil
	}
	var runErr error
	if inst != nil {
		inst.bind(j)
		defer debug.SetGCPercent(debug.SetGCPercent(-1))
		if !j.Clocked {
			started()
		}
		if inst.reuses > 0 {
			h.reused++
		}
	} else {
		inst = newInstance(j, &guestMemory{limit: uint64(j.MemoryMB) << 20, image: img})
		defer debug.SetGCPercent(debug.SetGCPercent(-1))
		started()
		runErr = inst.start(ctx, h.rt, img.module, imageConfig(inst, j.PythonDir))
	}
	if runErr == nil {
		h.wasiChanged = false
		inst.clock.reset()
		runErr = inst.call(ctx)
	}
	inst.kept = h.keep(inst, img, runErr)
	// Closing or resetting the call's memory waits until the report is out.
	h.spent = inst
	rep := inst.outcome(j, runErr)
	rep.NoReuse = img.noReuse
	return rep
}

// imageConfig is the configuration of an instance that starts from the
// image: no start function, as the image is the start-up's result.
func imageConfig(inst *instance, pythonDir string) wazero.ModuleConfig {
	_, stdlib, _ := pythonLayout(pythonDir)
	return inst.config(pythonModuleConfig(stdlib)).WithStartFunctions()
}

// prepareNext readies the next call's instance after a Python call that
// started from the image, while the parent reads the report and sends the
// next job: the call's own, when it is back to the image, with its memory
// reset; else a new one, made from the image, and the call's is closed.
// Making an instance (mostly filling CPython's table of 10,797 functions)
// is about half of a trivial call's time in the worker.
func (h *host) prepareNext(ctx context.Context, last *job) {
	spent := h.spent
	h.spent = nil
	if spent != nil && spent.kept == nil && h.ready == nil {
		if err := spent.mem.resetToImage(); err == nil {
			spent.reuses++
			h.ready = spent
			return
		}
	}
	spent.close(ctx)
	img := h.images[last.PythonDir].image
	if last.Language != Python || img == nil || h.ready != nil {
		return
	}
	inst := newInstance(&job{MemoryMB: last.MemoryMB, PythonDir: last.PythonDir}, &guestMemory{limit: uint64(last.MemoryMB) << 20, image: img})
	if err := inst.start(ctx, h.rt, img.module, imageConfig(inst, last.PythonDir)); err != nil {
		// The next call makes its own, and reports what fails.
		inst.close(ctx)
		return
	}
	h.ready = inst
}

// instance is one module instance and what it reads and writes. An
// instance made ahead of its job is bound to it later (bind): wazero fixes
// an instance's stdio when it is made.
type instance struct {
	warm  warmth // of the jobs it can serve
	mem   *guestMemory
	mod   api.Module
	entry api.Function // flowrun_call, looked up once
	clock *callClock
	// reuses counts the calls this instance served after its first; kept
	// is why it may not serve another (nil when it may).
	reuses int
	kept   error
	stdin  *bytes.Reader
	stdout *cappedBuffer // the user's output, then the result envelope
	stderr *cappedBuffer
}

func newInstance(j *job, mem *guestMemory) *instance {
	inst := &instance{warm: j.warmth(), mem: mem, clock: &callClock{},
		stdin: bytes.NewReader(nil), stdout: &cappedBuffer{}, stderr: &cappedBuffer{}}
	inst.clock.reset()
	inst.bind(j)
	return inst
}

// bind gives the instance its job's input, empty outputs and their caps.
// The outputs are new buffers: a report may still hold the last ones.
func (inst *instance) bind(j *job) {
	inst.stdin.Reset(j.Stdin)
	*inst.stdout = cappedBuffer{limit: 2*j.MaxOutput + 4096}
	*inst.stderr = cappedBuffer{limit: j.MaxOutput}
}

// config is cfg with the instance's stdio and clocks. Every call draws
// from the host's CSPRNG: no two calls hand out the same secret
// (os.urandom, secrets, uuid4, crypto/rand). What must stay the same for
// replays is fixed elsewhere (docs/sandbox.md, "Randomness").
func (inst *instance) config(cfg wazero.ModuleConfig) wazero.ModuleConfig {
	return cfg.WithStdin(inst.stdin).WithStdout(inst.stdout).WithStderr(inst.stderr).WithRandSource(rand.Reader).
		WithWalltime(inst.clock.walltime, walltimeResolution).WithNanotime(inst.clock.nanotime, nanotimeResolution)
}

// start instantiates the module, running its start functions.
//
// No garbage collection may run while the guest runs (the callers of start
// and call turn it off, but for an instance made ahead, which has no start
// function): a collection stops every goroutine, which a guest spinning in
// compiled code never lets it do, and the worker would freeze, unable even
// to exit when its parent goes (see readJobs). serve's memory limit still
// bounds the heap.
func (inst *instance) start(ctx context.Context, rt wazero.Runtime, compiled wazero.CompiledModule, cfg wazero.ModuleConfig) (err error) {
	defer recoverRun(&err)
	inst.mod, err = rt.InstantiateModule(experimental.WithMemoryAllocator(ctx, inst.mem), compiled, cfg)
	return err
}

// call runs the instance's flowrun_call.
func (inst *instance) call(ctx context.Context) (err error) {
	defer recoverRun(&err)
	if inst.entry == nil {
		inst.entry = inst.mod.ExportedFunction("flowrun_call")
	}
	_, err = inst.entry.Call(ctx)
	return err
}

// recoverRun turns a panic from a capped writer (or from wazero, when a
// memory could not be allocated) into the run's error.
func recoverRun(err *error) {
	if r := recover(); r != nil {
		if e, ok := r.(error); ok && errors.Is(e, errOutputLimit) {
			*err = errOutputLimit
			return
		}
		*err = fmt.Errorf("%v", r)
	}
}

func (inst *instance) close(ctx context.Context) {
	if inst != nil && inst.mod != nil {
		_ = inst.mod.Close(ctx)
	}
}

func (inst *instance) outcome(j *job, runErr error) *report {
	return outcome(j, runErr, inst.mem.refused, inst.stdout, inst.stderr)
}

// report is what a worker sends back for a run: what the guest wrote, as
// raw bytes, so that the parent's caps count exactly what the guest wrote,
// the result as the guest's JSON text, and how the run failed.
type report struct {
	Stdout []byte `json:"stdout,omitempty"`
	Stderr []byte `json:"stderr,omitempty"`
	Result []byte `json:"result,omitempty"`
	Error  *Error `json:"error,omitempty"`
	// ColdStart says why a Python call started CPython from scratch
	// although a pre-initialised interpreter is installed; NoReuse why
	// one that started from it could never leave its instance to the next
	// call.
	ColdStart string `json:"cold_start,omitempty"`
	NoReuse   string `json:"no_reuse,omitempty"`
}

// outcome reads what a run produced. outOfMemory says a growth of the
// guest's memory was refused.
func outcome(j *job, runErr error, outOfMemory bool, stdout, stderr *cappedBuffer) *report {
	out := stdout.buf.Bytes()
	rep := &report{Stdout: out, Stderr: stderr.buf.Bytes()}
	marker := []byte(envelopeMarker(j.Nonce))
	if stdout.flooded || stderr.flooded || errors.Is(runErr, errOutputLimit) {
		msg := fmt.Sprintf("the code wrote more than %d bytes to stdout or stderr and was stopped", j.MaxOutput)
		if i := bytes.Index(out, marker); i >= 0 {
			rep.Stdout = out[:i]
			if !stderr.flooded {
				msg = fmt.Sprintf("the result is more than %d bytes and was cut off", j.MaxOutput)
			}
		}
		rep.Error = &Error{Class: errclass.OutputLimit, Message: msg}
		return rep
	}
	var exit *sys.ExitError
	if runErr != nil && !(errors.As(runErr, &exit) && exit.ExitCode() == 0) {
		switch {
		case outOfMemory:
			rep.Error = &Error{Class: errclass.MemoryLimit, Message: fmt.Sprintf("the code ran out of memory (its limit is %d MiB)", j.MemoryMB)}
		case errors.As(runErr, &exit):
			// A harness always exits 0; anything else is the guest's own
			// exit, or a Go runtime's fatal error.
			rep.Error = exitError(int(exit.ExitCode()), rep.Stderr)
		default:
			rep.Error = trapError(runErr)
		}
		return rep
	}
	if j.Language == Wasm {
		return wasmResult(rep)
	}
	i := bytes.LastIndex(out, marker)
	if i < 0 {
		rep.Error = &Error{Class: errclass.RuntimeError, Message: "the code ended the program before it finished (sys.exit or os._exit?)"}
		return rep
	}
	rep.Stdout = out[:i]
	var env struct {
		Result json.RawMessage `json:"result"`
		Error  *Error          `json:"error"`
	}
	if err := json.Unmarshal(out[i+len(marker):], &env); err != nil {
		rep.Error = &Error{Class: errclass.RuntimeError, Message: "the sandbox harness's result was cut short"}
		return rep
	}
	if env.Error != nil {
		rep.Error = claimed(env.Error, outOfMemory)
		return rep
	}
	rep.Result = env.Result
	return rep
}

// envelopeMarker starts the harness's report on stdout; the nonce keeps
// the code's own output from being taken for it by accident. It is no
// secret from the code, which can read it from its own memory, so nothing
// the envelope says is trusted beyond what the code may choose anyway.
func envelopeMarker(nonce string) string { return "\n\x1eflowrun-result-" + nonce + "\n" }

// claimed is the error a run's envelope reports. The code may choose its
// result and fail on its own terms (compile_error, runtime_error,
// bad_result), but the limits are the host's to report: memory_limit only
// when this worker refused a growth, never timeout, output_limit or
// sandbox_unavailable, which code that forges the envelope could claim.
func claimed(e *Error, outOfMemory bool) *Error {
	switch e.Class {
	case errclass.CompileError, errclass.RuntimeError, errclass.BadResult:
		return e
	case errclass.MemoryLimit:
		if outOfMemory {
			return e
		}
		return &Error{Class: errclass.RuntimeError, Line: e.Line, Message: e.Message + " (the run was below its memory limit)"}
	}
	return &Error{Class: errclass.RuntimeError, Line: e.Line, Message: fmt.Sprintf("the code reported the error class %q, which only the sandbox decides: %s", e.Class, e.Message)}
}

// exitError describes a guest that exited with a non-zero status.
func exitError(code int, stderr []byte) *Error {
	s := string(stderr)
	switch {
	case strings.Contains(s, "goroutine stack exceeds"):
		return &Error{Class: errclass.RuntimeError, Message: "the code recursed too deeply (stack overflow)"}
	case strings.Contains(s, "fatal error: "):
		i := strings.Index(s, "fatal error: ")
		return &Error{Class: errclass.RuntimeError, Message: firstLine(s[i:])}
	}
	return &Error{Class: errclass.RuntimeError, Message: fmt.Sprintf("the code exited with status %d", code)}
}

func firstLine(s string) string {
	if i := strings.IndexByte(s, '\n'); i >= 0 {
		return s[:i]
	}
	return s
}

// trapError describes a guest that trapped (stack overflow, unreachable).
func trapError(err error) *Error {
	msg := err.Error()
	if strings.Contains(msg, "stack overflow") || strings.Contains(msg, "call stack exhausted") {
		return &Error{Class: errclass.RuntimeError, Message: "the code recursed too deeply (stack overflow)"}
	}
	return &Error{Class: errclass.RuntimeError, Message: "the code crashed: " + msg}
}

// wasmResult reads a user module's result: its whole stdout, as JSON.
func wasmResult(rep *report) *report {
	out := rep.Stdout
	rep.Stdout = nil
	if len(bytes.TrimSpace(out)) == 0 {
		return rep
	}
	var v json.RawMessage
	if err := json.Unmarshal(out, &v); err != nil {
		rep.Stdout = out
		rep.Error = &Error{Class: errclass.BadResult, Message: "a wasm module's stdout is its result and must be JSON: " + err.Error()}
		return rep
	}
	rep.Result = out
	return rep
}

// statm is /proc/self/statm, kept open: a worker reads it after every
// call, and one pread costs less than the six system calls of opening
// and reading it anew.
var statm struct {
	once sync.Once
	f    *os.File
}

// rss is this process's resident memory in bytes.
func rss() int64 {
	statm.once.Do(func() { statm.f, _ = os.Open("/proc/self/statm") })
	if statm.f == nil {
		return 0
	}
	var b [256]byte
	n, _ := statm.f.ReadAt(b[:], 0)
	f := strings.Fields(string(b[:n]))
	if len(f) < 2 {
		return 0
	}
	pages, _ := strconv.ParseInt(f[1], 10, 64)
	return pages * int64(os.Getpagesize())
}
