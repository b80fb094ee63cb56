package sandbox

import (
	"bufio"
	"bytes"
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"runtime"
	"sync"
	"time"

	"github.com/flowrun/flowrun/dsl"
)

// Languages.
const (
	Python = "python"
	Go     = "go"
	Wasm   = "wasm"
)

// Error classes of a run.
const (
	ClassCompileError = "compile_error"
	ClassRuntimeError = "runtime_error"
	ClassTimeout      = "timeout"
	ClassMemoryLimit  = "memory_limit"
	ClassOutputLimit  = "output_limit"
	ClassBadResult    = "bad_result"
	ClassUnavailable  = "sandbox_unavailable"
)

// Limits bound one run. Zero values take the defaults.
type Limits struct {
	Timeout        time.Duration // default 10s
	MemoryMB       int           // default 256
	MaxOutputBytes int           // stdout, stderr and the result, each; default 1 MiB
}

func (l Limits) withDefaults() Limits {
	if l.Timeout <= 0 {
		l.Timeout = 10 * time.Second
	}
	if l.MemoryMB <= 0 {
		l.MemoryMB = 256
	}
	if l.MaxOutputBytes <= 0 {
		l.MaxOutputBytes = 1 << 20
	}
	return l
}

// Request is one piece of code to run.
type Request struct {
	Language string
	Source   string // python and go
	Module   string // wasm: path of the module file
	// Call names the function to call with Args; empty runs the code only.
	// Args is a list of positional arguments; any other value is passed as
	// the one argument.
	Call   string
	Args   any
	Limits Limits
}

// Result is what a run did. OK is false when the code failed; Error says how.
type Result struct {
	OK     bool   `json:"ok"`
	Result any    `json:"result"`
	Stdout string `json:"stdout"`
	Stderr string `json:"stderr"`
	Error  *Error `json:"error"`
	// DurationMS is how long the code ran, from its instance starting to
	// its end (compiling it is not counted; see docs/sandbox.md).
	DurationMS float64 `json:"duration_ms"`
}

// Error is a run's failure.
type Error struct {
	Class   string `json:"class"`
	Message string `json:"message"`
	Line    int    `json:"line,omitempty"`
}

func failed(class, format string, args ...any) *Result {
	return &Result{Error: &Error{Class: class, Message: fmt.Sprintf(format, args...)}}
}

// UnavailableError says the sandbox cannot run a language here, and how to fix it.
type UnavailableError struct{ Reason string }

func (e *UnavailableError) Error() string { return "sandbox unavailable: " + e.Reason }

// Class is the runtime error class of an unusable sandbox.
func (e *UnavailableError) Class() string { return ClassUnavailable }

// Options configure a Sandbox.
type Options struct {
	// PythonDir holds python.wasm and lib/python3.13; where
	// `flowrun sandbox install python` puts them by default.
	PythonDir string
	// CacheDir holds compiled modules and Go builds; under the user cache by default.
	CacheDir string
	// Workers is how many worker processes may run at once; NumCPU by default.
	Workers int
	// WorkerCommand starts a worker process; by default this executable
	// with FLOWRUN_SANDBOX_WORKER=1 (see WorkerMain).
	WorkerCommand func() *exec.Cmd
}

// Sandbox runs code in a pool of worker processes. It is safe for
// concurrent use; Close stops every worker.
type Sandbox struct {
	opts    Options
	slots   chan struct{}
	mu      sync.Mutex
	idle    []*worker
	closed  bool
	goCache *goBuilds
}

// New returns a sandbox; workers start on first use.
func New(opts Options) *Sandbox {
	if opts.PythonDir == "" {
		opts.PythonDir = PythonDir()
	}
	if opts.CacheDir == "" {
		opts.CacheDir = defaultCacheDir()
	}
	if opts.Workers <= 0 {
		opts.Workers = max(2, runtime.NumCPU())
	}
	if opts.WorkerCommand == nil {
		opts.WorkerCommand = selfWorker
	}
	return &Sandbox{opts: opts, slots: make(chan struct{}, opts.Workers), goCache: &goBuilds{dir: opts.CacheDir}}
}

