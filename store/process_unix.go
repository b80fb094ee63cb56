//go:build unix

package store

import (
	"errors"
	"syscall"
)

// processRunning reports whether pid exists (signal 0 reaches it, or
// reaches something we may not signal) and is not a zombie.
func processRunning(pid int) bool {
	if err := syscall.Kill(pid, 0); err != nil && !errors.Is(err, syscall.EPERM) {
		return false
	}
	return processState(pid) != "Z" // killed, not yet reaped by its parent
}
