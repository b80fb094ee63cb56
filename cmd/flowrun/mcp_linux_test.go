//go:build linux

package main

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/flowrun/flowrun/internal/proc/proctest"
	"github.com/flowrun/flowrun/llm/llmtest"
)

const misbehavingServerPipeline = `
version: 1
name: misbehaving
models:
  default: {model: gpt-4.1-mini}
mcp:
  bad:
    command: %q
    env: {%s: %q, MARK: %q}
    timeout: 1s
tools:
  answer:
    description: The final answer.
    parameters: {type: object, properties: {text: {type: string}}, required: [text]}
nodes:
  - id: solve
    agent:
      prompt: go
      tools: [bad.*]
      finish: [answer]
outputs:
  text: nodes.solve.finish.args.text
`

// runMisbehaving runs an agent whose model calls tool of the test's
// misbehaving server, then answers; it returns the exit code, stderr and
// the marker that tells the server's processes apart.
func runMisbehaving(t *testing.T, tool string) (code int, stdout, stderr, mark, token string) {
	dir := t.TempDir()
	token = fmt.Sprintf("%s-%d", t.Name(), os.Getpid())
	mark = filepath.Join(dir, "mark")
	p := writeFile(t, dir, "p.yaml", fmt.Sprintf(misbehavingServerPipeline, os.Args[0], testMCPServerEnv, token, mark))
	srv := llmtest.New(t)
	useModel(t, srv)
	srv.Push(
		llmtest.Calls(llmtest.Call("bad__"+tool, map[string]any{})),
		llmtest.Calls(llmtest.Call("answer", map[string]any{"text": "gave up waiting"})),
	)
	code, stdout, stderr = flowrun(t, p)
	return code, stdout, stderr, mark, token
}

func serverGone(t *testing.T, token string) {
	t.Helper()
	proctest.WaitGone(t, "the MCP server and its children", func(p proctest.Process) bool {
		return p.HasEnv(testMCPServerEnv + "=" + token)
	})
}

// A server that does not answer within its timeout: the model is told
// and finishes; the hung server and the child it started are ended.
func TestMCPHangingServerTimesOutAndLeavesNoProcess(t *testing.T) {
	code, stdout, stderr, mark, token := runMisbehaving(t, "hang")
	if code != exitOK || !strings.Contains(stdout, "gave up waiting") {
		t.Fatalf("exit %d, want %d\n%s\n%s", code, exitOK, stdout, stderr)
	}
	if _, err := os.Stat(mark); err != nil {
		t.Fatalf("the hang tool never ran: %v", err)
	}
	if !strings.Contains(stderr, "did not answer within 1s") {
		t.Errorf("progress does not show the timeout:\n%s", stderr)
	}
	serverGone(t, token)
}

// A server that exits mid-call fails the run, naming the server and the
// tool, instead of letting the model go on; nothing is left running.
func TestMCPCrashingServerFailsTheRun(t *testing.T) {
	code, _, stderr, _, token := runMisbehaving(t, "crash")
	if code != exitFailed {
		t.Fatalf("exit %d, want %d\n%s", code, exitFailed, stderr)
	}
	if !strings.Contains(stderr, "mcp server bad died during a call to crash") {
		t.Errorf("the failure does not name the server and tool:\n%s", stderr)
	}
	serverGone(t, token)
}

// The npm servers a run starts (node processes) are gone when it ends.
func TestMCPRealServersLeaveNoProcess(t *testing.T) {
	every, fsBin := everythingBin(t), filesystemBin(t)
	files := t.TempDir()
	notes := writeFile(t, files, "notes.txt", "hello from disk")
	t.Setenv("FLOWRUN_MCP_TEST_TOKEN", mcpSecret)
	p := writeFile(t, t.TempDir(), "agent.yaml", fmt.Sprintf(mcpAgentPipeline, every, fsBin, files))
	srv := llmtest.New(t)
	useModel(t, srv)
	scriptMCPAgent(srv, notes)
	if code, _, stderr := flowrun(t, p); code != exitOK {
		t.Fatalf("exit %d\n%s", code, stderr)
	}
	proctest.WaitGone(t, "the MCP servers the run started", func(p proctest.Process) bool {
		return p.HasEnv("API_TOKEN="+mcpSecret) || p.Mentions(files)
	})
}

// A server that died is started again for the node's next attempt: the
// first call kills it, the retry's call reaches a new process, and both
// processes are gone when the run ends.
func TestMCPDeadServerRestartsOnRetry(t *testing.T) {
	dir := t.TempDir()
	token := fmt.Sprintf("%s-%d", t.Name(), os.Getpid())
	mark := filepath.Join(dir, "mark")
	p := writeFile(t, dir, "p.yaml", fmt.Sprintf(`
version: 1
name: restart
mcp:
  bad:
    command: %q
    env: {%s: %q, MARK: %q}
nodes:
  - id: call
    tool: {name: bad.crash_once}
    retry: {max_attempts: 2, backoff: 10ms}
outputs:
  text: nodes.call
`, os.Args[0], testMCPServerEnv, token, mark))
	code, stdout, stderr := flowrun(t, p)
	if code != exitOK || !strings.Contains(stdout, "recovered") {
		t.Fatalf("exit %d, want %d\n%s\n%s", code, exitOK, stdout, stderr)
	}
	if !strings.Contains(stderr, "mcp server bad died during a call to crash_once") {
		t.Errorf("the first attempt's failure is not shown:\n%s", stderr)
	}
	serverGone(t, token)
}

const daemonizingServerPipeline = `
version: 1
name: daemonizing
mcp:
  bad:
    command: %q
    env: {%s: %q, MARK: %q}
    timeout: 1h
nodes:
  - id: start
    tool: {name: bad.daemonize}
  - id: wait
    tool: {name: bad.%s}
outputs:
  text: nodes.start
`

// A server's daemon (a grandchild that called setsid) does not outlive
// flowrun: neither when the run ends nor when flowrun is killed with
// SIGKILL mid-run.
func TestMCPServerDaemonEndsWithFlowrun(t *testing.T) {
	if _, err := exec.LookPath("setsid"); err != nil {
		t.Skip("no setsid")
	}
	pipeline := func(t *testing.T, then string) (path, mark, token string) {
		dir := t.TempDir()
		token = fmt.Sprintf("%s-%d", t.Name(), os.Getpid())
		mark = filepath.Join(dir, "mark")
		return writeFile(t, dir, "p.yaml", fmt.Sprintf(daemonizingServerPipeline, os.Args[0], testMCPServerEnv, token, mark, then)), mark, token
	}
	t.Run("run ends", func(t *testing.T) {
		p, _, token := pipeline(t, "ok")
		if code, stdout, stderr := flowrun(t, p); code != exitOK || !strings.Contains(stdout, "daemonized") {
			t.Fatalf("exit %d\n%s\n%s", code, stdout, stderr)
		}
		serverGone(t, token)
	})
	t.Run("flowrun killed", func(t *testing.T) {
		p, mark, token := pipeline(t, "hang")
		cmd := flowrunProcess(t, nil, p)
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		defer func() { _ = cmd.Process.Kill() }()
		// hang writes the mark once the daemon has been left behind.
		for deadline := time.Now().Add(time.Minute); ; time.Sleep(20 * time.Millisecond) {
			if _, err := os.Stat(mark); err == nil {
				break
			}
			if time.Now().After(deadline) {
				t.Fatal("the server never reached hang")
			}
		}
		_ = cmd.Process.Signal(syscall.SIGKILL)
		_ = cmd.Wait()
		serverGone(t, token)
	})
}
