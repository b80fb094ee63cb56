package store

import (
	"os"
	"os/exec"
	"runtime"
	"testing"
	"time"
)

// alive, on every platform: this process is alive and has a start time
// that tells it from a recycled pid; a child that has exited is not alive,
// even before it is reaped (a zombie on Unix, an open handle on Windows).
func TestHardening12ProcessAlive(t *testing.T) {
	me := os.Getpid()
	start := processStart(me)
	switch runtime.GOOS {
	case "linux", "darwin", "windows":
		if start == "" {
			t.Fatalf("no start time for this process on %s", runtime.GOOS)
		}
		if alive(me, start+"1") {
			t.Error("alive with another start time: a recycled pid would count")
		}
	}
	if !alive(me, start) || !alive(me, "") {
		t.Fatal("this process is not alive")
	}
	if alive(0, "") || alive(-1, "") {
		t.Error("pid 0 or -1 is alive")
	}

	child := exec.Command(os.Args[0], "-test.run=^$")
	if err := child.Start(); err != nil {
		t.Fatal(err)
	}
	pid := child.Process.Pid
	deadline := time.Now().Add(30 * time.Second)
	for alive(pid, "") {
		if time.Now().After(deadline) {
			child.Process.Kill()
			child.Wait()
			t.Fatalf("child %d, which has exited, still alive after 30s", pid)
		}
		time.Sleep(10 * time.Millisecond)
	}
	if err := child.Wait(); err != nil {
		t.Fatalf("child: %v", err)
	}
	if alive(pid, "") {
		t.Errorf("child %d alive after it was reaped", pid)
	}
}
