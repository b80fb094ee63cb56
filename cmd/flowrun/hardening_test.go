package main

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/flowrun/flowrun/llm/llmtest"
)

// hardeningKey is an API key no other text in a run contains any four
// characters of: letters that are not hex digits, in no English order.
const hardeningKey = "sk-QZXJVKWQZPXJKVQWZXPJQKVWZXJQPKVWMZ"

// keyPieces are the substrings of hardeningKey of four or more characters.
func keyPieces() []string {
	var out []string
	for i := range hardeningKey {
		for j := i + 4; j <= len(hardeningKey); j++ {
			out = append(out, hardeningKey[i:j])
		}
	}
	return out
}

// leakedPiece is the longest piece of the key in text, "" if none.
func leakedPiece(text string) string {
	best := ""
	for _, p := range keyPieces() {
		if len(p) > len(best) && strings.Contains(text, p) {
			best = p
		}
	}
	return best
}

// bodyCut is how much of an error response's body the client reads.
const bodyCut = 64 << 10

// TestHardening05RedactBeforeTruncate: a server that echoes the API key in
// its error message, after padding that puts the key at every offset
// around the 300-character cut and the 64 KiB cut of the body, leaves no piece of the key (four
// characters or more) in stderr, the cassette, the JSON events, the
// store's rows and files, or show and show --json.
func TestHardening05RedactBeforeTruncate(t *testing.T) {
	srv := llmtest.New(t)
	srv.Handle(func(r llmtest.Request) llmtest.Reply {
		msgs, _ := r.Body["messages"].([]any)
		last, _ := msgs[len(msgs)-1].(map[string]any)
		text, _ := last["content"].(string)
		pad, err := strconv.Atoi(strings.TrimPrefix(text, "pad "))
		if err != nil {
			return llmtest.Error(400, "no pad in "+text)
		}
		if pad >= bodyCut-len(hardeningKey)-16 {
			// Past the 300-character cut: a plain-text body that puts the
			// key across the 64 KiB cut on reading it.
			return llmtest.Reply{Status: 400, Body: strings.Repeat(" ", pad) + r.Header.Get("Authorization") + " is not valid.", Header: map[string]string{"Content-Type": "text/plain"}}
		}
		return llmtest.Error(401, "Incorrect API key provided: "+strings.Repeat("x", pad)+r.Header.Get("Authorization")+" is not valid.")
	})
	dir := t.TempDir()
	db := filepath.Join(dir, "runs.db")
	// The 401's detail is cut at 300 characters; the key starts after
	// "Incorrect API key provided: " (28), the padding and "Bearer " (7).
	first, last := 300-28-7-len(hardeningKey)-2, 300-28-7+2
	// A plain-text error body is read up to 64 KiB; the key starts after
	// the padding and "Bearer " (7).
	bigFirst, bigLast := bodyCut-7-len(hardeningKey)-1, bodyCut-7+1
	p := writeFile(t, dir, "echo.yaml", fmt.Sprintf(`
version: 1
name: echo
models: {default: {model: gpt-4.1-mini}}
nodes:
  - id: each
    map:
      over: 'concat(%d..%d, %d..%d)'
      max_concurrency: 4
      body:
        - id: ask
          llm: {prompt: "pad ${{ item }}"}
          on_error: continue
outputs: {answers: nodes.each}
`, first, last, bigFirst, bigLast))
	env := []string{"OPENAI_BASE_URL=" + srv.URL, "OPENAI_API_KEY=" + hardeningKey}
	cassette := filepath.Join(dir, "echo.cassette.yaml")

	var outputs []string
	step := func(args ...string) string {
		t.Helper()
		code, stdout, stderr := runDurProc(t, env, append(args, "--store", db)...)
		if code != exitOK {
			t.Fatalf("flowrun %s: exit %d\n%s", strings.Join(args, " "), code, stderr)
		}
		outputs = append(outputs, stdout, stderr)
		return stdout + stderr
	}
	out := step("run", p, "--record", cassette)
	if !strings.Contains(out, "Incorrect API key provided: xxx") {
		t.Fatalf("the echoed error is not shown, so the test proves nothing:\n%s", out)
	}
	step("run", p, "--json")
	run := durRunOfPipeline(t, db)
	step("show", run)
	step("show", run, "--json")
	step("runs", "--json")
	if n, want := srv.Calls(), 2*(last-first+1+bigLast-bigFirst+1); n != want {
		t.Fatalf("%d requests, want %d", n, want)
	}

	for i, out := range outputs {
		if piece := leakedPiece(out); piece != "" {
			t.Errorf("output %d holds %q of the key:\n%s", i, piece, out)
		}
	}
	rec, err := os.ReadFile(cassette)
	if err != nil {
		t.Fatal(err)
	}
	if piece := leakedPiece(string(rec)); piece != "" {
		t.Errorf("the cassette holds %q of the key", piece)
	}
	if !bytes.Contains(rec, []byte("[redacted]")) {
		t.Error("the cassette shows no redaction: the key never reached it")
	}
	sawRedacted := false
	for _, c := range durDumpStore(t, db) {
		if piece := leakedPiece(c.text); piece != "" {
			t.Errorf("table %s, row %d, column %s holds %q of the key", c.table, c.row, c.column, piece)
		}
		sawRedacted = sawRedacted || strings.Contains(c.text, "[redacted]")
	}
	if !sawRedacted {
		t.Error("no row of the store shows a redaction: the key never reached it")
	}
	for _, suffix := range []string{"", "-wal", "-shm"} {
		raw, err := os.ReadFile(db + suffix)
		if errors.Is(err, os.ErrNotExist) {
			continue
		}
		if err != nil {
			t.Fatal(err)
		}
		if piece := leakedPiece(string(raw)); piece != "" {
			t.Errorf("the bytes of %s hold %q of the key", filepath.Base(db+suffix), piece)
		}
	}
}

