//go:build unix

package sandbox

import (
	"os/exec"
	"syscall"
)

// stopGroupOnCancel starts cmd in a process group of its own and makes
// cancelling it send SIGTERM to the whole group, so that make and the
// compilers stop too.
func stopGroupOnCancel(cmd *exec.Cmd) {
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	cmd.Cancel = func() error { return syscall.Kill(-cmd.Process.Pid, syscall.SIGTERM) }
}
