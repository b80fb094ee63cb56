package sandbox

import (
	"bufio"
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math"
	"os"
	"os/exec"
	"runtime"
	"sync"
	"sync/atomic"
	"time"

	"github.com/flowrun/flowrun/errclass"
	"github.com/flowrun/flowrun/internal/proc"
	"github.com/flowrun/flowrun/jsonvalue"
	"github.com/flowrun/flowrun/redact"
	"github.com/flowrun/flowrun/sandbox/bounds"
)

// Languages.
const (
	Python = "python"
	Go     = "go"
	Wasm   = "wasm"
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
	Class   errclass.Class `json:"class"` // compile_error, runtime_error, timeout, memory_limit, output_limit or bad_result
	Message string         `json:"message"`
	Line    int            `json:"line,omitempty"`
}

func failed(class errclass.Class, format string, args ...any) *Result {
	return &Result{Error: &Error{Class: class, Message: fmt.Sprintf(format, args...)}}
}

// UnavailableError says the sandbox cannot run a language here. It
// travels from a worker process to its parent as JSON, so that the
// parent sees the same value.
type UnavailableError struct {
	Reason string `json:"reason"`
	// Missing is the language whose runtime is not installed here (Python),
	// when that is why: installing it is the fix.
	Missing string `json:"missing,omitempty"`
}

func (e *UnavailableError) Error() string { return "sandbox unavailable: " + e.Reason }

// Class is the runtime error class of an unusable sandbox.
func (e *UnavailableError) Class() errclass.Class { return errclass.SandboxUnavailable }

// pythonMissing is the error for a Python for WASI installation that is
// absent or incomplete (problem says which).
func pythonMissing(problem string) *UnavailableError {
	return &UnavailableError{Reason: "Python for WASI is not installed (" + problem + ")", Missing: Python}
}

// Options configure a Sandbox.
type Options struct {
	// PythonDir holds python.wasm and lib/python3.13; where
	// `flowrun sandbox install python` puts them by default.
	PythonDir string
	// CacheDir holds compiled modules and Go builds; under the user cache by default.
	CacheDir string
	// Workers is how many worker processes may run at once; NumCPU by default.
	Workers int
	// GoBuilds is how many go builds may run at once; DefaultGoBuilds by default.
	GoBuilds int
	// CacheBytes caps CacheDir's Go builds and compiled modules together,
	// least recently used out first; DefaultCacheBytes by default.
	CacheBytes int64
	// WorkerCommand starts a worker process; by default this executable
	// with FLOWRUN_SANDBOX_WORKER=1 (see WorkerMain).
	WorkerCommand func() *exec.Cmd
}

// Sandbox runs code in a pool of worker processes. It is safe for
// concurrent use; Close stops every worker.
type Sandbox struct {
	opts  Options
	slots chan struct{}
	mu    sync.Mutex
	// coldStart is why Python calls could not start from the installed
	// pre-initialised interpreter: the first reason a worker gave.
	coldStart string
	// noReuse is why warm Python calls cannot reuse an instance.
	noReuse string
	idle    []*worker
	closed  bool
	goCache *goBuilds
	// pythonFound remembers that Check found the installation, which
	// otherwise costs a few stats on every call; a worker that finds it
	// gone says so (a fatal report), which forgets it.
	pythonFound atomic.Bool
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
		opts.WorkerCommand = newWorker
	}
	if opts.GoBuilds <= 0 {
		opts.GoBuilds = DefaultGoBuilds
	}
	if opts.CacheBytes <= 0 {
		opts.CacheBytes = DefaultCacheBytes
	}
	return &Sandbox{opts: opts, slots: make(chan struct{}, opts.Workers), goCache: newGoBuilds(opts.CacheDir, opts.GoBuilds, opts.CacheBytes)}
}

// WorkerEnv is set in a worker process's environment.
const WorkerEnv = "FLOWRUN_SANDBOX_WORKER"

// newWorker starts the worker of a sandbox given no WorkerCommand. The
// package's own tests, when race-built, swap in a flowrun built without
// the race detector, under which wazero compiles several times slower.
var newWorker = selfWorker

func selfWorker() *exec.Cmd {
	exe, err := os.Executable()
	if err != nil {
		exe = os.Args[0]
	}
	return workerAt(exe)
}