// durRunOfPipeline is the id of the first run in the store.
func durRunOfPipeline(t *testing.T, db string) string {
	t.Helper()
	runs := durDumpStore(t, db)
	for _, c := range runs {
		if c.table == "runs" && c.column == "id" {
			return c.text
		}
	}
	t.Fatal("no run in the store")
	return ""
}

// TestHardening10StoreTruncatedMidRun truncates the database file while a
// run writes to it, in a new store (everything still in the WAL, so SQLite
// itself notices nothing) and in one with history (SQLite finds pages
// gone). The run stops at its next checkpoint and fails, naming the store
// and what happened to it; it never says completed.
func TestHardening10StoreTruncatedMidRun(t *testing.T) {
	const nodes = 20
	var b strings.Builder
	b.WriteString("version: 1\nname: slow\nmodels: {default: {model: gpt-4.1-mini}}\nnodes:\n")
	for i := range nodes {
		fmt.Fprintf(&b, "  - id: n%d\n    llm: {prompt: \"@n%d hello\"}\n", i, i)
	}
	for _, history := range []bool{false, true} {
		t.Run(fmt.Sprintf("history=%v", history), func(t *testing.T) {
			dir := t.TempDir()
			p := writeFile(t, dir, "slow.yaml", b.String())
			db := filepath.Join(dir, "runs.db")
			model := newDurModel(t)
			if history {
				for range 2 {
					if code, _, stderr := runDurProc(t, model.env("sk-before"), "run", p, "--store", db); code != exitOK {
						t.Fatalf("the run before: exit %d\n%s", code, stderr)
					}
				}
			}
			model.hook("sk-slow", func(int, string) llmtest.Reply { return llmtest.Reply{Delay: 40 * time.Millisecond} })
			proc := startDurProc(t, model.env("sk-slow"), "run", p, "--store", db)
			deadline := time.Now().Add(durDeadline)
			for len(model.paths("sk-slow")) < 5 {
				if time.Now().After(deadline) {
					t.Fatalf("the run made no progress:\n%s", proc.abort())
				}
				time.Sleep(2 * time.Millisecond)
			}
			if err := os.Truncate(db, 0); err != nil {
				t.Fatal(err)
			}
			truncatedAt := len(model.paths("sk-slow"))
			code := proc.wait()
			stderr := proc.stderr()
			if code != exitFailed {
				t.Fatalf("exit %d, want %d\n%s", code, exitFailed, stderr)
			}
			if !strings.Contains(stderr, "failed: recording the run: run store "+db+": the database file was truncated") {
				t.Errorf("the failure does not name the store and what happened:\n%s", stderr)
			}
			if strings.Contains(stderr, "completed") || strings.Contains(proc.stdout(), "{") {
				t.Errorf("the run reports completion or outputs:\n%s\nstdout: %s", stderr, proc.stdout())
			}
			if strings.Contains(stderr, "flowrun resume") {
				t.Errorf("a resume from a damaged store is suggested:\n%s", stderr)
			}
			// Detected at the next commit, at most a group delay later:
			// the node in flight finishes, none after it starts.
			if n := len(model.paths("sk-slow")); n > truncatedAt+2 {
				t.Errorf("%d model calls after the truncation: the run went on", n-truncatedAt)
			}
		})
	}
}

