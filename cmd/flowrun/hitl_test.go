package main

import (
	"bytes"
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
)

// flowrunWithInput runs the CLI in-process with stdin.
func flowrunWithInput(t *testing.T, stdin string, args ...string) (code int, stdout, stderr string) {
	t.Helper()
	var out, errb bytes.Buffer
	code = cli(context.Background(), args, strings.NewReader(stdin), &out, &errb)
	return code, out.String(), errb.String()
}

// askPipeline counts to 5, asks who is there and confirms a last step;
// engine's tests of the same runs use it too.
func askPipeline(t *testing.T) string { return engineTestdata(t, "count.yaml") }

// stepsPipeline counts to 3 and asks whether to go on; engine's tests of
// the same runs use it too.
func stepsPipeline(t *testing.T) string { return engineTestdata(t, "steps.yaml") }

// engineTestdata is the text of a file under engine's testdata.
func engineTestdata(t *testing.T, name string) string {
	t.Helper()
	b, err := os.ReadFile(filepath.Join("..", "..", "engine", "testdata", name))
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

var resumeRE = regexp.MustCompile(`flowrun resume (\S+)`)

// waitingRun checks that a run ended waiting, with the command that
// continues it, and returns the run id.
func waitingRun(t *testing.T, code int, stderr, want string) string {
	t.Helper()
	if code != exitOK || !strings.Contains(stderr, want) {
		t.Fatalf("exit %d, want 0 and %q in:\n%s", code, want, stderr)
	}
	m := resumeRE.FindStringSubmatch(stderr)
	if m == nil {
		t.Fatalf("no resume command in:\n%s", stderr)
	}
	return m[1]
}

func outputsOf(t *testing.T, stdout string) map[string]any {
	t.Helper()
	var out map[string]any
	if err := json.Unmarshal([]byte(stdout), &out); err != nil {
		t.Fatalf("stdout is not the outputs: %v\n%s", err, stdout)
	}
	return out
}

// TestAskWithoutTerminalWaitsThenResumeWithAnswer: what run and resume
// --answer print and exit with as a run waits, is refused an answer and
// goes on. The behaviour (the store, what runs again) is engine's
// TestAskWaitsThenAnswersGoOnWhereItStopped.
func TestAskWithoutTerminalWaitsThenResumeWithAnswer(t *testing.T) {
	p := writeFile(t, t.TempDir(), "ask.yaml", askPipeline(t))
	code, _, stderr := flowrunWithInput(t, "", p)
	run := waitingRun(t, code, stderr, "is waiting for an answer (name): Counted to 5. Who are you?")
	if !strings.Contains(stderr, "flowrun resume "+run+" --answer age=... --answer who=...") {
		t.Fatalf("the exact command to continue is missing:\n%s", stderr)
	}
	// A wrong answer is refused before anything runs.
	code, _, stderr = flowrunWithInput(t, "", "resume", run, "--answer", "who=ann", "--answer", "age=old")
	if code != exitInvalid || !strings.Contains(stderr, "age: not JSON") {
		t.Fatalf("exit %d:\n%s", code, stderr)
	}
	code, _, stderr = flowrunWithInput(t, "", "resume", run, "--answer", "who=ann", "--answer", "age=7")
	waitingRun(t, code, stderr, "running careful needs your confirmation")
	if !strings.Contains(stderr, "done  rounds") {
		t.Fatalf("the finished loop must be restored, not run again:\n%s", stderr)
	}
	code, stdout, stderr := flowrunWithInput(t, "", "resume", run, "--answer", "yes")
	if code != exitOK {
		t.Fatalf("exit %d:\n%s", code, stderr)
	}
	if out := outputsOf(t, stdout); out["n"] != 500.0 || out["who"] != "ann" {
		t.Fatalf("outputs %v", out)
	}
}

func TestAskOnTerminal(t *testing.T) {
	t.Setenv("FLOWRUN_INTERACTIVE", "1")
	p := writeFile(t, t.TempDir(), "ask.yaml", askPipeline(t))
	// A bad answer is asked again; then the confirmation is accepted.
	code, stdout, stderr := flowrunWithInput(t, "age=3\nwho=bea age=3\ny\n", p)
	if code != exitOK {
		t.Fatalf("exit %d:\n%s", code, stderr)
	}
	if out := outputsOf(t, stdout); out["who"] != "bea" || out["n"] != 500.0 {
		t.Fatalf("outputs %v", out)
	}
	if !strings.Contains(stderr, "? Counted to 5. Who are you?") || !strings.Contains(stderr, "not a valid answer") || !strings.Contains(stderr, "? run careful?") {
		t.Fatalf("prompts:\n%s", stderr)
	}
}

// Answering no to a confirmation at the terminal stops the run (exit 1,
// no outputs) with the command that continues it, in the run's output
// and in show; a bare resume asks again; resume --answer yes completes.
// What the store keeps and what runs again is engine's
// TestDeclinedConfirmationStopsAndYesRuns.
func TestHITL01ConfirmDeclinedStopsRun(t *testing.T) {
	t.Setenv("FLOWRUN_INTERACTIVE", "1")
	dir := t.TempDir()
	db := filepath.Join(dir, "runs.db")
	p := writeFile(t, dir, "ask.yaml", askPipeline(t))
	code, stdout, stderr := flowrunWithInput(t, "who=cy\nn\n", p, "--store", db)
	if code != exitFailed || stdout != "" || !strings.Contains(stderr, "stopped: running careful was declined") {
		t.Fatalf("exit %d, want 1, no outputs and the decline named:\n%s%s", code, stdout, stderr)
	}
	m := resumeRE.FindStringSubmatch(stderr)
	if m == nil || !strings.Contains(stderr, "To continue: flowrun resume "+m[1]+" --answer yes") {
		t.Fatalf("no resume hint:\n%s", stderr)
	}
	run := m[1]
	if _, text, _ := flowrunWithInput(t, "", "show", run, "--store", db); !strings.Contains(text, "to continue: flowrun resume "+run+" --answer yes") {
		t.Fatalf("show does not say how to continue:\n%s", text)
	}
	// Declined again at the terminal: stopped again, nothing lost.
	code, _, stderr = flowrunWithInput(t, "n\n", "resume", run, "--store", db)
	if code != exitFailed || !strings.Contains(stderr, "declined") {
		t.Fatalf("resume declined again: exit %d\n%s", code, stderr)
	}
	t.Setenv("FLOWRUN_INTERACTIVE", "")
	code, stdout, stderr = flowrunWithInput(t, "", "resume", run, "--answer", "yes", "--store", db)
	if code != exitOK {
		t.Fatalf("exit %d:\n%s", code, stderr)
	}
	if out := outputsOf(t, stdout); out["who"] != "cy" || out["n"] != 500.0 {
		t.Fatalf("outputs %v", out)
	}
}

// TestAutoWithMaxLoops: --auto and --max-loops reach the run, and the
// capped loop is reported. That an ask without a default still waits
// under auto is engine's TestAutoCapsLoopsAndAnswersDefaults.
func TestAutoWithMaxLoops(t *testing.T) {
	p := writeFile(t, t.TempDir(), "ask.yaml", askPipeline(t))
	code, stdout, stderr := flowrunWithInput(t, "", p, "--auto", "--max-loops", "2")
	if code != exitOK {
		t.Fatalf("exit %d:\n%s", code, stderr)
	}
	// Two iterations, the ask's default, the confirmation accepted.
	if out := outputsOf(t, stdout); out["n"] != 200.0 || out["who"] != "nobody" {
		t.Fatalf("outputs %v", out)
	}
	if !strings.Contains(stderr, "the run's max loops (2)") {
		t.Fatalf("the capped loop is not reported:\n%s", stderr)
	}
}

// TestSnapshotCommands: what snapshot, resume --from, rollback and
// snapshots print and exit with. What they do to the runs (a fork
// leaves its parent as it was, a rollback runs nothing and a resume
// after it runs no finished node again) is engine's
// TestSnapshotRollbackAndFork.
func TestSnapshotCommands(t *testing.T) {
	dir := t.TempDir()
	store := filepath.Join(dir, "runs.db")
	p := writeFile(t, dir, "p.yaml", stepsPipeline(t))
	code, _, stderr := flowrunWithInput(t, "", p, "--store", store)
	run := waitingRun(t, code, stderr, "is waiting for an answer")
	code, stdout, stderr := flowrunWithInput(t, "", "snapshot", run, "--label", "before-answer", "--store", store)
	if code != exitOK || !strings.Contains(stdout, "at checkpoint 4") {
		t.Fatalf("exit %d %s %s", code, stdout, stderr)
	}
	if code, _, stderr = flowrunWithInput(t, "", "snapshot", run, "--label", "before-answer", "--store", store); code != exitFailed || !strings.Contains(stderr, "immutable") {
		t.Fatalf("a label is used once: exit %d %s", code, stderr)
	}
	code, stdout, _ = flowrunWithInput(t, "", "resume", run, "--answer", "true", "--store", store)
	if out := outputsOf(t, stdout); code != exitOK || out["n"] != 30.0 || out["more"] != true {
		t.Fatalf("exit %d outputs %v", code, out)
	}
	code, _, stderr = flowrunWithInput(t, "", "resume", run, "--from", "before-answer", "--store", store)
	if fork := waitingRun(t, code, stderr, "is waiting for an answer"); fork == run {
		t.Fatal("a fork is a new run")
	}
	code, stdout, _ = flowrunWithInput(t, "", "rollback", run, "before-answer", "--store", store)
	if code != exitOK || !strings.Contains(stdout, "rolled back to checkpoint 4") {
		t.Fatalf("exit %d %s", code, stdout)
	}
	_, stdout, _ = flowrunWithInput(t, "", "snapshots", run, "--store", store)
	if !strings.Contains(stdout, "rollback-to-before-answer") {
		t.Fatalf("no rollback snapshot:\n%s", stdout)
	}
	code, _, stderr = flowrunWithInput(t, "", "resume", run, "--store", store)
	waitingRun(t, code, stderr, "is waiting for an answer")
}

func showJSON(t *testing.T, store, run string) map[string]any {
	t.Helper()
	args := []string{"show", run, "--json"}
	if store != "" {
		args = append(args, "--store", store)
	}
	code, stdout, stderr := flowrunWithInput(t, "", args...)
	if code != exitOK {
		t.Fatalf("show: exit %d %s", code, stderr)
	}
	return outputsOf(t, stdout)
}

func jsonEqual(a, b any) bool {
	x, _ := json.Marshal(a)
	y, _ := json.Marshal(b)
	return bytes.Equal(x, y)
}
