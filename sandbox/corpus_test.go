package sandbox

import (
	"context"
	"errors"
	"fmt"
	"os"
	"runtime"
	"strings"
	"testing"
	"time"
	"unicode/utf8"

	"github.com/flowrun/flowrun/errclass"
	"github.com/flowrun/flowrun/internal/proc"
	"github.com/flowrun/flowrun/internal/proc/proctest"
	"github.com/flowrun/flowrun/internal/testneed"
	"github.com/flowrun/flowrun/internal/testwait"
)

// hostile is one piece of code a model might write, and what must happen.
type hostile struct {
	name   string
	lang   string
	source string
	limits Limits
	class  errclass.Class                  // expected error class; "" means ok
	check  func(t *testing.T, res *Result) // more assertions, if any
	item   int                             // the issue 10 item the case guards, if any
	// cold cases are compiled inside the run, so that their timeout covers
	// the compile; the others are compiled before the corpus runs.
	cold bool
	// numpy cases need an installation with numpy.
	numpy bool
}

func pyFn(body string) string { return "def f():\n" + indent(body) + "\n" }

func indent(s string) string {
	lines := strings.Split(s, "\n")
	for i, l := range lines {
		lines[i] = "    " + l
	}
	return strings.Join(lines, "\n")
}

func goFn(imports, body string) string {
	return "package main\n\nimport (" + imports + ")\n\nfunc f() any {\n" + body + "\n}\n"
}

