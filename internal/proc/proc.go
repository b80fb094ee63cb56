// Package proc starts child processes that do not outlive flowrun.
//
// Guarantees: a process started by Start runs in a group of its own (a
// process group on Unix, a job object on Windows) together with everything
// it starts. Kill, the command's context ending (for a command made by
// exec.CommandContext) and KillAll end the whole group; Wait ends what is
// left of it once the first process has exited. When flowrun dies, however
// it dies, its groups die too: on Unix a reaper process (see Main) kills
// every live group when the pipe from flowrun closes, and on Linux each
// group's first process also gets SIGKILL from the kernel (Pdeathsig); on
// Windows the system kills a job when flowrun's handle to it closes.
//
// A process that leaves its group (setsid, as a daemon does) is ended
// too, on Linux, for a group started with Limits.Daemons: the group runs
// under a supervisor, flowrun re-executed as a child subreaper, to which
// every orphan of the group is reparented. The supervisor ends every
// descendant it has when the group's command exits or flowrun dies, and
// Kill and the reaper end them before the group.
package proc

import (
	"os/exec"
	"sync"
	"time"
)

// Limits bound a group. Zero values mean no bound.
type Limits struct {
	// Grace is how long a group whose context ended has between a polite
	// stop (SIGTERM on Unix) and SIGKILL; zero kills at once.
	Grace time.Duration
	// MemoryBytes caps the resident memory of the whole group. It is
	// enforced on Linux, by sampling /proc every memoryPoll; elsewhere it is
	// not enforced.
	MemoryBytes int64
	// Daemons also ends, on Linux, the processes that leave the group
	// (setsid, a daemon's double fork); see the package doc. Elsewhere
	// only the group is ended (on Windows the job, which holds them too).
	Daemons bool
}

// ReaperEnv is set in the environment of the reaper, the process that
// kills flowrun's process groups when flowrun dies (Unix; see Main).
const ReaperEnv = "FLOWRUN_PROC_REAPER"

// SupervisorEnv is set in the environment of a group's supervisor
// (Limits.Daemons on Linux; see Main), and removed before its command runs.
const SupervisorEnv = "FLOWRUN_PROC_SUPERVISOR"

// memoryPoll is how often a group's memory is sampled.
const memoryPoll = 100 * time.Millisecond

// Group is a started process and everything it starts.
type Group struct {
	cmd *exec.Cmd
	sys sysGroup

	mu        sync.Mutex
	released  bool
	overLimit bool
	stopWatch chan struct{}
	watching  sync.WaitGroup
}

var (
	liveMu sync.Mutex
	live   = map[*Group]struct{}{}
)

// Start starts cmd in a new group. If cmd was made by exec.CommandContext,
// the context ending stops the whole group (after l.Grace).
func Start(cmd *exec.Cmd, l Limits) (*Group, error) {
	g := &Group{cmd: cmd, stopWatch: make(chan struct{})}
	prepare(cmd)
	if l.Daemons {
		supervise(cmd)
	}
	if cmd.Cancel != nil {
		if l.Grace > 0 {
			cmd.Cancel = g.terminate
			cmd.WaitDelay = l.Grace
		} else {
			cmd.Cancel = g.kill
		}
	}
	if cmd.WaitDelay == 0 {
		// A process that left the group may hold the output pipes open;
		// Wait must not wait for it.
		cmd.WaitDelay = 5 * time.Second
	}
	// Until the group is attached a cancel waits: signalling an unset
	// process group would signal flowrun's own.
	g.mu.Lock()
	if err := cmd.Start(); err != nil {
		g.mu.Unlock()
		return nil, err
	}
	if err := g.sys.attach(cmd.Process.Pid); err != nil {
		g.released = true
		g.mu.Unlock()
		_ = cmd.Process.Kill()
		_ = cmd.Wait()
		return nil, err
	}
	g.mu.Unlock()
	liveMu.Lock()
	live[g] = struct{}{}
	liveMu.Unlock()
	if l.MemoryBytes > 0 && memoryEnforced {
		g.watching.Add(1)
		go g.watchMemory(l.MemoryBytes)
	}
	return g, nil
}

// Pid is the first process's id.
func (g *Group) Pid() int { return g.cmd.Process.Pid }

// Wait waits for the first process to exit, then kills what is left of the
// group and forgets it.
func (g *Group) Wait() error {
	err := g.cmd.Wait()
	close(g.stopWatch)
	g.watching.Wait()
	g.mu.Lock()
	defer g.mu.Unlock()
	if !g.released {
		_ = g.sys.kill()
		g.sys.release()
		g.released = true
	}
	liveMu.Lock()
	delete(live, g)
	liveMu.Unlock()
	return err
}

// Kill kills every process in the group. Call Wait to reap it.
func (g *Group) Kill() { _ = g.kill() }

func (g *Group) kill() error { return g.whileHeld(g.sys.kill) }

func (g *Group) terminate() error { return g.whileHeld(g.sys.terminate) }

// whileHeld signals the group unless Wait has let it go: its id may name
// another group by then.
func (g *Group) whileHeld(signal func() error) error {
	g.mu.Lock()
	defer g.mu.Unlock()
	if g.released {
		return nil
	}
	return signal()
}

// OverMemory reports whether the group was killed for passing its memory cap.
func (g *Group) OverMemory() bool {
	g.mu.Lock()
	defer g.mu.Unlock()
	return g.overLimit
}

func (g *Group) watchMemory(limit int64) {
	defer g.watching.Done()
	t := time.NewTicker(memoryPoll)
	defer t.Stop()
	for {
		select {
		case <-g.stopWatch:
			return
		case <-t.C:
			if g.sys.rss() > limit {
				g.mu.Lock()
				g.overLimit = true
				if !g.released {
					_ = g.sys.kill()
				}
				g.mu.Unlock()
				return
			}
		}
	}
}

// KillAll kills every group still running. flowrun calls it on its way
// out, so that a signal that ends flowrun ends its children too.
func KillAll() {
	liveMu.Lock()
	groups := make([]*Group, 0, len(live))
	for g := range live {
		groups = append(groups, g)
	}
	liveMu.Unlock()
	for _, g := range groups {
		g.Kill()
	}
}