// WorkerEnv is set in a worker process's environment.
const WorkerEnv = "FLOWRUN_SANDBOX_WORKER"

func selfWorker() *exec.Cmd {
	exe, err := os.Executable()
	if err != nil {
		exe = os.Args[0]
	}
	cmd := exec.Command(exe)
	// The worker reads nothing of the host's environment but these.
	cmd.Env = []string{WorkerEnv + "=1", "HOME=" + os.Getenv("HOME"), "XDG_CACHE_HOME=" + os.Getenv("XDG_CACHE_HOME")}
	return cmd
}

// Check reports whether a language can run here, before any model call.
func (s *Sandbox) Check(language string) error {
	switch language {
	case Python:
		if _, _, problem := pythonLayout(s.opts.PythonDir); problem != "" {
			return &UnavailableError{Reason: "Python for WASI is not installed (" + problem + "): run flowrun sandbox install python"}
		}
	case Go:
		if _, err := exec.LookPath("go"); err != nil {
			return &UnavailableError{Reason: "the go toolchain is not on PATH; it compiles Go code to WebAssembly"}
		}
	case Wasm:
	default:
		return &UnavailableError{Reason: fmt.Sprintf("unknown language %q (use python, go or wasm)", language)}
	}
	return nil
}

// Run runs one request. The returned error is non-nil only when the
// sandbox itself cannot run (class sandbox_unavailable); everything the
// code does is in the Result.
func (s *Sandbox) Run(ctx context.Context, req Request) (*Result, error) {
	req.Limits = req.Limits.withDefaults()
	if err := s.Check(req.Language); err != nil {
		return nil, err
	}
	job, res := s.prepare(ctx, req)
	if res != nil {
		return res, nil // a compile error: nothing ran
	}
	select {
	case s.slots <- struct{}{}:
	case <-ctx.Done():
		return nil, ctx.Err()
	}
	defer func() { <-s.slots }()
	return s.runOnWorker(ctx, job, req.Limits.Timeout)
}

func msSince(t time.Time) float64 { return float64(time.Since(t).Microseconds()) / 1000 }

// prepare turns a request into a worker job; a Go compile error is the
// result itself.
func (s *Sandbox) prepare(ctx context.Context, req Request) (*job, *Result) {
	nonce := make([]byte, 16)
	_, _ = rand.Read(nonce)
	j := &job{Language: req.Language, MemoryMB: req.Limits.MemoryMB, MaxOutput: req.Limits.MaxOutputBytes,
		Nonce: hex.EncodeToString(nonce), PythonDir: s.opts.PythonDir, CacheDir: s.opts.CacheDir}
	payload := map[string]any{"source": req.Source, "call": req.Call, "args": req.Args, "nonce": j.Nonce, "max_output": req.Limits.MaxOutputBytes}
	switch req.Language {
	case Go:
		path, res := s.goCache.build(ctx, req.Source, req.Call)
		if res != nil {
			return nil, res
		}
		j.Module = path
	case Wasm:
		j.Module = req.Module
		payload = nil
	}
	var err error
	if payload != nil {
		j.Stdin, err = json.Marshal(payload)
	} else {
		j.Stdin, err = json.Marshal(req.Args)
	}
	if err != nil {
		return nil, failed(ClassRuntimeError, "args are not JSON: %v", err)
	}
	return j, nil
}

// job is what a worker runs.
type job struct {
	Language  string `json:"language"`
	Module    string `json:"module,omitempty"`
	Stdin     []byte `json:"stdin"`
	MemoryMB  int    `json:"memory_mb"`
	MaxOutput int    `json:"max_output"`
	Nonce     string `json:"nonce"`
	PythonDir string `json:"python_dir"`
	CacheDir  string `json:"cache_dir"`
}

// worker is one worker process and its pipes.
type worker struct {
	cmd  *exec.Cmd
	in   io.WriteCloser
	out  *bufio.Reader
	runs int
}