// workerAt starts exe as a worker.
func workerAt(exe string) *exec.Cmd {
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
			return pythonMissing(problem)
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
// sandbox itself cannot run (class sandbox_unavailable), the limits are out
// of range, or ctx ended; everything the code does is in the Result.
// Limits.Timeout covers compiling Go code and running it.
func (s *Sandbox) Run(ctx context.Context, req Request) (*Result, error) {
	req.Limits = req.Limits.withDefaults()
	if err := req.Limits.check(); err != nil {
		return nil, err
	}
	if req.Language != Python || !s.pythonFound.Load() {
		if err := s.Check(req.Language); err != nil {
			return nil, err
		}
		if req.Language == Python {
			s.pythonFound.Store(true)
		}
	}
	start := time.Now()
	job, res, err := s.prepare(ctx, req)
	if err != nil || res != nil {
		return res, err // a compile error, or a compile that took the whole timeout: nothing ran
	}
	compiling := time.Since(start)
	select {
	case s.slots <- struct{}{}:
	case <-ctx.Done():
		return nil, ctx.Err()
	}
	defer func() { <-s.slots }()
	return s.runOnWorker(ctx, job, req.Limits, compiling)
}

func (l Limits) check() error {
	switch {
	case l.MemoryMB > bounds.MaxMemoryMB:
		return fmt.Errorf("sandbox memory limit %d MiB: a WebAssembly guest addresses at most %d MiB", l.MemoryMB, bounds.MaxMemoryMB)
	case l.MaxOutputBytes > bounds.MaxOutputBytes:
		return fmt.Errorf("sandbox output limit %d bytes: the most is %d", l.MaxOutputBytes, bounds.MaxOutputBytes)
	}
	return nil
}

// msSince is how long the code has run, in milliseconds: none if it never
// started.
func msSince(t time.Time) float64 {
	if t.IsZero() {
		return 0
	}
	return float64(time.Since(t).Microseconds()) / 1000
}

// prepare turns a request into a worker job. A Go compile error, or a
// compile that ran out of time or memory, is the result itself; err is
// set when ctx ended while compiling.
func (s *Sandbox) prepare(ctx context.Context, req Request) (*job, *Result, error) {
	nonce := make([]byte, 16)
	_, _ = rand.Read(nonce)
	j := &job{Language: req.Language, MemoryMB: req.Limits.MemoryMB, MaxOutput: req.Limits.MaxOutputBytes,
		Nonce: hex.EncodeToString(nonce), PythonDir: s.opts.PythonDir, CacheDir: s.opts.CacheDir}
	var err error
	switch req.Language {
	case Python:
		j.Stdin, err = marshalRequest(req.Source, req.Call, req.Args, j.Nonce)
	case Go:
		path, res, berr := s.goCache.build(ctx, req.Source, req.Call, req.Limits.Timeout)
		if berr != nil || res != nil {
			return nil, res, berr
		}
		j.Module = path
		j.Stdin, err = argsJSON(map[string]any{"source": req.Source, "call": req.Call, "args": req.Args, "nonce": j.Nonce})
	case Wasm:
		j.Module = req.Module
		j.Stdin, err = argsJSON(req.Args)
	}
	if err != nil {
		return nil, failed(errclass.RuntimeError, "%v", err), nil
	}
	return j, nil, nil
}

// argsJSON is what a Go harness or a wasm module reads on stdin.
func argsJSON(v any) ([]byte, error) {
	b, err := json.Marshal(v)
	if err != nil {
		return nil, fmt.Errorf("args are not JSON: %w", err)
	}
	return b, nil
}

// job is what a worker runs. It goes to the worker as one line of JSON
// followed by its stdin's bytes as they are (writeJob): as base64 inside
// the JSON, a scoring candidate's request took the worker 75 us to decode.
type job struct {
	Language string `json:"language"`
	Module   string `json:"module,omitempty"`
	Stdin    []byte `json:"-"`
	// StdinBytes is len(Stdin), the count of bytes after the line.
	StdinBytes int    `json:"stdin_bytes"`
	MemoryMB   int    `json:"memory_mb"`
	MaxOutput  int    `json:"max_output"`
	Nonce      string `json:"nonce"`
	PythonDir  string `json:"python_dir"`
	CacheDir   string `json:"cache_dir"`
	// Clocked says the parent's deadline runs from sending the job, so a
	// call from a ready instance needs no "started".
	Clocked bool `json:"clocked,omitempty"`
}

// writeJob sends j to a worker, in one write.
func writeJob(w io.Writer, j *job) error {
	j.StdinBytes = len(j.Stdin)
	b, err := json.Marshal(j)
	if err != nil {
		return err
	}
	_, err = w.Write(append(append(b, '\n'), j.Stdin...))
	return err
}

// worker is one worker process and its pipes.
type worker struct {
	proc *proc.Group
	in   io.WriteCloser
	out  *bufio.Reader
	runs int
	// warm is the warmth of the worker's last Python call that started
	// from the image (zero when it had none): a job as warm finds its
	// instance ready.
	warm warmth
}

// warmth is what a worker's ready instance must share with a job to
// serve it: the Python installation and the memory limit. The parent
// clocks a job by it and the worker keeps or closes its instance by it,
// so that both sides agree.
type warmth struct {
	pythonDir string
	memoryMB  int
}

func (j *job) warmth() warmth { return warmth{j.PythonDir, j.MemoryMB} }

// workerMessage is a line a worker writes: "started" when the guest is
// about to run (the deadline counts from there, so compiling the module or
// making the instance is not charged to the code; not sent for a clocked
// job that a ready instance ran), then the report.
type workerMessage struct {
	Started bool              `json:"started,omitempty"`
	Report  *report           `json:"report,omitempty"`
	Fatal   *UnavailableError `json:"fatal,omitempty"` // the worker cannot run anything
	Recycle bool              `json:"recycle,omitempty"`
}

// maxMessage bounds a line read from a worker running a job with this
// output limit: stdout (with the envelope), stderr and the result, base64
// encoded, and room for the rest. The worker caps what it keeps; this
// keeps the parent bounded whatever a worker sends.
func maxMessage(maxOutput int) int { return int(min(8*int64(maxOutput)+1<<16, math.MaxInt)) }

// readMessage reads one line of at most limit bytes.
func readMessage(r *bufio.Reader, limit int) ([]byte, error) {
	var line []byte
	for {
		chunk, err := r.ReadSlice('\n')
		line = append(line, chunk...)
		if len(line) > limit {
			return nil, fmt.Errorf("a message from the worker is longer than %d bytes", limit)
		}
		if !errors.Is(err, bufio.ErrBufferFull) {
			return line, err
		}
	}
}

func (s *Sandbox) runOnWorker(ctx context.Context, j *job, limits Limits, compiling time.Duration) (*Result, error) {
	w, err := s.take()
	if err != nil {
		return nil, &UnavailableError{Reason: fmt.Sprintf("starting a sandbox worker: %v", err)}
	}
	// A worker whose last call was this kind of Python call has the next
	// instance ready and starts the code at once: the deadline counts
	// from sending the job, and the worker sends no "started", which
	// saves waking this process mid-call. It still sends one when it had
	// to make the instance after all, and the deadline starts again then.
	j.Clocked = j.Language == Python && w.warm == j.warmth()
	if err := writeJob(w.in, j); err != nil {
		w.kill()
		return nil, &UnavailableError{Reason: fmt.Sprintf("sandbox worker: %v", err)}
	}
	lines := make(chan workerMessage, 2)
	readErr := make(chan error, 1)
	go func() {
		for {
			line, err := readMessage(w.out, maxMessage(j.MaxOutput))
			if err != nil {
				readErr <- err
				return
			}
			var m workerMessage
			if err := json.Unmarshal(line, &m); err != nil {
				readErr <- fmt.Errorf("bad message from worker: %.200q", line)
				return
			}
			lines <- m
			if m.Report != nil || m.Fatal != nil {
				return
			}
		}
	}()
	var deadline <-chan time.Time
	var started time.Time
	var timer *time.Timer
	startClock := func() {
		started = time.Now()
		if timer != nil {
			timer.Stop()
		}
		timer = time.NewTimer(max(limits.Timeout-compiling, 0))
		deadline = timer.C
	}
	defer func() {
		if timer != nil {
			timer.Stop()
		}
	}()
	if j.Clocked {
		startClock()
	}
	for {
		select {
		case m := <-lines:
			switch {
			case m.Started:
				startClock()
			case m.Fatal != nil:
				w.kill()
				s.pythonFound.Store(false)
				return nil, m.Fatal
			default:
				w.runs++
				w.warm = warmth{}
				if j.Language == Python && m.Report.ColdStart == "" {
					w.warm = j.warmth()
				}
				if m.Recycle {
					w.kill()
				} else {
					s.put(w)
				}
				res := finish(m.Report, limits.MaxOutputBytes)
				res.DurationMS = msSince(started)
				s.note(&s.coldStart, m.Report.ColdStart)
				s.note(&s.noReuse, m.Report.NoReuse)
				return res, nil
			}
		case err := <-readErr:
			// The worker died mid-run: the guest cannot take it down through
			// wazero, so this is the OS (the OOM killer, say).
			if werr := w.kill(); werr != nil {
				err = werr
			}
			res := failed(errclass.RuntimeError, "the sandbox worker died while running the code: %v", err)
			res.DurationMS = msSince(started)
			return res, nil
		case <-deadline:
			res := failed(errclass.Timeout, "%s", timeoutMessage(limits.Timeout, compiling))
			res.DurationMS = msSince(started)
			w.kill()
			return res, nil
		case <-ctx.Done():
			w.kill()
			return nil, ctx.Err()
		}
	}
}

func timeoutMessage(timeout, compiling time.Duration) string {
	if compiling < 10*time.Millisecond {
		return fmt.Sprintf("the code ran longer than its timeout (%s) and was stopped", timeout)
	}
	return fmt.Sprintf("the code ran longer than its timeout (%s, of which compiling took %s) and was stopped", timeout, compiling.Round(time.Millisecond))
}

// finish turns a worker's report into the run's result, enforcing the
// output caps on the bytes the guest wrote: stdout, stderr and the result
// may each be at most maxOutput bytes, whatever the worker kept.
func finish(rep *report, maxOutput int) *Result {
	res := &Result{Stdout: string(rep.Stdout), Stderr: string(rep.Stderr), Error: capMessage(rep.Error, maxOutput)}
	over := ""
	switch {
	case rep.Error != nil && rep.Error.Class == errclass.OutputLimit:
	case len(rep.Stdout) > maxOutput:
		over = fmt.Sprintf("the code wrote %d bytes to stdout; the limit is %d", len(rep.Stdout), maxOutput)
	case len(rep.Stderr) > maxOutput:
		over = fmt.Sprintf("the code wrote %d bytes to stderr; the limit is %d", len(rep.Stderr), maxOutput)
	case len(rep.Result) > maxOutput:
		over = fmt.Sprintf("the result is %d bytes; the limit is %d", len(rep.Result), maxOutput)
	default:
		if res.Error != nil {
			return res
		}
		if len(rep.Result) > 0 {
			v, err := decodeJSON(rep.Result)
			if err != nil {
				res.Error = &Error{Class: errclass.BadResult, Message: err.Error()}
				return res
			}
			res.Result = v
		}
		res.OK = true
		return res
	}
	if over != "" {
		res.Error = &Error{Class: errclass.OutputLimit, Message: over}
	}
	res.Stdout, res.Stderr = truncate(res.Stdout, maxOutput), truncate(res.Stderr, maxOutput)
	return res
}

// capMessage holds an error's message to maxOutput bytes, as the guest's
// other output is held: the code chooses its exception text, and could
// otherwise forge one far longer than the cap through the envelope. The
// message is redacted before the cut, which may fall inside a secret.
func capMessage(e *Error, maxOutput int) *Error {
	if e == nil || len(e.Message) <= maxOutput {
		return e
	}
	note := fmt.Sprintf(" [cut: the message was %d bytes; the limit is %d]", len(e.Message), maxOutput)
	capped := *e
	capped.Message = redact.Cut(redact.Cut(redact.String(e.Message), max(maxOutput-len(note), 0))+note, maxOutput)
	return &capped
}

// truncate cuts s to n bytes, redacted first: the cut may fall inside a
// secret the code printed.
func truncate(s string, n int) string {
	if len(s) > n {
		return redact.Cut(redact.String(s), n)
	}
	return s
}

func decodeJSON(b []byte) (any, error) {
	v, err := jsonvalue.Decode(b)
	if err != nil {
		return nil, fmt.Errorf("the result is not JSON: %v", err)
	}
	return v, nil
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
	g, err := proc.Start(cmd, proc.Limits{})
	if err != nil {
		return nil, err
	}
	return &worker{proc: g, in: in, out: bufio.NewReaderSize(out, 1<<16)}, nil
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
	w.proc.Kill()
	_ = w.in.Close()
	return w.proc.Wait()
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

// note keeps in *first the first reason a worker gave (for starting
// Python cold, or for not reusing instances).
func (s *Sandbox) note(first *string, reason string) {
	if reason == "" {
		return
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if *first == "" {
		*first = reason
	}
}

// ColdStart says why Python calls start CPython from scratch although a
// pre-initialised interpreter is installed (they are slower, and the same
// to the code), or "" when they start warm or no call has run yet.
func (s *Sandbox) ColdStart() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.coldStart
}

// NoReuse says why warm Python calls each get a new instance, where they
// could otherwise serve the next call from the last one's when it is back
// to the image (docs/sandbox.md, "Warm calls"), or "" when they do or no
// call has run yet.
func (s *Sandbox) NoReuse() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.noReuse
}
