package proc

import (
	"fmt"
	"os"
	"os/exec"
	"os/signal"
	"slices"
	"strings"
	"syscall"
	"time"

	"golang.org/x/sys/unix"

	"github.com/flowrun/flowrun/internal/proc/procfs"
)

// supervise makes cmd run under a supervisor: this executable, started
// with SupervisorEnv, runs cmd's command as its child (see supervisorMain).
// The supervisor is the group's first process; it gets SIGTERM, which it
// can act on, rather than SIGKILL when flowrun dies. Without Main having
// run, this executable cannot serve, and cmd runs as it is.
func supervise(cmd *exec.Cmd) {
	reaper.Lock()
	possible := reaper.possible
	reaper.Unlock()
	exe, err := os.Executable()
	if !possible || err != nil {
		return
	}
	env := cmd.Env
	if env == nil {
		env = os.Environ()
	}
	cmd.Env = append(slices.Clip(env), SupervisorEnv+"=1")
	cmd.Args = append([]string{exe, cmd.Path}, cmd.Args[1:]...)
	cmd.Path = exe
	cmd.SysProcAttr.Pdeathsig = syscall.SIGTERM
}

// supervisorMain runs this process as a group's supervisor when it was
// started as one, and exits with its command's exit code.
func supervisorMain() {
	if os.Getenv(SupervisorEnv) != "1" {
		return
	}
	os.Exit(supervisor(os.Args[1], os.Args[2:]))
}

// supervisor runs a command as its child, as a child subreaper: whatever
// the command starts and leaves behind (a daemon that called setsid) is
// reparented here, not to init, and ended here once the command exits or
// flowrun dies.
func supervisor(path string, args []string) int {
	parent := os.Getppid()
	// SIGTERM is Pdeathsig when flowrun dies, or the group's polite stop,
	// which the command gets too and may take its grace to answer.
	terms := make(chan os.Signal, 1)
	signal.Notify(terms, syscall.SIGTERM)
	if err := unix.Prctl(unix.PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0); err != nil {
		fmt.Fprintf(os.Stderr, "flowrun: becoming a child subreaper: %v\n", err)
		return 127
	}
	cmd := exec.Command(path, args...)
	cmd.Env = slices.DeleteFunc(os.Environ(), func(e string) bool { return strings.HasPrefix(e, SupervisorEnv+"=") })
	cmd.Stdin, cmd.Stdout, cmd.Stderr = os.Stdin, os.Stdout, os.Stderr
	if err := cmd.Start(); err != nil {
		fmt.Fprintf(os.Stderr, "flowrun: %v\n", err)
		return 127
	}
	exited := make(chan struct{})
	go func() {
		_ = cmd.Wait()
		close(exited)
	}()
	for {
		select {
		case <-exited:
			killDescendants(os.Getpid())
			if st, ok := cmd.ProcessState.Sys().(syscall.WaitStatus); ok && st.Signaled() {
				return 128 + int(st.Signal())
			}
			return cmd.ProcessState.ExitCode()
		case <-terms:
			if os.Getppid() != parent {
				killDescendants(os.Getpid())
				return 128 + int(syscall.SIGTERM)
			}
		}
	}
}

// killDescendants sends SIGKILL to every live descendant of pid (not pid
// itself), again until none is left, since one may be forking as it
// dies. After a while it gives up on processes that do not die (stuck in
// the kernel).
func killDescendants(pid int) {
	for range 200 {
		stats, err := procfs.Stats()
		if err != nil {
			return
		}
		children := map[int][]int{}
		for _, s := range stats {
			if s.State != "Z" && s.State != "X" {
				children[s.Parent] = append(children[s.Parent], s.Pid)
			}
		}
		var found []int
		next := children[pid]
		for len(next) > 0 {
			p := next[len(next)-1]
			next = append(next[:len(next)-1], children[p]...)
			found = append(found, p)
		}
		if len(found) == 0 {
			return
		}
		for _, p := range found {
			_ = syscall.Kill(p, syscall.SIGKILL)
		}
		time.Sleep(5 * time.Millisecond)
	}
}
