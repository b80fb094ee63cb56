package main

import (
	"fmt"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/flowrun/flowrun/batch"
	"github.com/flowrun/flowrun/dsl"
	"github.com/flowrun/flowrun/engine"
	"github.com/flowrun/flowrun/sandbox"
)

// TestExplainAddsTheCommand: each typed library error the CLI prints
// gets the command that deals with it, also when wrapped, and an error
// without one is printed as it is.
func TestExplainAddsTheCommand(t *testing.T) {
	for _, c := range []struct {
		err  error
		want string
	}{
		{&engine.ChangedError{Run: "r1", Path: "p.yaml", Changes: []string{"p.yaml:", "  line 3: was a"}},
			"run r1: p.yaml changed since the run started; resuming could mix two versions of the pipeline.\np.yaml:\n  line 3: was a\nTo resume anyway: flowrun resume r1 --allow-changed"},
		{fmt.Errorf("resuming: %w", &engine.CompletedError{Run: "r1"}),
			"resuming: run r1 already completed; to run part of it again, fork it: flowrun resume r1 --from SNAPSHOT|CHECKPOINT"},
		{&batch.ChangedError{Batch: "b1", Pipeline: "p.yaml", Changes: []string{"p.yaml:"}},
			"p.yaml changed since batch b1 started; its items would mix two versions of the pipeline. Start a new batch, or resume anyway with --allow-changed\np.yaml:"},
		{&sandbox.BuildError{Reason: "not a Debian-like machine with apt"},
			"not a Debian-like machine with apt: install it on a Debian-like Linux machine, run flowrun sandbox export there, and here flowrun sandbox install python --from ARCHIVE (with ARCHIVE.sha256 beside it, or --sha256 HEX)"},
		{&sandbox.BuildError{Reason: "building Python failed (exit status 2): see the output above", Failed: true},
			"building Python failed (exit status 2): see the output above; or install it on a Debian-like Linux machine, run flowrun sandbox export there, and here flowrun sandbox install python --from ARCHIVE (with ARCHIVE.sha256 beside it, or --sha256 HEX)"},
		{fmt.Errorf("archive py.tar.gz: %w: none was given, and there is no py.tar.gz.sha256 beside it", sandbox.ErrNoChecksum),
			"archive py.tar.gz: no sha256 to check it by: none was given, and there is no py.tar.gz.sha256 beside it: pass --sha256 HEX, or put ARCHIVE.sha256 beside it (flowrun sandbox export prints the sha256 and writes that file)"},
		{fmt.Errorf("plain"), "plain"},
	} {
		if got := explain(c.err); got != c.want {
			t.Errorf("explain(%T)\n got %q\nwant %q", c.err, got, c.want)
		}
	}
	ds := dsl.Diagnostics{{Pos: dsl.Pos{File: "p.yaml", Line: 3, Col: 5}, Severity: dsl.Error, MCPListing: "every",
		Message: `MCP server every has no tool "x" (its listing has 2 tools)`}}
	if got, want := diagnosticsText(ds), `p.yaml:3:5: error: MCP server every has no tool "x" (its listing has 2 tools); flowrun validate --refresh-mcp lists them again`; got != want {
		t.Errorf("diagnostics\n got %q\nwant %q", got, want)
	}
}

// TestHintsNameTheCommand: where a library error or reason describes a
// problem, the CLI adds the command to type, in the words it always used.
func TestHintsNameTheCommand(t *testing.T) {
	dir := t.TempDir()
	db := filepath.Join(dir, "runs.db")
	p := writeFile(t, dir, "p.yaml", "version: 1\nname: p\nstate: {x: 0}\nnodes:\n  - id: a\n    set: {x: 1}\noutputs:\n  x: state.x\n")
	for _, c := range []struct {
		args []string
		want string // a regexp, RUN standing for the run's id; "" for none
	}{
		{[]string{"resume", "last"}, `no such run: no run in \S+ yet: flowrun PIPELINE.yaml starts one`},
		{[]string{"batch", "resume", "last"}, `no batch in \S+ yet: flowrun batch PIPELINE --dataset D starts one`},
		{[]string{p}, ""},
		{[]string{"show", "zzz"}, `no such run "zzz" in \S+: flowrun runs lists them`},
		{[]string{"batch", "show", "zzz"}, `no batch "zzz" in \S+: flowrun batches lists them`},
		{[]string{"resume", "last"}, `run (RUN) already completed; to run part of it again, fork it: flowrun resume RUN --from SNAPSHOT\|CHECKPOINT`},
		{[]string{"resume", "last", "--from", "9"}, `run RUN has no checkpoint 9 \(flowrun show RUN lists them\)`},
		{[]string{"resume", "last", "--from", "nope"}, `no such snapshot "nope" for run RUN \(flowrun snapshots RUN lists them\)`},
		{[]string{"rollback", "last", "1"}, ""},
	} {
		_, _, stderr := flowrun(t, append(c.args, "--store", db)...)
		if c.want == "" {
			continue
		}
		want := strings.ReplaceAll(c.want, "RUN", `20\d{6}T\d{6}-[0-9a-f]+`)
		if !regexp.MustCompile(want).MatchString(stderr) {
			t.Errorf("flowrun %s: stderr lacks %s:\n%s", strings.Join(c.args, " "), c.want, stderr)
		}
	}
	_, stdout, _ := flowrun(t, "show", "last", "--store", db)
	if !regexp.MustCompile(`stopped: rolled back to 1; flowrun resume \S+ continues from there`).MatchString(stdout) {
		t.Errorf("show after a rollback:\n%s", stdout)
	}
}
