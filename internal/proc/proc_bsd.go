//go:build unix && !linux

package proc

import (
	"os/exec"
	"syscall"
)

// setDeathSignal does nothing: only Linux has a parent-death signal. The
// reaper kills the group when flowrun dies.
func setDeathSignal(*syscall.SysProcAttr) {}

// supervise does nothing: without a subreaper a supervisor could not find
// what left the group.
func supervise(*exec.Cmd) {}

// supervisorMain does nothing: no supervisor is started here.
func supervisorMain() {}

// killDescendants does nothing: there is no /proc to find them in.
func killDescendants(int) {}

const memoryEnforced = false

func (s *sysGroup) rss() int64 { return 0 }
