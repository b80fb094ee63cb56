package main

import (
	"encoding/json"
	"flag"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/flowrun/flowrun/llm/llmtest"
)

var recordCassettes = flag.Bool("record-cassettes", false, "re-record the shipped pipelines' cassettes against the scripted fake model")

// shipped lists the shipped pipelines that call models. Each has a cassette
// beside it, recorded against the fake model scripted here (this project's
// machines reach no model API), and golden outputs in testdata/shipped.
var shipped = []struct {
	pipeline string
	args     []string
	reply    func(llmtest.Request) llmtest.Reply
}{
	{"triage.yaml", nil, triageModel},
	{"default_refine.yaml", nil, refineModel},
	{"single_pair.yaml", nil, singlePairModel},
	{"augmented.yaml", nil, augmentedModel},
	{"approach_proposer.yaml", []string{"--auto"}, proposerModel},
	{"sir.yaml", nil, sirModel},
	{"parallel_validate.yaml", nil, parallelValidateModel},
	{"arc_evolve.yaml", nil, arcEvolveModel},
}

// triageModel answers the triage pipeline's calls: the classification,
// then the agent's read_file call and its answer.
func triageModel(r llmtest.Request) llmtest.Reply {
	usage := llmtest.Usage{Prompt: 120, Completion: 30}
	if _, structured := r.Body["response_format"]; structured {
		return llmtest.Reply{Text: `{"category":"billing","urgent":false}`, Usage: usage}
	}
	if !strings.Contains(string(r.Raw), "# Billing") {
		return llmtest.Reply{ToolCalls: []llmtest.ToolCall{llmtest.Call("read_file", map[string]any{"path": "kb/billing.md"})}, Usage: usage}
	}
	return llmtest.Reply{ToolCalls: []llmtest.ToolCall{llmtest.Call("answer", map[string]any{
		"reply":  "Sorry about that! The duplicate charge on INV-0342 will be refunded in full within 5 business days.",
		"refund": true,
	})}, Usage: usage}
}

// TestShippedPipelinesReplayOffline runs every shipped model pipeline the
// way the README does on a fresh machine: no key, no endpoint, so flowrun
// replays the cassette beside it.
func TestShippedPipelinesReplayOffline(t *testing.T) {
	for _, s := range shipped {
		t.Run(s.pipeline, func(t *testing.T) {
			path := filepath.Join("..", "..", "pipelines", s.pipeline)
			cassette := strings.TrimSuffix(path, ".yaml") + ".cassette.yaml"
			if *recordCassettes {
				srv := llmtest.New(t)
				srv.Handle(s.reply)
				t.Setenv("OPENAI_BASE_URL", srv.URL)
				t.Setenv("OPENAI_API_KEY", "sk-recording-against-the-fake-model")
				code, _, stderr := flowrun(t, append([]string{path, "--record", cassette}, s.args...)...)
				if code != exitOK {
					t.Fatalf("recording: exit %d\n%s", code, stderr)
				}
				os.Unsetenv("OPENAI_BASE_URL")
				os.Unsetenv("OPENAI_API_KEY")
			}
			code, stdout, stderr := flowrun(t, append([]string{path}, s.args...)...)
			if code != exitOK {
				t.Fatalf("exit %d\n%s", code, stderr)
			}
			if !strings.Contains(stderr, "no OPENAI_API_KEY or OPENAI_BASE_URL: replaying "+cassette+" (offline)") {
				t.Fatalf("the offline replay is not announced:\n%s", stderr)
			}
			golden := filepath.Join("testdata", "shipped", strings.TrimSuffix(s.pipeline, ".yaml")+".json")
			if *update || *recordCassettes {
				_ = os.MkdirAll(filepath.Dir(golden), 0o755)
				_ = os.WriteFile(golden, []byte(stdout), 0o644)
			}
			want, err := os.ReadFile(golden)
			if err != nil {
				t.Fatal(err)
			}
			var got, exp any
			if json.Unmarshal([]byte(stdout), &got) != nil || json.Unmarshal(want, &exp) != nil || !jsonEqual(got, exp) {
				t.Fatalf("outputs differ from %s:\n%s", golden, stdout)
			}
		})
	}
}
