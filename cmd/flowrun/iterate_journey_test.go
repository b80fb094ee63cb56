package main

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// ticketsOffline is a pipeline on the offline mock model whose replies
// follow the prompt: a sentence added to it changes what the model says.
const ticketsOffline = `version: 1
name: tickets
models:
  default: {provider: mock, mock: replies.yaml}
inputs:
  ticket: {type: string}
nodes:
  - id: classify
    llm:
      prompt: |
        Answer with the team's name only.%s
        Ticket: ${{ inputs.ticket }}
outputs:
  team: lower(trim(nodes.classify.text))
score:
  exact: outputs.team == item.expected
`

// TestIterateLoopOffline is the loop a user repeats, on a fresh
// directory with no key and no server: two labelled batches, compare
// them, make the item the change broke a test, which fails; fix the
// prompt, and the test passes, and the next batch fixes the item.
func TestIterateLoopOffline(t *testing.T) {
	dir := t.TempDir()
	db := filepath.Join(dir, "runs.db")
	writeFile(t, dir, "replies.yaml", `replies:
  - prompt: "(?s)An email address is an account matter.*Ticket: .*email address"
    text: account
  - prompt: "(?s)A password is an account matter.*Ticket: .*address"
    text: shipping
  - prompt: "(?s)A password is an account matter.*Ticket: .*password"
    text: account
  - prompt: "(?s)Ticket: .*(charged|password)"
    text: billing
  - prompt: "(?s)Ticket: .*email address"
    text: account
  - text: shipping
`)
	data := writeFile(t, dir, "tickets.json", `[
  {"ticket": "I was charged twice.", "expected": "billing"},
  {"ticket": "I forgot my password.", "expected": "account"},
  {"ticket": "How do I change my email address?", "expected": "account"},
  {"ticket": "My parcel is late.", "expected": "shipping"}]`)
	p := filepath.Join(dir, "tickets.yaml")
	write := func(extra string) {
		t.Helper()
		if err := os.WriteFile(p, []byte(strings.Replace(ticketsOffline, "%s", extra, 1)), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	batch := func(label string) {
		t.Helper()
		if code, _, stderr := flowrun(t, "batch", p, "--dataset", data, "--store", db, "--label", label); code != exitOK {
			t.Fatalf("batch %q: exit %d\n%s", label, code, stderr)
		}
	}
	write("")
	batch("v1")
	write(" A password is an account matter.")
	batch("v2")
	code, out, stderr := flowrun(t, "batch", "compare", "last", "--store", db)
	if code != exitOK {
		t.Fatalf("batch compare last: exit %d\n%s", code, stderr)
	}
	for _, want := range []string{`"v1"`, `"v2"`, "+        Answer with the team's name only. A password is an account matter.", "1 fixed, 1 broken", "item 2", "item 3"} {
		if !strings.Contains(out, want) {
			t.Errorf("batch compare last does not say %q:\n%s", want, out)
		}
	}

	code, out, stderr = flowrun(t, "batch", "show", "last", "--format", "json", "--store", db)
	if code != exitOK {
		t.Fatalf("batch show: exit %d\n%s", code, stderr)
	}
	var shown struct {
		Rows []struct{ Key, Run string }
	}
	if err := json.Unmarshal([]byte(out), &shown); err != nil {
		t.Fatal(err)
	}
	run := ""
	for _, r := range shown.Rows {
		if r.Key == "item 3" {
			run = r.Run
		}
	}
	casePath := filepath.Join(dir, "tickets.test.yaml")
	if code, _, stderr := flowrun(t, "test", "--from-run", run, "--store", db, "-o", casePath); code != exitOK {
		t.Fatalf("test --from-run: exit %d\n%s", code, stderr)
	}
	body, err := os.ReadFile(casePath)
	if err != nil {
		t.Fatal(err)
	}
	if strings.Contains(string(body), "mocks:") {
		t.Errorf("the case mocks the offline model, so no prompt change could make it pass:\n%s", body)
	}
	code, out, stderr = flowrun(t, "test", casePath)
	if code != exitFailed || !strings.Contains(out, `expected "account"`) || !strings.Contains(out, `got      "shipping"`) {
		t.Errorf("the case made from the broken item: exit %d, want it to fail expecting account, got shipping\n%s%s\n%s", code, out, stderr, body)
	}

	write(" A password is an account matter. An email address is an account matter.")
	if code, out, stderr := flowrun(t, "test", casePath); code != exitOK {
		t.Errorf("the case after the fix: exit %d, want it to pass\n%s%s", code, out, stderr)
	}
	batch("v3")
	code, out, stderr = flowrun(t, "batch", "compare", "last", "--store", db)
	if code != exitOK || !strings.Contains(out, "1 fixed, 0 broken") || !strings.Contains(out, "75.0% -> 100.0%") || !strings.Contains(out, "the 1 item that changed") {
		t.Errorf("batch compare after the fix: exit %d, want item 3 fixed and 100%%\n%s%s", code, out, stderr)
	}
}