var corpus = []hostile{
	{name: "infinite loop", lang: Python, source: pyFn("while True:\n    pass"), limits: Limits{Timeout: 500 * time.Millisecond}, class: errclass.Timeout},
	{name: "infinite loop", lang: Go, source: goFn("", "for {\n}"), limits: Limits{Timeout: 500 * time.Millisecond}, class: errclass.Timeout},
	{name: "memory bomb", lang: Python, source: pyFn("x = []\nwhile True:\n    x.append(bytearray(1 << 20))"), limits: Limits{MemoryMB: 64}, class: errclass.MemoryLimit},
	{name: "memory bomb", lang: Go, source: goFn("", "var x [][]byte\nfor {\n\tx = append(x, make([]byte, 1<<20))\n}"), limits: Limits{MemoryMB: 64}, class: errclass.MemoryLimit},
	{name: "stdout flood", lang: Python, source: pyFn("while True:\n    print('x' * 1000)"), limits: Limits{MaxOutputBytes: 10000}, class: errclass.OutputLimit, check: keptOutput},
	{name: "stdout flood", lang: Go, source: goFn(`"fmt"; "strings"`, "for {\n\tfmt.Println(strings.Repeat(\"x\", 1000))\n}"), limits: Limits{MaxOutputBytes: 10000}, class: errclass.OutputLimit, check: keptOutput},
	{name: "stderr flood", lang: Python, source: pyFn("import sys\nwhile True:\n    sys.stderr.write('e' * 1000)"), limits: Limits{MaxOutputBytes: 10000}, class: errclass.OutputLimit},
	{name: "stderr flood", lang: Go, source: goFn(`"os"`, "for {\n\tos.Stderr.WriteString(\"eeee\")\n}"), limits: Limits{MaxOutputBytes: 10000}, class: errclass.OutputLimit},
	{name: "read /etc/passwd", lang: Python, source: pyFn("return open('/etc/passwd').read()"), class: errclass.RuntimeError, check: mentions("Capabilities insufficient")},
	{name: "read /etc/passwd", lang: Go, source: goFn(`"os"`, "b, err := os.ReadFile(\"/etc/passwd\")\nif err != nil {\n\tpanic(err)\n}\nreturn string(b)"), class: errclass.RuntimeError},
	{name: "path traversal through the stdlib mount", lang: Python, source: pyFn("return open('" + pythonGuestLib + "/../../../../etc/passwd').read()"), class: errclass.RuntimeError},
	{name: "writing into the stdlib mount", lang: Python, source: pyFn("open('" + pythonGuestLib + "/evil.py', 'w').write('x')"), class: errclass.RuntimeError},
	{name: "listing the root", lang: Python, source: pyFn("import os\nreturn sorted(os.listdir('/'))"), class: errclass.RuntimeError, check: mentions("Capabilities insufficient")},
	{name: "listing the stdlib mount", lang: Python, source: pyFn("import os\nreturn len(os.listdir('" + pythonGuestLib + "')) > 100"), check: func(t *testing.T, res *Result) {
		if res.Result != true {
			t.Errorf("the stdlib should be readable: %v", res.Result)
		}
	}},
	{name: "open a socket", lang: Python, source: pyFn("import socket\ns = socket.socket()\ns.connect(('127.0.0.1', 80))"), class: errclass.RuntimeError},
	{name: "open a socket", lang: Go, source: goFn(`"net"`, "c, err := net.Dial(\"tcp\", \"127.0.0.1:80\")\nif err != nil {\n\tpanic(err)\n}\nreturn c != nil"), class: errclass.RuntimeError},
	{name: "spawn a subprocess", lang: Python, source: pyFn("import subprocess\nreturn subprocess.run(['ls'], capture_output=True).stdout"), class: errclass.RuntimeError},
	{name: "spawn a subprocess", lang: Go, source: goFn(`"os/exec"`, "out, err := exec.Command(\"ls\").Output()\nif err != nil {\n\tpanic(err)\n}\nreturn string(out)"), class: errclass.RuntimeError},
	{name: "os.environ", lang: Python, source: pyFn("import os\nreturn dict(os.environ)"), check: emptyEnv},
	{name: "os.environ", lang: Go, source: goFn(`"os"`, "return os.Environ()"), check: emptyEnv},
	{name: "deep recursion", lang: Python, source: "def g(n):\n    return g(n + 1) + 1\n\ndef f():\n    return g(0)\n", class: errclass.RuntimeError},
	{name: "deep recursion", lang: Go, source: "package main\n\nfunc g(n int) int { return g(n+1) + 1 }\n\nfunc f() any { return g(0) }\n", limits: Limits{MemoryMB: 512}, class: errclass.RuntimeError},
	{name: "100 MB result", lang: Python, source: pyFn("return 'x' * 100_000_000"), limits: Limits{MemoryMB: 512}, class: errclass.OutputLimit},
	{name: "100 MB result", lang: Go, source: goFn(`"strings"`, "return strings.Repeat(\"x\", 100_000_000)"), limits: Limits{MemoryMB: 768}, class: errclass.OutputLimit},
	{name: "syntax error", lang: Python, source: "def f():\n    return (1 +\n\nx = 2\n", class: errclass.CompileError, check: atLine(2)},
	{name: "syntax error", lang: Go, source: "package main\n\nfunc f() any {\n\treturn 1 +\n}\n", class: errclass.CompileError, check: atLine(5)},
	{name: "exception deep in a helper", lang: Python, source: "def helper(grid):\n    return grid[99]\n\ndef middle(g):\n    return helper(g)\n\ndef f():\n    return middle([1, 2])\n", class: errclass.RuntimeError, check: all(atLine(2), mentions("IndexError"), mentions("in helper"), lacks("harness"), lacks("_main"))},
	{name: "panic deep in a helper", lang: Go, source: "package main\n\nfunc helper(g []int) int {\n\treturn g[99]\n}\n\nfunc f() any { return helper([]int{1, 2}) }\n", class: errclass.RuntimeError, check: all(atLine(4), mentions("index out of range"))},
	{name: "import a package the sandbox lacks", lang: Python, source: pyFn("import scipy\nreturn 1"), class: errclass.RuntimeError, check: all(mentions("No module named 'scipy'"), mentions("standard library and numpy only"))},
	// numpy cannot get around the limits either.
	// 8 GB cannot even be addressed by a wasm32 guest: numpy refuses it.
	{numpy: true, name: "huge np.zeros", lang: Python, source: pyFn("import numpy as np\na = np.zeros(10**9)\nreturn 1"), limits: Limits{MemoryMB: 64}, class: errclass.RuntimeError, check: mentions("array is too big")},
	{numpy: true, name: "800 MB np.zeros", lang: Python, source: pyFn("import numpy as np\na = np.zeros(10**8)\nreturn 1"), limits: Limits{MemoryMB: 64}, class: errclass.MemoryLimit},
	{numpy: true, name: "np.zeros over the memory limit", lang: Python, source: pyFn("import numpy as np\nreturn float(np.ones(10**7).sum())"), limits: Limits{MemoryMB: 64}, class: errclass.MemoryLimit},
	{numpy: true, name: "10^9-element broadcast", lang: Python, source: pyFn("import numpy as np\nreturn int((np.ones((10**5, 1), dtype=np.int8) * np.ones((1, 10**4), dtype=np.int8)).sum())"), limits: Limits{MemoryMB: 256}, class: errclass.MemoryLimit},
	// No memory, only time: 10^9 additions take seconds in wasm.
	{numpy: true, name: "10^9-element broadcast view summed", lang: Python, source: pyFn("import numpy as np\nreturn int(np.broadcast_to(np.ones((1, 1), dtype=np.int8), (10**5, 10**4)).sum())"), limits: Limits{Timeout: 300 * time.Millisecond}, class: errclass.Timeout},
	{numpy: true, name: "np.save to a path", lang: Python, source: pyFn("import numpy as np\nnp.save('/tmp/x.npy', np.zeros(3))\nreturn 1"), class: errclass.RuntimeError, check: mentions("Capabilities insufficient")},
	{numpy: true, name: "np.save into the stdlib mount", lang: Python, source: pyFn("import numpy as np\nnp.save('" + pythonGuestLib + "/numpy/x.npy', np.zeros(3))\nreturn 1"), class: errclass.RuntimeError, check: mentions("Function not implemented")},
	{numpy: true, name: "np.fromfile on a host file", lang: Python, source: pyFn("import numpy as np\nreturn np.fromfile('/etc/passwd', dtype=np.uint8).tolist()"), class: errclass.RuntimeError, check: mentions("Capabilities insufficient")},
	{numpy: true, name: "np.memmap", lang: Python, source: pyFn("import numpy as np\nreturn np.memmap('/tmp/m', dtype=np.uint8, mode='w+', shape=(10,)).tolist()"), class: errclass.RuntimeError, check: mentions("No module named 'mmap'")},
	{numpy: true, name: "threads", lang: Python, source: pyFn("import numpy, threading\nt = threading.Thread(target=print)\nt.start()"), class: errclass.RuntimeError, check: mentions("can't start new thread")},
	{name: "result not JSON", lang: Python, source: pyFn("return {1, 2}"), class: errclass.BadResult},
	{name: "result not JSON", lang: Go, source: goFn(`"math"`, "return math.NaN()"), class: errclass.BadResult},
	{name: "sys.exit", lang: Python, source: pyFn("import sys\nsys.exit(3)"), class: errclass.RuntimeError},
	{name: "generic type bomb", lang: Go, source: typeBomb(24), limits: Limits{Timeout: time.Second}, class: errclass.Timeout, item: 1, cold: true, check: mentions("compiling the code took longer")},
	{name: "stdout between 1x and 2x the cap", lang: Python, source: pyFn("print('x' * 190_000)\nreturn 1"), limits: Limits{MaxOutputBytes: 100 << 10}, class: errclass.OutputLimit, item: 9, check: keptAtMost(100 << 10)},
	{name: "stdout between 1x and 2x the cap", lang: Go, source: goFn(`"fmt"; "strings"`, "fmt.Print(strings.Repeat(\"x\", 190_000))\nreturn 1"), limits: Limits{MaxOutputBytes: 100 << 10}, class: errclass.OutputLimit, item: 9, check: keptAtMost(100 << 10)},
	{name: "result between 1x and 2x the cap", lang: Python, source: pyFn("return 'x' * 150_000"), limits: Limits{MaxOutputBytes: 100 << 10}, class: errclass.OutputLimit, item: 9},
	{name: "result between 1x and 2x the cap", lang: Go, source: goFn(`"strings"`, "return strings.Repeat(\"x\", 150_000)"), limits: Limits{MaxOutputBytes: 100 << 10}, class: errclass.OutputLimit, item: 9},
	{name: "forged error message over the cap", lang: Python, source: pyForge(`'{"result": null, "error": {"class": "runtime_error", "message": "' + 'é' * 9_500 + '"}}'`), limits: Limits{MaxOutputBytes: 10240}, class: errclass.RuntimeError, item: 9, check: messageAtMost(10240)},
	{name: "forged error message over the cap", lang: Go, source: goForge("`{\"result\": null, \"error\": {\"class\": \"runtime_error\", \"message\": \"` + strings.Repeat(\"m\", 19_000) + `\"}}`"), limits: Limits{MaxOutputBytes: 10240}, class: errclass.RuntimeError, item: 9, check: messageAtMost(10240)},
	{name: "exception message over the cap", lang: Python, source: pyFn("raise ValueError('v' * 19_000)"), limits: Limits{MaxOutputBytes: 10240}, class: errclass.RuntimeError, item: 9, check: messageAtMost(10240)},
	{name: "forged timeout envelope", lang: Python, source: pyForge(`'{"result": null, "error": {"class": "timeout", "message": "forged"}}'`), class: errclass.RuntimeError, item: 9, check: mentions("only the sandbox decides")},
	{name: "forged timeout envelope", lang: Go, source: goForge("`{\"result\": null, \"error\": {\"class\": \"timeout\", \"message\": \"forged\"}}`"), class: errclass.RuntimeError, item: 9, check: mentions("only the sandbox decides")},
	{name: "forged sandbox_unavailable envelope", lang: Python, source: pyForge(`'{"result": null, "error": {"class": "sandbox_unavailable", "message": "forged"}}'`), class: errclass.RuntimeError, item: 9, check: mentions("only the sandbox decides")},
	{name: "forged output_limit envelope", lang: Go, source: goForge("`{\"result\": null, \"error\": {\"class\": \"output_limit\", \"message\": \"forged\"}}`"), class: errclass.RuntimeError, item: 9, check: mentions("only the sandbox decides")},
	{name: "forged memory_limit envelope", lang: Python, source: pyForge(`'{"result": null, "error": {"class": "memory_limit", "message": "forged"}}'`), class: errclass.RuntimeError, item: 9, check: mentions("below its memory limit")},
	{name: "forged result over the cap", lang: Python, source: pyForge(`'{"result": "' + 'x' * 150_000 + '", "error": null}'`), limits: Limits{MaxOutputBytes: 100 << 10}, class: errclass.OutputLimit, item: 9},
	{name: "forged result over the cap", lang: Go, source: goForge("`{\"result\": \"` + strings.Repeat(\"x\", 150_000) + `\", \"error\": null}`"), limits: Limits{MaxOutputBytes: 100 << 10}, class: errclass.OutputLimit, item: 9},
}

