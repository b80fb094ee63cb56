package store

import (
	"strconv"

	"golang.org/x/sys/unix"
)

// sZomb is p_stat of a process that has exited and is not yet reaped
// (SZOMB in <sys/proc.h>).
const sZomb = 5

// processState is "Z" for a zombie, "R" for any other process, "" when
// the kernel does not say.
func processState(pid int) string {
	kp, err := unix.SysctlKinfoProc("kern.proc.pid", pid)
	if err != nil {
		return ""
	}
	if kp.Proc.P_stat == sZomb {
		return "Z"
	}
	return "R"
}

// processStart is a process's start time in microseconds since the epoch,
// or "" when the kernel does not say.
func processStart(pid int) string {
	kp, err := unix.SysctlKinfoProc("kern.proc.pid", pid)
	if err != nil {
		return ""
	}
	t := kp.Proc.P_starttime
	return strconv.FormatInt(int64(t.Sec)*1_000_000+int64(t.Usec), 10)
}
