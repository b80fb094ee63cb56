//go:build unix

package nodes_test

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/flowrun/flowrun/internal/confined/confinedtest"
	"github.com/flowrun/flowrun/llm"
	"github.com/flowrun/flowrun/llm/llmtest"
)

// TestHostileReadFileCalls is the hostile corpus for the read_file tool: a
// model asks for a named pipe, a directory, paths out of the directory,
// and, many times, a file that is being swapped for a link to a secret
// outside. Every call gets an answer at once, and no answer holds the
// secret.
func TestHostileReadFileCalls(t *testing.T) {
	const swaps = 200
	calls := []llmtest.ToolCall{
		llmtest.Call("read_file", map[string]any{"path": "pipe"}),
		llmtest.Call("read_file", map[string]any{"path": "."}),
		llmtest.Call("read_file", map[string]any{"path": "../secret.txt"}),
		llmtest.Call("read_file", map[string]any{"path": "link"}),
	}
	for range swaps {
		calls = append(calls, llmtest.Call("read_file", map[string]any{"path": "swapped"}))
	}
	srv := llmtest.New(t)
	srv.Push(llmtest.Calls(calls...), llmtest.Calls(llmtest.Call("answer", map[string]any{"answer": "done"})))
	p := load(t, agentTools+`
nodes:
  - id: solve
    agent: {prompt: Read., tools: [read_file], finish: [answer], max_steps: 3}
`, agentFiles)
	outside := filepath.Dir(p.Dir)
	if err := os.WriteFile(filepath.Join(outside, "secret.txt"), []byte("SECRET"), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := syscall.Mkfifo(filepath.Join(p.Dir, "pipe"), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink("../secret.txt", filepath.Join(p.Dir, "link")); err != nil {
		t.Fatal(err)
	}
	swapped := filepath.Join(p.Dir, "swapped")
	if err := os.WriteFile(swapped, []byte("inside"), 0o644); err != nil {
		t.Fatal(err)
	}
	stop := confinedtest.SwapWithLink(swapped, "../secret.txt", "inside")
	start := time.Now()
	res, _ := run(t, p, modelKinds(srv, llm.Options{}), nil)
	stop()
	mustComplete(t, res)
	if d := time.Since(start); d > 30*time.Second {
		t.Errorf("the run took %s", d)
	}
	replies := toolReplies(t, srv.Requests()[1])
	want := map[string]string{
		"call_1_1": `read_file "pipe": not a regular file (a named pipe)`,
		"call_1_2": `read_file ".": not a regular file (a directory)`,
		"call_1_3": `read_file "../secret.txt": path escapes the pipeline directory`,
		"call_1_4": `read_file "link": path escapes the pipeline directory`,
	}
	for id, msg := range want {
		if got := asJSON(t, replies[id]); got != asJSON(t, map[string]any{"error": msg}) {
			t.Errorf("%s: %s, want the error %q", id, got, msg)
		}
	}
	for i := range swaps {
		if got := fmt.Sprint(replies[fmt.Sprintf("call_1_%d", i+5)]); strings.Contains(got, "SECRET") {
			t.Fatalf("call %d read the file outside: %s", i+5, got)
		}
	}
}
