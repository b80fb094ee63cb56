//go:build unix && !linux

package proc

import "syscall"

// setDeathSignal does nothing: only Linux has a parent-death signal. The
// reaper kills the group when flowrun dies.
func setDeathSignal(*syscall.SysProcAttr) {}

const memoryEnforced = false

func (s *sysGroup) rss() int64 { return 0 }
