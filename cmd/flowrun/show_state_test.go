package main

import (
	"path/filepath"
	"regexp"
	"strings"
	"testing"
)

// TestShowStateChangesAndAt: flowrun show lists what each checkpoint
// changed in the state under it; --at N prints the state after
// checkpoint N and its change; an unknown checkpoint is refused.
func TestShowStateChangesAndAt(t *testing.T) {
	dir := t.TempDir()
	db := filepath.Join(dir, "runs.db")
	p := writeFile(t, dir, "p.yaml", stepsPipeline)
	code, _, stderr := flowrunWithInput(t, "", p, "--store", db)
	run := waitingRun(t, code, stderr, "is waiting for an answer")
	_, text, _ := flowrunWithInput(t, "", "show", run, "--store", db)
	for _, re := range []string{`(?m)^  1 +l\[1\]/inc +\S+ \S+\n +~ n: 0 -> 1$`, `(?m)^  2 +l\[2\]/inc +\S+ \S+\n +~ n: 1 -> 2$`} {
		if !regexp.MustCompile(re).MatchString(text) {
			t.Errorf("show lacks %s:\n%s", re, text)
		}
	}
	code, text, stderr = flowrunWithInput(t, "", "show", run, "--store", db, "--at", "2")
	want := "run " + run + " after checkpoint 2 (l[2]/inc)\nchanges:\n  ~ n: 1 -> 2\nstate:\n  n: 2\n"
	if code != exitOK || !strings.HasPrefix(text, want) || !strings.Contains(text, "flowrun resume "+run+" --from 2 --set state.KEY=VALUE") {
		t.Errorf("show --at 2: exit %d\n%s%s\nwant it to start with\n%s", code, text, stderr, want)
	}
	code, _, stderr = flowrunWithInput(t, "", "show", run, "--store", db, "--at", "9")
	if code != exitInvalid || !strings.Contains(stderr, "has no checkpoint 9 (it has 4;") {
		t.Errorf("show --at 9: exit %d %s", code, stderr)
	}
}
