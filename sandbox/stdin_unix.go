//go:build unix

package sandbox

import (
	"os"
	"syscall"
)

// jobInput is the worker's stdin, read through Go's poller when it is the
// pipe flowrun starts workers with (a terminal is left as it is: the shell
// would inherit it non-blocking). A blocking read leaves a thread in the
// kernel between jobs, and each job's read then wakes Go's monitor thread
// every 20 us for about a millisecond to take the read's processor back:
// 5% of a scoring worker's CPU (docs/sandbox.md, "Jobs through the
// poller").
func jobInput() *os.File {
	var st syscall.Stat_t
	if err := syscall.Fstat(0, &st); err != nil || st.Mode&syscall.S_IFMT != syscall.S_IFIFO {
		return os.Stdin
	}
	if err := syscall.SetNonblock(0, true); err != nil {
		return os.Stdin
	}
	return os.NewFile(0, "/dev/stdin")
}