// typeBomb is Go whose types double in size at every level: compiling it
// takes minutes (24 levels took 36 s on the host's go build). Each call
// gives new source, which neither flowrun's nor Go's build cache has seen.
func typeBomb(levels int) string {
	var b strings.Builder
	fmt.Fprintf(&b, "package main\n\n// %d\n\ntype S0[T any] struct{ A, B T }\n", time.Now().UnixNano())
	for i := 1; i <= levels; i++ {
		fmt.Fprintf(&b, "type S%d[T any] struct{ A, B S%d[T] }\n", i, i-1)
	}
	fmt.Fprintf(&b, "\nfunc f() any {\n\tvar x S%d[int]\n\treturn x\n}\n", levels)
	return b.String()
}

// pyForge is Python that reads the harness's marker from the harness's own
// frame and reports the envelope it likes, instead of the harness.
func pyForge(envelope string) string {
	return pyFn("import sys, os\nmarker = sys._getframe(1).f_locals['marker']\nsys.__stdout__.write(marker + " + envelope + " + '\\n')\nsys.__stdout__.flush()\nos._exit(0)")
}

// goForge is Go that finds the harness's marker in its own memory (below a
// fresh large allocation) and reports the envelope it likes.
func goForge(envelope string) string {
	return `package main

import (
	"os"
	"strings"
	"unsafe"
)

var _ = strings.Repeat

func f() any {
	probe := make([]byte, 8<<20)
	end := uintptr(unsafe.Pointer(&probe[0]))
	prefix := "\x1eflowrun-result-"
	n := len(prefix) + 32
	for p := uintptr(4096); p+uintptr(n) < end; p++ {
		b := unsafe.Slice((*byte)(unsafe.Pointer(p)), n)
		if string(b[:len(prefix)]) != prefix {
			continue
		}
		hex := true
		for _, c := range b[len(prefix):] {
			hex = hex && (c >= '0' && c <= '9' || c >= 'a' && c <= 'f')
		}
		if hex {
			os.Stdout.WriteString("\n" + string(b) + "\n" + ` + envelope + ` + "\n")
			os.Exit(0)
		}
	}
	return "the marker is not in memory"
}
`
}