// workerMessage is a line a worker writes: "started" when the guest is
// about to run (the deadline counts from there, so compiling the module is
// not charged to the code), then the result.
type workerMessage struct {
	Started bool    `json:"started,omitempty"`
	Result  *Result `json:"result,omitempty"`
	Fatal   string  `json:"fatal,omitempty"` // the worker cannot run anything
	Recycle bool    `json:"recycle,omitempty"`
}

func (s *Sandbox) runOnWorker(ctx context.Context, j *job, timeout time.Duration) (*Result, error) {
	w, err := s.take()
	if err != nil {
		return nil, &UnavailableError{Reason: fmt.Sprintf("starting a sandbox worker: %v", err)}
	}
	b, _ := json.Marshal(j)
	if _, err := w.in.Write(append(b, '\n')); err != nil {
		w.kill()
		return nil, &UnavailableError{Reason: fmt.Sprintf("sandbox worker: %v", err)}
	}
	lines := make(chan workerMessage, 2)
	readErr := make(chan error, 1)
	go func() {
		for {
			line, err := w.out.ReadBytes('\n')
			if err != nil {
				readErr <- err
				return
			}
			var m workerMessage
			d := json.NewDecoder(bytes.NewReader(line))
			d.UseNumber() // integral results stay ints, as in the guest
			if err := d.Decode(&m); err != nil {
				readErr <- fmt.Errorf("bad message from worker: %q", line)
				return
			}
			if m.Result != nil {
				m.Result.Result = dsl.NormalizeNumbers(m.Result.Result)
			}
			lines <- m
			if m.Result != nil || m.Fatal != "" {
				return
			}
		}
	}()
	var deadline <-chan time.Time
	var started time.Time
	for {
		select {
		case m := <-lines:
			switch {
			case m.Started:
				started = time.Now()
				t := time.NewTimer(timeout)
				defer t.Stop()
				deadline = t.C
			case m.Fatal != "":
				w.kill()
				return nil, &UnavailableError{Reason: m.Fatal}
			default:
				w.runs++
				if m.Recycle {
					w.kill()
				} else {
					s.put(w)
				}
				m.Result.DurationMS = msSince(started)
				return m.Result, nil
			}
		case err := <-readErr:
			// The worker died mid-run: the guest cannot take it down through
			// wazero, so this is the OS (the OOM killer, say).
			if werr := w.kill(); werr != nil {
				err = werr
			}
			res := failed(ClassRuntimeError, "the sandbox worker died while running the code: %v", err)
			res.DurationMS = msSince(started)
			return res, nil
		case <-deadline:
			res := failed(ClassTimeout, "the code ran longer than its timeout (%s) and was stopped", timeout)
			res.DurationMS = msSince(started)
			w.kill()
			return res, nil
		case <-ctx.Done():
			w.kill()
			return nil, ctx.Err()
		}
	}
}

func (s *Sandbox) take() (*worker, error) {
	s.mu.Lock()
	if s.closed {
		s.mu.Unlock()
		return nil, errors.New("the sandbox is closed")
	}
	if n := len(s.idle); n > 0 {
		w := s.idle[n-1]
		s.idle = s.idle[:n-1]
		s.mu.Unlock()
		return w, nil
	}
	s.mu.Unlock()
	cmd := s.opts.WorkerCommand()
	in, err := cmd.StdinPipe()
	if err != nil {
		return nil, err
	}
	out, err := cmd.StdoutPipe()
	if err != nil {
		return nil, err
	}
	cmd.Stderr = nil
	if err := cmd.Start(); err != nil {
		return nil, err
	}
	return &worker{cmd: cmd, in: in, out: bufio.NewReaderSize(out, 1<<16)}, nil
}

func (s *Sandbox) put(w *worker) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed {
		w.kill()
		return
	}
	s.idle = append(s.idle, w)
}

// kill ends the worker and reaps it, returning how it ended.
func (w *worker) kill() error {
	_ = w.cmd.Process.Kill()
	_ = w.in.Close()
	return w.cmd.Wait()
}

// Close stops every idle worker. Runs in progress end their workers
// themselves.
func (s *Sandbox) Close() {
	s.mu.Lock()
	idle := s.idle
	s.idle, s.closed = nil, true
	s.mu.Unlock()
	for _, w := range idle {
		w.kill()
	}
}
