//go:build unix

package proc

import (
	"errors"
	"os/exec"
	"syscall"
)

// prepare puts the process in a new process group.
func prepare(cmd *exec.Cmd) {
	if cmd.SysProcAttr == nil {
		cmd.SysProcAttr = &syscall.SysProcAttr{}
	}
	cmd.SysProcAttr.Setpgid = true
	setDeathSignal(cmd.SysProcAttr)
}

// sysGroup is a process group; its id is the first process's pid.
type sysGroup struct{ pgid int }

func (s *sysGroup) attach(pid int) error {
	s.pgid = pid
	tellReaper('+', pid)
	return nil
}

// kill ends what left the group first: once the group's first process
// is dead, they can no longer be found as its descendants.
func (s *sysGroup) kill() error {
	if s.pgid > 1 {
		killDescendants(s.pgid)
	}
	return s.signal(syscall.SIGKILL)
}

func (s *sysGroup) terminate() error { return s.signal(syscall.SIGTERM) }

func (s *sysGroup) signal(sig syscall.Signal) error {
	if s.pgid <= 1 {
		return nil // not a group of ours: -0 would be flowrun's own
	}
	if err := syscall.Kill(-s.pgid, sig); err != nil && !errors.Is(err, syscall.ESRCH) {
		return err
	}
	return nil
}

func (s *sysGroup) release() { tellReaper('-', s.pgid) }