func keptAtMost(n int) func(*testing.T, *Result) {
	return func(t *testing.T, res *Result) {
		if len(res.Stdout) == 0 || len(res.Stdout) > n {
			t.Errorf("stdout before the cap must be kept, at most the limit: %d bytes", len(res.Stdout))
		}
	}
}

// messageAtMost checks that the error message is cut to n bytes of valid
// UTF-8 and says so.
func messageAtMost(n int) func(*testing.T, *Result) {
	return func(t *testing.T, res *Result) {
		m := res.Error.Message
		if len(m) > n || !utf8.ValidString(m) || !strings.Contains(m, "[cut: the message was ") {
			t.Errorf("a %d-byte message, valid UTF-8 %v, over the %d-byte cap or not marked cut: %.120q...", len(m), utf8.ValidString(m), n, m)
		}
	}
}

func keptOutput(t *testing.T, res *Result) {
	if len(res.Stdout) == 0 || len(res.Stdout) > 10000 || !strings.HasPrefix(res.Stdout, "xxx") {
		t.Errorf("stdout before the cap must be kept, at most the limit: %d bytes", len(res.Stdout))
	}
}

func emptyEnv(t *testing.T, res *Result) {
	s := fmt.Sprint(res.Result)
	for _, k := range []string{"HOME", "PATH", "FLOWRUN", "XDG"} {
		if strings.Contains(s, k) {
			t.Errorf("the guest sees the host's environment: %s", s)
		}
	}
}

