package proc

import (
	"os"
	"os/exec"
	"strconv"
	"strings"
	"syscall"
)

// prepare puts the process in a new process group and has the kernel kill
// it when flowrun dies. Pdeathsig follows the thread that started the
// child; Go keeps its threads unless a goroutine locked to one exits, and
// nothing here locks threads.
func prepare(cmd *exec.Cmd) {
	if cmd.SysProcAttr == nil {
		cmd.SysProcAttr = &syscall.SysProcAttr{}
	}
	cmd.SysProcAttr.Setpgid = true
	cmd.SysProcAttr.Pdeathsig = syscall.SIGKILL
}

const memoryEnforced = true

// rss is the resident memory of every process in the group, in bytes.
func (s *sysGroup) rss() int64 {
	entries, err := os.ReadDir("/proc")
	if err != nil {
		return 0
	}
	want := strconv.Itoa(s.pgid)
	var pages int64
	for _, e := range entries {
		if e.Name()[0] < '0' || e.Name()[0] > '9' {
			continue
		}
		b, err := os.ReadFile("/proc/" + e.Name() + "/stat")
		if err != nil {
			continue
		}
		// After the command name: state ppid pgrp ... rss is the 22nd field.
		i := strings.LastIndexByte(string(b), ')')
		if i < 0 {
			continue
		}
		f := strings.Fields(string(b[i+1:]))
		if len(f) < 22 || f[2] != want {
			continue
		}
		n, _ := strconv.ParseInt(f[21], 10, 64)
		pages += n
	}
	return pages * int64(os.Getpagesize())
}
