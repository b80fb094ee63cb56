//go:build linux

package main

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/flowrun/flowrun/internal/proc/proctest"
	"github.com/flowrun/flowrun/sandbox"
)

// descendants lists the live processes below pid.
func descendants(t *testing.T, pid int) []proctest.Process {
	t.Helper()
	all, err := proctest.Live()
	if err != nil {
		t.Skip(err)
	}
	below := map[int]bool{pid: true}
	var out []proctest.Process
	for grew := true; grew; {
		grew = false
		for _, p := range all {
			if below[p.Parent] && !below[p.Pid] {
				below[p.Pid] = true
				out = append(out, p)
				grew = true
			}
		}
	}
	return out
}

// waitFor waits up to 30 s for a descendant of pid that matches, and
// returns every descendant at that moment.
func waitFor(t *testing.T, pid int, what string, match func(proctest.Process) bool) []proctest.Process {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for {
		ps := descendants(t, pid)
		for _, p := range ps {
			if match(p) {
				return ps
			}
		}
		if time.Now().After(deadline) {
			t.Fatalf("no %s started under flowrun", what)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// assertAllGone checks that none of these processes is alive two seconds
// on (dead ones still waiting to be reaped do not count).
func assertAllGone(t *testing.T, ps []proctest.Process) {
	t.Helper()
	started := map[int]string{}
	for _, p := range ps {
		started[p.Pid] = strings.Join(p.Args, " ")
	}
	proctest.WaitGone(t, "processes flowrun started", func(p proctest.Process) bool {
		args, ok := started[p.Pid]
		return ok && args == strings.Join(p.Args, " ")
	})
}

func isWorker(p proctest.Process) bool { return p.HasEnv(sandbox.WorkerEnv + "=1") }
func isCompiler(p proctest.Process) bool {
	return len(p.Args) > 0 && filepath.Base(p.Args[0]) == "compile"
}

// typeBomb is Go that takes minutes to compile (see the sandbox corpus),
// new source on every call so that no build cache has it.
func typeBomb() string {
	var b strings.Builder
	fmt.Fprintf(&b, "package main\n\n// %d\n\ntype S0[T any] struct{ A, B T }\n", time.Now().UnixNano())
	for i := 1; i <= 24; i++ {
		fmt.Fprintf(&b, "type S%d[T any] struct{ A, B S%d[T] }\n", i, i-1)
	}
	b.WriteString("\nfunc f() any {\n\tvar x S24[int]\n\treturn x\n}\n")
	return b.String()
}

// codePipeline writes a pipeline of one code node with a 600 s timeout.
func codePipeline(t *testing.T, language, source string) string {
	t.Helper()
	src := strings.ReplaceAll(source, "\n", "\n        ")
	return writeFile(t, t.TempDir(), "spin.yaml", `
version: 1
name: spin
nodes:
  - id: spin
    code:
      language: `+language+`
      call: f
      limits: {timeout: 600s}
      source: |
        `+src+`
`)
}

// TestHardening02NoProcessOutlivesFlowrun: killing flowrun while its code
// spins in a worker (SIGKILL, which it cannot handle, or SIGTERM, which
// stops the run) or while go build compiles leaves no process behind.
func TestHardening02NoProcessOutlivesFlowrun(t *testing.T) {
	spin := "def f():\n    while True:\n        pass\n"
	cases := []struct {
		name     string
		language string
		source   string
		sig      syscall.Signal
		busy     func(proctest.Process) bool
	}{
		{"SIGKILL while python spins", sandbox.Python, spin, syscall.SIGKILL, isWorker},
		{"SIGTERM while python spins", sandbox.Python, spin, syscall.SIGTERM, isWorker},
		{"SIGKILL while go compiles", sandbox.Go, typeBomb(), syscall.SIGKILL, isCompiler},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			var env []string
			if c.language == sandbox.Python {
				if err := sandbox.New(sandbox.Options{}).Check(sandbox.Python); err != nil {
					if os.Getenv("CI") != "" {
						t.Fatal(err)
					}
					t.Skip(err)
				}
			} else {
				env = []string{"XDG_CACHE_HOME=" + t.TempDir()} // nothing compiled yet
			}
			p := startDurProc(t, env, codePipeline(t, c.language, c.source))
			waitFor(t, p.pid(), "busy child", c.busy)
			time.Sleep(300 * time.Millisecond) // well into the code (or the compile)
			ps := descendants(t, p.pid())
			if err := p.cmd.Process.Signal(c.sig); err != nil {
				t.Fatal(err)
			}
			code := p.wait()
			assertAllGone(t, ps)
			if c.sig == syscall.SIGTERM && (code != exitFailed || !strings.Contains(p.stderr(), "stopped: cancelled")) {
				t.Fatalf("SIGTERM must stop the run: exit %d\n%s", code, p.stderr())
			}
		})
	}
}

// TestHardening01CancelledCompileIsStopped: Ctrl-C while go build compiles
// the code ends the run stopped (not completed, and the node not ok with
// a compile_error), with the compiler killed and its directories removed.
func TestHardening01CancelledCompileIsStopped(t *testing.T) {
	cache := t.TempDir()
	p := startDurProc(t, []string{"XDG_CACHE_HOME=" + cache}, codePipeline(t, sandbox.Go, typeBomb()))
	waitFor(t, p.pid(), "compiler", isCompiler)
	ps := descendants(t, p.pid())
	if err := p.cmd.Process.Signal(os.Interrupt); err != nil {
		t.Fatal(err)
	}
	code := p.wait()
	if code != exitFailed || !strings.Contains(p.stderr(), "stopped: cancelled") || strings.Contains(p.stderr(), "compile_error") {
		t.Fatalf("exit %d:\n%s", code, p.stderr())
	}
	assertAllGone(t, ps)
	if left, _ := filepath.Glob(filepath.Join(cache, "flowrun", "sandbox", "go", "build-*")); len(left) > 0 {
		t.Fatalf("build directories left: %v", left)
	}
}
