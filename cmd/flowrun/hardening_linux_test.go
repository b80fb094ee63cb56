//go:build linux

package main

import (
	"bytes"
	"crypto/sha256"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"unsafe"

	"github.com/flowrun/flowrun/llm/llmtest"
)

// openPTY opens a pseudo-terminal whose output is passed on as written
// (no "\n" to "\r\n"), so that every byte read from master is one flowrun
// wrote.
func openPTY(t *testing.T) (master, slave *os.File) {
	t.Helper()
	master, err := os.OpenFile("/dev/ptmx", os.O_RDWR|syscall.O_NOCTTY, 0)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { master.Close() })
	ioctl := func(f *os.File, req uintptr, arg unsafe.Pointer) {
		t.Helper()
		if _, _, errno := syscall.Syscall(syscall.SYS_IOCTL, f.Fd(), req, uintptr(arg)); errno != 0 {
			t.Fatalf("ioctl %#x: %v", req, errno)
		}
	}
	var unlock int32
	ioctl(master, syscall.TIOCSPTLCK, unsafe.Pointer(&unlock))
	var n uint32
	ioctl(master, syscall.TIOCGPTN, unsafe.Pointer(&n))
	slave, err = os.OpenFile(fmt.Sprintf("/dev/pts/%d", n), os.O_RDWR|syscall.O_NOCTTY, 0)
	if err != nil {
		t.Fatal(err)
	}
	var tio syscall.Termios
	ioctl(slave, syscall.TCGETS, unsafe.Pointer(&tio))
	tio.Oflag &^= syscall.OPOST
	ioctl(slave, syscall.TCSETS, unsafe.Pointer(&tio))
	return master, slave
}

// hostile is what a model answers and sandboxed code prints: it would
// retitle the terminal, clear it and overwrite a line.
const hostile = "hello \x1b]0;pwned\x07 then \x1b[2J wiped\rover \u009b31m end"

// TestHardening08TerminalSanitised: a model reply and a code node's
// stdout full of control characters show as escapes in the live view on
// a terminal and in flowrun show, never as the raw bytes; show --json
// keeps the raw text, escaped as JSON.
func TestHardening08TerminalSanitised(t *testing.T) {
	needPython(t)
	srv := llmtest.New(t)
	srv.Handle(func(llmtest.Request) llmtest.Reply { return llmtest.Text(hostile) })
	dir := t.TempDir()
	db := filepath.Join(dir, "runs.db")
	p := writeFile(t, dir, "term.yaml", `
version: 1
name: term
models: {default: {model: gpt-4.1-mini}}
nodes:
  - id: ask
    llm: {prompt: "say something"}
  - id: shout
    code:
      source: |
        def f():
            print("code \x1b]0;pwned\x07 then \x1b[2J wiped\rover")
            return 1
      call: f
outputs: {text: nodes.ask.text}
`)
	master, slave := openPTY(t)
	cmd := flowrunProcess(t, []string{"OPENAI_BASE_URL=" + srv.URL, "OPENAI_API_KEY=sk-terminal-test"}, "run", p, "--store", db)
	var stdout bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, slave
	var live bytes.Buffer
	read := make(chan struct{})
	go func() {
		defer close(read)
		_, _ = io.Copy(&live, master) // ends with EIO once no process holds the slave
	}()
	err := cmd.Run()
	slave.Close()
	<-read
	if err != nil {
		t.Fatalf("flowrun run: %v\n%s", err, live.String())
	}
	if !strings.Contains(live.String(), "... ask: hello ") {
		t.Fatalf("the reply was not streamed to the terminal, so the test proves nothing:\n%q", live.String())
	}
	checkPrintable(t, "the live view", live.String(), `hello \x1b]0;pwned\x07 then \x1b[2J wiped\x0dover \u009b31m end`)

	var run string
	for _, c := range durDumpStore(t, db) {
		if c.table == "runs" && c.column == "id" {
			run = c.text
		}
	}
	shown := durShow(t, db, run)
	checkPrintable(t, "show", shown, `hello \x1b]0;pwned\x07 then \x1b[2J wiped\x0dover \u009b31m end`)
	checkPrintable(t, "show", shown, `code \x1b]0;pwned\x07 then \x1b[2J wiped\x0dover`)

	raw := durShow(t, db, run, "--json")
	var doc struct {
		Events []struct {
			Type string `json:"type"`
			Turn *struct {
				Reply struct {
					Text string `json:"text"`
				} `json:"reply"`
			} `json:"turn"`
			Output map[string]any `json:"output"`
		} `json:"events"`
	}
	if err := json.Unmarshal([]byte(raw), &doc); err != nil {
		t.Fatalf("show --json is not JSON: %v\n%s", err, raw)
	}
	var reply, printed string
	for _, e := range doc.Events {
		if e.Turn != nil {
			reply = e.Turn.Reply.Text
		}
		if e.Type == "sandbox_run" {
			printed, _ = e.Output["stdout"].(string)
		}
	}
	if reply != hostile || !strings.Contains(printed, "code \x1b]0;pwned\x07 then \x1b[2J wiped\rover") {
		t.Fatalf("show --json does not keep the raw text: reply %q, stdout %q", reply, printed)
	}
}

