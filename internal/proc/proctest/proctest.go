// Package proctest lists live processes, for tests that check that no
// process outlives flowrun. It reads /proc, so it works on Linux only.
package proctest

import (
	"os"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/flowrun/flowrun/internal/proc/procfs"
)

// Process is one live process.
type Process struct {
	procfs.Stat
	Args []string
	Env  []string
}

// HasEnv reports whether the process's environment has this entry.
func (p Process) HasEnv(entry string) bool { return slices.Contains(p.Env, entry) }

// Mentions reports whether any of the process's arguments contains s.
func (p Process) Mentions(s string) bool {
	return slices.ContainsFunc(p.Args, func(a string) bool { return strings.Contains(a, s) })
}

// Live lists the processes that are running; zombies, which are dead but
// not yet reaped, are left out.
func Live() ([]Process, error) {
	stats, err := procfs.Stats()
	if err != nil {
		return nil, err
	}
	var out []Process
	for _, s := range stats {
		if s.State == "Z" || s.State == "X" {
			continue
		}
		dir := "/proc/" + strconv.Itoa(s.Pid) + "/"
		out = append(out, Process{Stat: s, Args: nulSplit(dir + "cmdline"), Env: nulSplit(dir + "environ")})
	}
	return out, nil
}

// WaitGone waits up to two seconds until no live process matches, and
// fails the test if one still does. It skips the test where processes
// cannot be listed.
func WaitGone(t testing.TB, what string, match func(Process) bool) {
	t.Helper()
	deadline := time.Now().Add(2 * time.Second)
	for {
		all, err := Live()
		if err != nil {
			t.Skip(err)
		}
		var left []string
		for _, p := range all {
			if match(p) {
				left = append(left, strconv.Itoa(p.Pid)+" "+strings.Join(p.Args, " "))
			}
		}
		if len(left) == 0 {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s still running: %q", what, left)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

func nulSplit(path string) []string {
	b, err := os.ReadFile(path)
	if err != nil || len(b) == 0 {
		return nil
	}
	return strings.Split(strings.TrimRight(string(b), "\x00"), "\x00")
}
