package main

import (
	"path/filepath"
	"strings"
	"testing"

	"github.com/flowrun/flowrun/llm/llmtest"
)

// TestRunStreamFlag: --stream shows the model's text under the live line
// as it arrives, from a streamed request; --stream=false, and a stderr
// that is no terminal, show the finished turn only and ask for a plain
// reply. What is checkpointed is the same either way.
func TestRunStreamFlag(t *testing.T) {
	fake := llmtest.New(t)
	t.Setenv("OPENAI_BASE_URL", fake.URL)
	t.Setenv("OPENAI_API_KEY", "sk-test")
	dir := t.TempDir()
	writeFile(t, dir, "chat.yaml", strings.Replace(secretPipeline, "env: [SERVICE_TOKEN]\n", "", 1))
	for _, c := range []struct {
		flags  []string
		stream bool
	}{{[]string{"--stream"}, true}, {[]string{"--stream=false"}, false}, {nil, false}} {
		fake.Push(llmtest.Text("words arriving one by one"))
		args := append([]string{"run", "--store", filepath.Join(dir, "runs.db")}, c.flags...)
		code, stdout, stderr := flowrun(t, append(args, filepath.Join(dir, "chat.yaml"))...)
		if code != exitOK || !strings.Contains(stdout, `"text": "words arriving one by one"`) {
			t.Fatalf("%v: exit %d, stdout %s\n%s", c.flags, code, stdout, stderr)
		}
		if got := strings.Contains(stderr, "  ... reply: words arriving one by one\n"); got != c.stream {
			t.Errorf("%v: streamed text shown %v, want %v:\n%s", c.flags, got, c.stream, stderr)
		}
		if got := fake.Last().Stream; got != c.stream {
			t.Errorf("%v: request streamed %v, want %v", c.flags, got, c.stream)
		}
	}
	if code, _, stderr := flowrun(t, "run", "--stream=maybe", filepath.Join(dir, "chat.yaml")); code != exitInvalid || !strings.Contains(stderr, "-stream: give true or false") {
		t.Errorf("--stream=maybe: exit %d\n%s", code, stderr)
	}
}
