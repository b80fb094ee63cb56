//go:build linux

package proc

import (
	"bufio"
	"cmp"
	"context"
	"fmt"
	"os"
	"os/exec"
	"strconv"
	"syscall"
	"testing"
	"time"

	"github.com/flowrun/flowrun/internal/proc/proctest"
	"github.com/flowrun/flowrun/internal/testwait"
)

// TestMain lets the test binary be the reaper, a process that eats memory,
// or a stand-in for flowrun that starts a group and waits to be killed.
func TestMain(m *testing.M) {
	Main()
	switch os.Getenv("PROC_TEST_ROLE") {
	case "hog":
		b := make([]byte, 512<<20)
		for i := 0; i < len(b); i += 4096 {
			b[i] = 1
		}
		time.Sleep(time.Minute)
		os.Exit(0)
	case "flowrun":
		g, err := Start(exec.Command("sh", "-c", "sleep 300 & sleep 300"), Limits{})
		if err != nil {
			fmt.Println(err)
			os.Exit(1)
		}
		fmt.Println(g.Pid())
		time.Sleep(time.Hour)
	case "flowrun-with-daemon":
		g, err := Start(daemonizing("sleep 300"), Limits{Daemons: true})
		if err != nil {
			fmt.Println(err)
			os.Exit(1)
		}
		fmt.Println(g.Pid())
		time.Sleep(time.Hour)
	}
	os.Exit(m.Run())
}

// groupSize counts the live processes of a process group.
func groupSize(t *testing.T, pgid int) int {
	t.Helper()
	all, err := proctest.Live()
	if err != nil {
		t.Skip(err)
	}
	n := 0
	for _, p := range all {
		if p.Group == pgid {
			n++
		}
	}
	return n
}

// waitGone waits for a group to have no live process.
func waitGone(t *testing.T, pgid int) {
	t.Helper()
	proctest.WaitGone(t, "processes of group "+strconv.Itoa(pgid), func(p proctest.Process) bool { return p.Group == pgid })
}

// waitStarted waits until a group has n live processes.
func waitStarted(t *testing.T, pgid, n int) {
	t.Helper()
	deadline := time.Now().Add(5 * time.Second)
	for groupSize(t, pgid) < n {
		if time.Now().After(deadline) {
			t.Fatalf("group %d has %d processes, want %d", pgid, groupSize(t, pgid), n)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

func TestKillEndsTheWholeGroup(t *testing.T) {
	g, err := Start(exec.Command("sh", "-c", "sleep 300 & sleep 300"), Limits{})
	if err != nil {
		t.Fatal(err)
	}
	waitStarted(t, g.Pid(), 3)
	g.Kill()
	_ = g.Wait()
	waitGone(t, g.Pid())
}

func TestWaitEndsWhatTheFirstProcessLeft(t *testing.T) {
	g, err := Start(exec.Command("sh", "-c", "sleep 300 & echo started"), Limits{})
	if err != nil {
		t.Fatal(err)
	}
	if err := g.Wait(); err != nil {
		t.Fatal(err)
	}
	waitGone(t, g.Pid())
}

func TestContextEndKillsTheWholeGroup(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 300*time.Millisecond)
	defer cancel()
	g, err := Start(exec.CommandContext(ctx, "sh", "-c", "sleep 300 & sleep 300"), Limits{})
	if err != nil {
		t.Fatal(err)
	}
	start := time.Now()
	_ = g.Wait()
	// Not killed, the group would live 300 s; no load makes a kill take 60.
	if d := time.Since(start); d > time.Minute {
		t.Fatalf("Wait returned %s after the context ended", d)
	}
	waitGone(t, g.Pid())
}

func TestMemoryCap(t *testing.T) {
	cmd := exec.Command(os.Args[0])
	cmd.Env = append(os.Environ(), "PROC_TEST_ROLE=hog")
	g, err := Start(cmd, Limits{MemoryBytes: 64 << 20})
	if err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- g.Wait() }()
	select {
	case <-done:
	case <-time.After(testwait.Budget()):
		g.Kill()
		<-done
		t.Fatal("a process using 512 MiB ran on under a 64 MiB cap")
	}
	if !g.OverMemory() {
		t.Fatal("the group ended but OverMemory is false")
	}
}

// TestReaperKillsGroupsWhenFlowrunIsKilled: after SIGKILL of the process
// that started a group, the group's first process dies by Pdeathsig and
// the rest (here a background sleep) by the reaper.
func TestReaperKillsGroupsWhenFlowrunIsKilled(t *testing.T) {
	cmd, pgid := startStandIn(t, "flowrun")
	waitStarted(t, pgid, 3)
	_ = cmd.Process.Signal(syscall.SIGKILL)
	_ = cmd.Wait()
	waitGone(t, pgid)
}

// daemonMark is in the environment of every process daemonizing starts:
// the test's, which a stand-in for flowrun inherits.
var daemonMark = "PROC_TEST_DAEMON=" + cmp.Or(os.Getenv("PROC_TEST_DAEMON"), strconv.Itoa(os.Getpid()))

// daemonizing is a command that leaves a daemon behind, as a server
// that daemonizes does: a double fork, the grandchild in a session and
// process group of its own, then runs rest.
func daemonizing(rest string) *exec.Cmd {
	cmd := exec.Command("sh", "-c", "(setsid sleep 300 &); "+rest)
	cmd.Env = append(os.Environ(), daemonMark)
	return cmd
}

// waitForDaemon waits until the daemon has left the group pgid.
func waitForDaemon(t *testing.T, pgid int) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for {
		all, err := proctest.Live()
		if err != nil {
			t.Skip(err)
		}
		for _, p := range all {
			if p.HasEnv(daemonMark) && p.Group != pgid && p.Mentions("sleep") {
				return
			}
		}
		if time.Now().After(deadline) {
			t.Fatal("the daemon did not start")
		}
		time.Sleep(10 * time.Millisecond)
	}
}

