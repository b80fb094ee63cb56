// Package procfs reads which processes are alive from Linux's /proc: their
// parents, process groups, states and resident memory.
package procfs

import (
	"errors"
	"os"
	"strconv"
	"strings"
)

// Stat is one process's line in /proc/PID/stat, in part.
type Stat struct {
	Pid, Parent, Group int
	State              string // R, S, D, Z (dead, not yet reaped), ...
	RSSBytes           int64
}

// ErrUnsupported is Stats's error where there is no /proc.
var ErrUnsupported = errors.New("reading processes needs Linux's /proc")

// Stats lists every process there is.
func Stats() ([]Stat, error) {
	entries, err := os.ReadDir("/proc")
	if err != nil {
		return nil, ErrUnsupported
	}
	page := int64(os.Getpagesize())
	var out []Stat
	for _, e := range entries {
		pid, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		b, err := os.ReadFile("/proc/" + e.Name() + "/stat")
		if err != nil {
			continue // it has just exited
		}
		// The command name, in parentheses, may hold anything; the fields
		// after it are: state ppid pgrp ... rss (the 22nd).
		i := strings.LastIndexByte(string(b), ')')
		if i < 0 {
			continue
		}
		f := strings.Fields(string(b[i+1:]))
		if len(f) < 22 {
			continue
		}
		s := Stat{Pid: pid, State: f[0]}
		s.Parent, _ = strconv.Atoi(f[1])
		s.Group, _ = strconv.Atoi(f[2])
		rss, _ := strconv.ParseInt(f[21], 10, 64)
		s.RSSBytes = rss * page
		out = append(out, s)
	}
	return out, nil
}
