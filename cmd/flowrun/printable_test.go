package main

import (
	"encoding/json"
	"path/filepath"
	"strings"
	"testing"

	"github.com/flowrun/flowrun/llm/llmtest"
)

// TestRunOutputsNeutraliseTerminalControls: the outputs flowrun run
// prints, and its --json events, carry a model's C1 control (U+009B, a
// CSI on many terminals), a right-to-left override (U+202E) and DEL as
// JSON escapes, never raw, and decode to the model's exact text.
func TestRunOutputsNeutraliseTerminalControls(t *testing.T) {
	const reply = "csi \u009b31m red, rlo \u202edesrever\u202c, del \x7f end"
	srv := llmtest.New(t)
	srv.Handle(func(llmtest.Request) llmtest.Reply { return llmtest.Text(reply) })
	useModel(t, srv)
	dir := t.TempDir()
	p := writeFile(t, dir, "say.yaml", `
version: 1
name: say
models: {default: {model: gpt-4.1-mini}}
nodes:
  - id: ask
    llm: {prompt: "say something"}
outputs: {text: nodes.ask.text}
`)
	for _, args := range [][]string{{"run", p}, {"run", p, "--json"}} {
		code, stdout, stderr := flowrun(t, append(args, "--store", filepath.Join(dir, "runs.db"))...)
		if code != exitOK {
			t.Fatalf("%v: exit %d\n%s", args, code, stderr)
		}
		for _, raw := range []string{"\u009b", "\u202e", "\u202c", "\x7f"} {
			if strings.Contains(stdout, raw) {
				t.Errorf("%v prints %U raw:\n%q", args, []rune(raw)[0], stdout)
			}
		}
		// Without --json stdout is the outputs; with it, the last event
		// holds them.
		doc := stdout
		if len(args) == 3 {
			lines := strings.Split(strings.TrimSpace(stdout), "\n")
			doc = `{"outputs": ` + lines[len(lines)-1] + `}`
		}
		var got struct {
			Text    string `json:"text"`
			Outputs struct {
				Outputs struct {
					Text string `json:"text"`
				} `json:"outputs"`
			} `json:"outputs"`
		}
		if err := json.Unmarshal([]byte(doc), &got); err != nil {
			t.Fatalf("%v: not JSON: %v\n%s", args, err, stdout)
		}
		text := got.Text + got.Outputs.Outputs.Text
		if text != reply || !strings.Contains(stdout, `\u009b31m`) || !strings.Contains(stdout, `\u202edesrever`) {
			t.Errorf("%v: output text %q, want %q escaped as JSON:\n%s", args, text, reply, stdout)
		}
	}
}
