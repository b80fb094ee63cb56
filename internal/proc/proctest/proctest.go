// Package proctest lists live processes, for tests that check that no
// process outlives flowrun. It reads /proc, so it works on Linux only.
package proctest

import (
	"errors"
	"os"
	"strconv"
	"strings"
)

// Process is one live process.
type Process struct {
	Pid, Parent, Group int
	Args               []string
	Env                []string
}

// HasEnv reports whether the process's environment has this entry.
func (p Process) HasEnv(entry string) bool {
	for _, e := range p.Env {
		if e == entry {
			return true
		}
	}
	return false
}

// Mentions reports whether any of the process's arguments contains s.
func (p Process) Mentions(s string) bool {
	for _, a := range p.Args {
		if strings.Contains(a, s) {
			return true
		}
	}
	return false
}

// ErrUnsupported is Live's error where there is no /proc.
var ErrUnsupported = errors.New("listing processes needs Linux's /proc")

// Live lists the processes that are running; zombies, which are dead but
// not yet reaped, are left out.
func Live() ([]Process, error) {
	entries, err := os.ReadDir("/proc")
	if err != nil {
		return nil, ErrUnsupported
	}
	var out []Process
	for _, e := range entries {
		pid, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		b, err := os.ReadFile("/proc/" + e.Name() + "/stat")
		if err != nil {
			continue
		}
		i := strings.LastIndexByte(string(b), ')')
		if i < 0 {
			continue
		}
		f := strings.Fields(string(b[i+1:]))
		if len(f) < 3 || f[0] == "Z" || f[0] == "X" {
			continue
		}
		p := Process{Pid: pid}
		p.Parent, _ = strconv.Atoi(f[1])
		p.Group, _ = strconv.Atoi(f[2])
		p.Args = nulSplit("/proc/" + e.Name() + "/cmdline")
		p.Env = nulSplit("/proc/" + e.Name() + "/environ")
		out = append(out, p)
	}
	return out, nil
}

func nulSplit(path string) []string {
	b, err := os.ReadFile(path)
	if err != nil || len(b) == 0 {
		return nil
	}
	return strings.Split(strings.TrimRight(string(b), "\x00"), "\x00")
}