// TestHardening13CodeOutputStoredOnce runs a code node whose stdout is 3
// MB. Its output is in its sandbox_run event, its node_finished event and
// its checkpoint, and the loop around it repeats it in its own checkpoint;
// the database grows by about one copy, and show --json still has it whole.
func TestHardening13CodeOutputStoredOnce(t *testing.T) {
	needPython(t)
	const size = 3 << 20
	dir := t.TempDir()
	db := filepath.Join(dir, "runs.db")
	small := writeFile(t, dir, "small.yaml", "version: 1\nname: small\nstate: {x: 0}\nnodes:\n  - id: a\n    set: {x: 1}\n")
	if code, _, stderr := runDurProc(t, nil, "run", small, "--store", db); code != exitOK {
		t.Fatalf("exit %d\n%s", code, stderr)
	}
	before := fileSize(t, db)
	p := writeFile(t, dir, "big.yaml", fmt.Sprintf(`
version: 1
name: big
nodes:
  - id: once
    loop:
      max_iterations: 1
      body:
        - id: shout
          code:
            source: |
              def f():
                  print("x" * %d, end="")
                  return 1
            call: f
            limits: {max_output_kb: 4096}
outputs: {ok: nodes.shout.ok}
`, size))
	if code, _, stderr := runDurProc(t, nil, "run", p, "--store", db); code != exitOK {
		t.Fatalf("exit %d\n%s", code, stderr)
	}
	grew := fileSize(t, db) - before
	t.Logf("the database grew by %d bytes for a %d-byte output", grew, size)
	if grew > size*3/2 {
		t.Errorf("the database grew by %d bytes for one %d-byte output: it is stored more than once", grew, size)
	}

	var run string
	for _, c := range durDumpStore(t, db) {
		if c.table == "runs" && c.column == "pipeline_name" && c.text == "big" {
			run = durDumpRunID(t, db, c.row)
		}
	}
	raw := durShow(t, db, run, "--json")
	var doc struct {
		Events []struct {
			Type   string         `json:"type"`
			Path   string         `json:"path"`
			Output map[string]any `json:"output"`
		} `json:"events"`
	}
	if err := json.Unmarshal([]byte(raw), &doc); err != nil {
		t.Fatal(err)
	}
	whole := 0
	for _, e := range doc.Events {
		if out, _ := e.Output["stdout"].(string); len(out) == size && e.Path == "once[1]/shout" {
			whole++
		}
	}
	if whole != 2 {
		t.Errorf("%d events hold the whole stdout, want 2 (sandbox_run and node_finished)", whole)
	}
}

// durShow is what flowrun show prints for a run.
func durShow(t *testing.T, db, run string, flags ...string) string {
	t.Helper()
	code, stdout, stderr := runDurProc(t, nil, append([]string{"show", run, "--store", db}, flags...)...)
	if code != exitOK {
		t.Fatalf("show %v: exit %d\n%s", flags, code, stderr)
	}
	return stdout
}

// fileSize is the size of a database file and its WAL.
func fileSize(t *testing.T, db string) int64 {
	t.Helper()
	var n int64
	for _, suffix := range []string{"", "-wal"} {
		fi, err := os.Stat(db + suffix)
		if errors.Is(err, os.ErrNotExist) {
			continue
		}
		if err != nil {
			t.Fatal(err)
		}
		n += fi.Size()
	}
	return n
}

// durDumpRunID is the id of the row-th run in durDumpStore's order.
func durDumpRunID(t *testing.T, db string, row int) string {
	t.Helper()
	for _, c := range durDumpStore(t, db) {
		if c.table == "runs" && c.column == "id" && c.row == row {
			return c.text
		}
	}
	t.Fatalf("no run row %d", row)
	return ""
}
