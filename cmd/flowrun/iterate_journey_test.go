package main

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestIterateLoopOffline walks docs/iterate.md on a copy of
// pipelines/examples/tickets, with no key and no server: two labelled
// batches, compare them, make the item the change broke a test, which
// fails; fix the prompt, the test passes, and the next batch fixes the
// item.
func TestIterateLoopOffline(t *testing.T) {
	dir := t.TempDir()
	db := filepath.Join(dir, "runs.db")
	for _, name := range []string{"tickets.yaml", "replies.yaml", "tickets.json"} {
		b, err := os.ReadFile(filepath.Join("..", "..", "pipelines", "examples", "tickets", name))
		if err != nil {
			t.Fatal(err)
		}
		writeFile(t, dir, name, string(b))
	}
	p, data := filepath.Join(dir, "tickets.yaml"), filepath.Join(dir, "tickets.json")
	const only = "Answer with the team's name only."
	edit := func(sentence string) {
		t.Helper()
		b, err := os.ReadFile(p)
		if err != nil {
			t.Fatal(err)
		}
		before := string(b)
		after := strings.Replace(before, only, only+" "+sentence, 1)
		if after == before {
			t.Fatalf("tickets.yaml has no line %q to add to, as docs/iterate.md says", only)
		}
		if err := os.WriteFile(p, []byte(after), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	batch := func(label string) {
		t.Helper()
		if code, _, stderr := flowrun(t, "batch", p, "--dataset", data, "--store", db, "--label", label); code != exitOK {
			t.Fatalf("batch %q: exit %d\n%s", label, code, stderr)
		}
	}
	compare := func(want ...string) {
		t.Helper()
		code, out, stderr := flowrun(t, "batch", "compare", "last", "--store", db)
		if code != exitOK {
			t.Fatalf("batch compare last: exit %d\n%s", code, stderr)
		}
		for _, w := range want {
			if !strings.Contains(out, w) {
				t.Errorf("batch compare last does not say %q:\n%s", w, out)
			}
		}
	}
	batch("v1: first prompt")
	edit("A password is an account matter.")
	batch("v2: passwords are account")
	compare(`"v1: first prompt"`, `"v2: passwords are account"`, "+        "+only+" A password is an account matter.",
		"83.3% -> 83.3%", "1 fixed, 1 broken", "fixed (failed in A, passed in B): 1\n  item 3", "broken (passed in A, failed in B): 1\n  item 4")

	code, out, stderr := flowrun(t, "batch", "show", "last", "--format", "json", "--store", db)
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
		if r.Key == "item 4" {
			run = r.Run
		}
	}
	casePath := filepath.Join(dir, "tickets.test.yaml")
	if code, _, stderr := flowrun(t, "test", "--from-run", run, "--store", db, "-o", casePath); code != exitOK {
		t.Fatalf("test --from-run %q: exit %d\n%s", run, code, stderr)
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

	edit("An email address is an account matter.")
	if code, out, stderr := flowrun(t, "test", casePath); code != exitOK {
		t.Errorf("the case after the fix: exit %d, want it to pass\n%s%s", code, out, stderr)
	}
	batch("v3: email addresses too")
	compare("83.3% -> 100.0%", "1 fixed, 0 broken", "the 1 item that changed", "fixed (failed in A, passed in B): 1\n  item 4")
}