// checkPrintable fails unless out holds want and no control character
// but newline and tab.
func checkPrintable(t *testing.T, what, out, want string) {
	t.Helper()
	if !strings.Contains(out, want) {
		t.Errorf("%s does not show %s:\n%s", what, want, out)
	}
	for i, r := range out {
		if (r < 0x20 && r != '\n' && r != '\t') || r == 0x7f || (r >= 0x80 && r <= 0x9f) {
			t.Fatalf("%s has the raw control character %U at byte %d:\n%q", what, r, i, out)
		}
	}
}

// TestHardening13RunsReadOnlyStore: runs, show and snapshots read a store
// whose file and directory flowrun may not write (chmod -w), and write
// nothing there. As root, which ignores file modes, the commands run as
// the user nobody; otherwise as the test's own user.
func TestHardening13RunsReadOnlyStore(t *testing.T) {
	dir := t.TempDir()
	storeDir := filepath.Join(dir, "store")
	if err := os.Mkdir(storeDir, 0o755); err != nil {
		t.Fatal(err)
	}
	db := filepath.Join(storeDir, "runs.db")
	p := writeFile(t, dir, "count.yaml", "version: 1\nname: count\nstate: {x: 0}\nnodes:\n  - id: a\n    set: {x: 1}\noutputs: {x: state.x}\n")
	if code, _, stderr := runDurProc(t, nil, "run", p, "--store", db); code != exitOK {
		t.Fatalf("exit %d\n%s", code, stderr)
	}
	run := durRunOfPipeline(t, db)
	if code, _, stderr := runDurProc(t, nil, "snapshot", run, "--label", "kept", "--store", db); code != exitOK {
		t.Fatalf("exit %d\n%s", code, stderr)
	}
	if err := os.RemoveAll(db + ".journal"); err != nil {
		t.Fatal(err)
	}
	before := dirState(t, storeDir)

	// The binary, copied where another user may run it.
	bin := filepath.Join(dir, "flowrun.test")
	exe, err := os.ReadFile(os.Args[0])
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(bin, exe, 0o755); err != nil {
		t.Fatal(err)
	}
	// t.TempDir is two directories of the test's own, private to it.
	for _, d := range []string{dir, filepath.Dir(dir)} {
		if err := os.Chmod(d, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.Chmod(db, 0o444); err != nil {
		t.Fatal(err)
	}
	if err := os.Chmod(storeDir, 0o555); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = os.Chmod(storeDir, 0o755) })

	reader := func(args ...string) (int, string, string) {
		t.Helper()
		cmd := exec.Command(bin, append(args, "--store", db)...)
		cmd.Env = append(os.Environ(), "FLOWRUN_TEST_AS_CLI=1", "GORACE=atexit_sleep_ms=0")
		if os.Geteuid() == 0 {
			cmd.SysProcAttr = &syscall.SysProcAttr{Credential: &syscall.Credential{Uid: 65534, Gid: 65534}}
		}
		var stdout, stderr bytes.Buffer
		cmd.Stdout, cmd.Stderr = &stdout, &stderr
		err := cmd.Run()
		var ee *exec.ExitError
		if err != nil && !errors.As(err, &ee) {
			t.Fatal(err)
		}
		return cmd.ProcessState.ExitCode(), stdout.String(), stderr.String()
	}
	// A write proves the store is out of the reader's reach.
	if code, _, stderr := reader("snapshot", run, "--label", "refused"); code == exitOK || !strings.Contains(stderr, "readonly") {
		t.Fatalf("the reader could write to the store (exit %d), so the test proves nothing:\n%s", code, stderr)
	}
	for _, args := range [][]string{{"runs"}, {"runs", "--json"}, {"show", run}, {"show", run, "--json"}, {"snapshots", run}} {
		code, stdout, stderr := reader(args...)
		if code != exitOK || !strings.Contains(stdout, run) && !strings.Contains(stdout, "kept") {
			t.Errorf("flowrun %s on a read-only store: exit %d\n%s%s", strings.Join(args, " "), code, stdout, stderr)
		}
		if args[0] == "show" && !strings.Contains(stdout, "completed") {
			t.Errorf("flowrun %s does not show the run:\n%s", strings.Join(args, " "), stdout)
		}
	}
	if after := dirState(t, storeDir); after != before {
		t.Errorf("reading changed the store's directory:\nbefore %s\nafter  %s", before, after)
	}
}

// dirState names each file of a directory with its size and sha256.
func dirState(t *testing.T, dir string) string {
	t.Helper()
	entries, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, e := range entries {
		b, err := os.ReadFile(filepath.Join(dir, e.Name()))
		if err != nil {
			t.Fatal(err)
		}
		out = append(out, fmt.Sprintf("%s:%d:%x", e.Name(), len(b), sha256.Sum256(b)))
	}
	return strings.Join(out, " ")
}
