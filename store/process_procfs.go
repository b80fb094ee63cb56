//go:build unix && !darwin

package store

import (
	"os"
	"strconv"
	"strings"
)

// processState is a process's state letter from /proc ("Z" for a zombie),
// or "" where /proc is not available.
func processState(pid int) string {
	f := statFields(pid)
	if len(f) < 1 {
		return ""
	}
	return f[0]
}

// processStart is a process's start time in clock ticks since boot, from
// /proc (field 22 of stat), or "" where /proc is not available.
func processStart(pid int) string {
	f := statFields(pid)
	if len(f) < 20 {
		return ""
	}
	return f[19]
}

// statFields are the fields of /proc/PID/stat after the command name,
// which may itself hold spaces: f[0] is field 3 (state).
func statFields(pid int) []string {
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return nil
	}
	s := string(b)
	i := strings.LastIndexByte(s, ')')
	if i < 0 {
		return nil
	}
	return strings.Fields(s[i+1:])
}
