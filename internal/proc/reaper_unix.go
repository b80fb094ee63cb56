//go:build unix

package proc

import (
	"bufio"
	"fmt"
	"io"
	"os"
	"os/exec"
	"os/signal"
	"strconv"
	"sync"
	"syscall"
)

// The reaper is flowrun re-executed as a small process that holds the ids
// of flowrun's live process groups and kills them all when the pipe from
// flowrun closes, which happens however flowrun ends, SIGKILL included.
// Pdeathsig reaches only a group's first process; the reaper reaches the
// processes that one started, such as the compiler under go build.

var reaper struct {
	sync.Mutex
	possible bool // Main ran, so this executable can serve as the reaper
	started  bool
	pipe     io.WriteCloser // nil when there is no reaper
}

// Main runs the reaper or a group's supervisor when this process was
// started as one, and exits; otherwise it returns. Call it first thing in main: without it flowrun
// starts no reaper (sandbox.WorkerMain calls it).
func Main() {
	supervisorMain()
	if os.Getenv(ReaperEnv) != "1" {
		reaper.Lock()
		reaper.possible = true
		reaper.Unlock()
		return
	}
	os.Exit(reap(os.Stdin))
}

// reap reads "+pgid" and "-pgid" lines until its input closes, then kills
// every group still listed. It ignores the signals a terminal sends, so
// that it outlives flowrun long enough to do so.
func reap(in io.Reader) int {
	signal.Ignore(syscall.SIGINT, syscall.SIGTERM, syscall.SIGHUP, syscall.SIGQUIT)
	groups := map[int]bool{}
	lines := bufio.NewScanner(in)
	for lines.Scan() {
		line := lines.Text()
		if len(line) < 2 {
			continue
		}
		pgid, err := strconv.Atoi(line[1:])
		if err != nil || pgid <= 1 {
			continue
		}
		if line[0] == '+' {
			groups[pgid] = true
		} else {
			delete(groups, pgid)
		}
	}
	for pgid := range groups {
		killDescendants(pgid)
		_ = syscall.Kill(-pgid, syscall.SIGKILL)
	}
	return 0
}

// tellReaper sends the reaper one line, starting it first if need be. A
// reaper that cannot start or has gone leaves Pdeathsig and KillAll.
func tellReaper(op byte, pgid int) {
	reaper.Lock()
	defer reaper.Unlock()
	if !reaper.possible {
		return
	}
	if !reaper.started {
		reaper.started = true
		reaper.pipe = startReaper()
	}
	if reaper.pipe == nil {
		return
	}
	if _, err := fmt.Fprintf(reaper.pipe, "%c%d\n", op, pgid); err != nil {
		reaper.pipe = nil
	}
}

func startReaper() io.WriteCloser {
	exe, err := os.Executable()
	if err != nil {
		return nil
	}
	cmd := exec.Command(exe)
	cmd.Env = []string{ReaperEnv + "=1"}
	// Its own group: a Ctrl-C meant for flowrun does not reach it.
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	in, err := cmd.StdinPipe()
	if err != nil {
		return nil
	}
	// Nothing waits for it: it exits after flowrun does.
	if err := cmd.Start(); err != nil {
		return nil
	}
	return in
}
