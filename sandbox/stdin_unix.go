//go:build unix

package sandbox

import (
	"os"
	"syscall"
)

// jobInput is the worker's stdin, read through Go's poller where it can be.
// A blocking read leaves a thread in the kernel between jobs, and each
// job's read then wakes Go's monitor thread every 20 us for about a
// millisecond to take the read's processor back: 5% of a scoring
// worker's CPU (docs/sandbox.md, "Jobs through the poller").
func jobInput() *os.File {
	if err := syscall.SetNonblock(0, true); err != nil {
		return os.Stdin
	}
	return os.NewFile(0, "/dev/stdin")
}
