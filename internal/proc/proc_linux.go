package proc

import (
	"syscall"

	"github.com/flowrun/flowrun/internal/proc/procfs"
)

// setDeathSignal has the kernel kill the process when flowrun dies.
// Pdeathsig follows the thread that started the child; Go keeps its
// threads unless a goroutine locked to one exits, and nothing here locks
// threads.
func setDeathSignal(attr *syscall.SysProcAttr) { attr.Pdeathsig = syscall.SIGKILL }

const memoryEnforced = true

// rss is the resident memory of every live process in the group.
func (s *sysGroup) rss() int64 {
	stats, err := procfs.Stats()
	if err != nil {
		return 0
	}
	var total int64
	for _, p := range stats {
		if p.Group == s.pgid && p.State != "Z" {
			total += p.RSSBytes
		}
	}
	return total
}