func mentions(s string) func(*testing.T, *Result) {
	return func(t *testing.T, res *Result) {
		if !strings.Contains(res.Error.Message, s) {
			t.Errorf("message %q does not mention %q", res.Error.Message, s)
		}
	}
}

func lacks(s string) func(*testing.T, *Result) {
	return func(t *testing.T, res *Result) {
		if strings.Contains(res.Error.Message, s) {
			t.Errorf("message %q mentions %q: only the code's own lines belong in it", res.Error.Message, s)
		}
	}
}

func atLine(n int) func(*testing.T, *Result) {
	return func(t *testing.T, res *Result) {
		if res.Error.Line != n {
			t.Errorf("line %d, want %d (%s)", res.Error.Line, n, res.Error.Message)
		}
	}
}

func all(checks ...func(*testing.T, *Result)) func(*testing.T, *Result) {
	return func(t *testing.T, res *Result) {
		for _, c := range checks {
			c(t, res)
		}
	}
}

// needPython lets a Python test go on only where s has Python for WASI,
// as testneed decides.
func needPython(t testing.TB, s *Sandbox) {
	t.Helper()
	testneed.Need(t, testneed.PythonForWASI, s.Check(Python))
}

// needPythonAt lets a test go on only where dir holds Python for WASI.
func needPythonAt(t testing.TB, dir string) {
	t.Helper()
	var problem error
	if info := PythonStatusAt(dir); !info.Installed {
		problem = errors.New(info.Problem)
	}
	testneed.Need(t, testneed.PythonForWASI, problem)
}

func TestHostileCorpus(t *testing.T) {
	s := New(Options{CacheDir: sharedCache(t)})
	defer s.Close()
	ctx := context.Background()
	// Warm both languages first, so that baselines and timings measure runs.
	for _, lang := range []string{Python, Go} {
		if lang == Python && s.Check(Python) != nil {
			continue
		}
		src := map[string]string{Python: pyFn("return 1"), Go: goFn("", "return 1")}[lang]
		if _, err := s.Run(ctx, Request{Language: lang, Source: src, Call: "f"}); err != nil {
			t.Fatal(err)
		}
	}
	// Compile the Go cases first: a timeout covers compiling too, and the
	// timeouts here are for the code.
	warm(t, s, corpus)
	baseRSS, baseG := hostRSS(), runtime.NumGoroutine()
	for _, c := range corpus {
		t.Run(c.lang+"/"+c.name, func(t *testing.T) { c.run(t, s) })
	}
	// The host is healthy: memory near where it started, no goroutines left.
	runtime.GC()
	if grown := hostRSS() - baseRSS; grown > 64<<20 {
		t.Errorf("host RSS grew by %d MB over the corpus", grown>>20)
	}
	deadline := time.Now().Add(2 * time.Second)
	for runtime.NumGoroutine() > baseG+2 && time.Now().Before(deadline) {
		time.Sleep(10 * time.Millisecond)
	}
	if n := runtime.NumGoroutine(); n > baseG+2 {
		t.Errorf("%d goroutines, %d before the corpus", n, baseG)
	}
	s.Close()
	if kids := children(); len(kids) > 0 {
		t.Errorf("worker processes left after Close: %v", kids)
	}
}