func daemonGone(t *testing.T) {
	t.Helper()
	proctest.WaitGone(t, "the daemon", func(p proctest.Process) bool { return p.HasEnv(daemonMark) })
}

// A process that left the group with setsid ends with it: when the
// group is killed, and when its first process exits.
func TestDaemonsEndWithTheGroup(t *testing.T) {
	if _, err := exec.LookPath("setsid"); err != nil {
		t.Skip("no setsid")
	}
	t.Run("killed", func(t *testing.T) {
		g, err := Start(daemonizing("sleep 300"), Limits{Daemons: true})
		if err != nil {
			t.Fatal(err)
		}
		waitForDaemon(t, g.Pid())
		g.Kill()
		_ = g.Wait()
		daemonGone(t)
	})
	t.Run("exited", func(t *testing.T) {
		// The daemon exists (it may not have called setsid yet) once the
		// subshell that started it has exited; then the command exits.
		g, err := Start(daemonizing("true"), Limits{Daemons: true})
		if err != nil {
			t.Fatal(err)
		}
		if err := g.Wait(); err != nil {
			t.Fatal(err)
		}
		daemonGone(t)
	})
}

// TestDaemonsEndWhenFlowrunIsKilled: after SIGKILL of the process that
// started the group, the daemon that left it is ended too.
func TestDaemonsEndWhenFlowrunIsKilled(t *testing.T) {
	if _, err := exec.LookPath("setsid"); err != nil {
		t.Skip("no setsid")
	}
	cmd, pgid := startStandIn(t, "flowrun-with-daemon", daemonMark)
	waitForDaemon(t, pgid)
	_ = cmd.Process.Signal(syscall.SIGKILL)
	_ = cmd.Wait()
	daemonGone(t)
}

// startStandIn starts the test binary as a stand-in for flowrun (role, see
// TestMain) that starts a group and prints its id; the stand-in is killed
// when the test ends.
func startStandIn(t *testing.T, role string, env ...string) (*exec.Cmd, int) {
	t.Helper()
	cmd := exec.Command(os.Args[0])
	cmd.Env = append(append(os.Environ(), "PROC_TEST_ROLE="+role), env...)
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = cmd.Process.Kill() })
	line, err := bufio.NewReader(out).ReadString('\n')
	if err != nil {
		t.Fatal(err)
	}
	pgid, err := strconv.Atoi(line[:len(line)-1])
	if err != nil {
		t.Fatalf("%q", line)
	}
	return cmd, pgid
}
