package main

import (
	"encoding/json"
	"path/filepath"
	"strings"
	"testing"
)

func TestSandboxUsage(t *testing.T) {
	t.Setenv("XDG_CACHE_HOME", t.TempDir())
	cases := []struct {
		args   []string
		code   int
		stderr string
	}{
		{[]string{"sandbox"}, exitInvalid, "flowrun sandbox install python"},
		{[]string{"sandbox", "frob"}, exitInvalid, `unknown subcommand "frob"`},
		{[]string{"sandbox", "install"}, exitInvalid, "name what to install"},
		{[]string{"sandbox", "install", "ruby"}, exitInvalid, "name what to install"},
		{[]string{"sandbox", "install", "python", "--frm", "x"}, exitInvalid, "flag provided but not defined: -frm"},
		{[]string{"sandbox", "status", "extra"}, exitInvalid, `unexpected "extra"`},
		{[]string{"sandbox", "install", "python", "--from", filepath.Join(t.TempDir(), "nope")}, exitFailed, "no such file"},
	}
	for _, c := range cases {
		code, _, stderr := flowrun(t, c.args...)
		if code != c.code || !strings.Contains(stderr, c.stderr) {
			t.Errorf("%v: exit %d, want %d; stderr %q, want it to contain %q", c.args, code, c.code, stderr, c.stderr)
		}
		if c.code == exitInvalid && strings.Count(strings.TrimSpace(stderr), "\n") != 0 {
			t.Errorf("%v: want one line, got %q", c.args, stderr)
		}
	}
	for _, args := range [][]string{{"sandbox", "--help"}, {"sandbox", "install", "--help"}, {"sandbox", "status", "-h"}} {
		code, stdout, _ := flowrun(t, args...)
		if code != exitOK || !strings.Contains(stdout, "Usage") {
			t.Errorf("%v: exit %d, stdout %q", args, code, stdout)
		}
	}
}

func TestSandboxStatusEmptyCache(t *testing.T) {
	cache := t.TempDir()
	t.Setenv("XDG_CACHE_HOME", cache)
	code, stdout, stderr := flowrun(t, "sandbox", "status")
	if code != exitOK || !strings.Contains(stdout, "python 3.13.5: not installed") || !strings.Contains(stdout, "run flowrun sandbox install python") {
		t.Errorf("exit %d\nstdout %s\nstderr %s", code, stdout, stderr)
	}
	code, stdout, _ = flowrun(t, "sandbox", "status", "--json")
	var st struct {
		Python struct {
			Dir       string `json:"dir"`
			Installed bool   `json:"installed"`
		} `json:"python"`
	}
	if err := json.Unmarshal([]byte(stdout), &st); err != nil || code != exitOK {
		t.Fatalf("exit %d, %v: %s", code, err, stdout)
	}
	if st.Python.Installed || st.Python.Dir != filepath.Join(cache, "flowrun", "python", "3.13.5") {
		t.Errorf("status %+v", st)
	}
	if code, _, _ := flowrun(t, "sandbox", "status", "--verify"); code != exitFailed {
		t.Errorf("--verify with nothing installed: exit %d, want %d", code, exitFailed)
	}
}