// warm compiles the Go cases that are not cold.
func warm(t *testing.T, s *Sandbox, cases []hostile) {
	t.Helper()
	for _, c := range cases {
		if c.lang == Go && !c.cold {
			if _, _, err := s.goCache.build(context.Background(), c.source, "f", time.Minute); err != nil {
				t.Fatalf("%s: %v", c.name, err)
			}
		}
	}
}

// run runs one case and checks its class, that a timeout stopped the code
// in time, and the case's own checks.
func (c hostile) run(t *testing.T, s *Sandbox) {
	t.Helper()
	if c.lang == Python {
		needPython(t, s)
	}
	if c.numpy {
		needNumpy(t, s)
	}
	limits := c.limits
	if c.class != errclass.Timeout {
		// The case must end by its class, however slow the machine: its
		// time limit is only a guard against a hang.
		limits.Timeout = testwait.Budget()
	}
	var lateness time.Duration
	if c.class == errclass.Timeout {
		// How late a timeout may stop the code grows with how slow the
		// machine is now.
		lateness = pace(t, s)
	}
	start := time.Now()
	res, err := s.Run(context.Background(), Request{Language: c.lang, Source: c.source, Call: "f", Limits: limits})
	wall := time.Since(start)
	if err != nil {
		t.Fatalf("the sandbox failed instead of the code: %v", err)
	}
	var got errclass.Class
	if res.Error != nil {
		got = res.Error.Class
	}
	if got != c.class || res.OK != (c.class == "") {
		t.Fatalf("class %q ok=%v, want %q; result %.200v error %+v", got, res.OK, c.class, res.Result, res.Error)
	}
	switch {
	case c.class == errclass.Timeout && c.cold:
		// Compiling counts: the whole run, compile included, stops
		// within its timeout and the time it takes to end the compiler.
		if over := wall - c.limits.Timeout; over > 500*time.Millisecond+lateness {
			t.Errorf("stopped %s after the deadline", over)
		}
	case c.class == errclass.Timeout:
		// The code must stop within 100 ms of its deadline (which
		// finding the cached build moved a little earlier).
		if over := res.DurationMS - float64(c.limits.Timeout.Milliseconds()); over > 100+float64(lateness.Milliseconds()) || over < -20 {
			t.Errorf("stopped %.0f ms after the deadline", over)
		}
	}
	if c.check != nil {
		c.check(t, res)
	}
}

// pace is how much later than on a quiet machine a timeout may stop code
// now: ten times the wall time of a trivial warm Go run (a few
// milliseconds on a quiet machine, far more under load).
func pace(t *testing.T, s *Sandbox) time.Duration {
	t.Helper()
	trivial := Request{Language: Go, Source: goFn("", "return 1"), Call: "f"}
	var took time.Duration
	for range 2 { // the first may compile it
		start := time.Now()
		if _, err := s.Run(context.Background(), trivial); err != nil {
			t.Fatal(err)
		}
		took = time.Since(start)
	}
	return 10 * took
}

// sharedCache is one cache dir for the package's tests, so that compiled
// modules and Go builds are reused between tests.
func sharedCache(t testing.TB) string {
	dir := os.Getenv("FLOWRUN_SANDBOX_TEST_CACHE")
	if dir == "" {
		dir = defaultCacheDir()
	}
	return dir
}

func hostRSS() int64 { return rss() }

// children lists this process's live child processes, but for the reaper
// (see internal/proc), which lives as long as this process.
func children() []int {
	all, err := proctest.Live()
	if err != nil {
		return nil
	}
	var out []int
	for _, p := range all {
		if p.Parent == os.Getpid() && !p.HasEnv(proc.ReaperEnv+"=1") {
			out = append(out, p.Pid)
		}
	}
	return out
}
