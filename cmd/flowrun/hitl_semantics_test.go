package main

import (
	"encoding/json"
	"fmt"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"
)

// resume --answer right after a rollback answers the question the
// resumed run asks: no bare resume first.
func TestHITL02AnswerRightAfterRollback(t *testing.T) {
	dir := t.TempDir()
	db := filepath.Join(dir, "runs.db")
	p := writeFile(t, dir, "p.yaml", stepsPipeline(t))
	code, _, stderr := flowrunWithInput(t, "", p, "--store", db)
	run := waitingRun(t, code, stderr, "is waiting for an answer")
	if code, _, stderr = flowrunWithInput(t, "", "snapshot", run, "--label", "asked", "--store", db); code != exitOK {
		t.Fatalf("snapshot: exit %d %s", code, stderr)
	}
	code, stdout, _ := flowrunWithInput(t, "", "resume", run, "--answer", "true", "--store", db)
	if out := outputsOf(t, stdout); code != exitOK || out["more"] != true {
		t.Fatalf("exit %d outputs %v", code, out)
	}
	if code, _, stderr = flowrunWithInput(t, "", "rollback", run, "asked", "--store", db); code != exitOK {
		t.Fatalf("rollback: exit %d %s", code, stderr)
	}
	// An answer that does not fit the question is refused and loses
	// nothing: the run waits on that question.
	code, _, stderr = flowrunWithInput(t, "", "resume", run, "--answer", "maybe", "--store", db)
	if code != exitInvalid || !strings.Contains(stderr, `does not fit the question ask_more asked ("go on?")`) {
		t.Fatalf("a wrong answer: exit %d\n%s", code, stderr)
	}
	if s := showJSON(t, db, run); s["status"] != "waiting" || s["pending"].(map[string]any)["path"] != "ask_more" {
		t.Fatalf("after a refused answer: %v", s)
	}
	if code, _, stderr = flowrunWithInput(t, "", "rollback", run, "asked", "--store", db); code != exitOK {
		t.Fatalf("rollback: exit %d %s", code, stderr)
	}
	code, stdout, stderr = flowrunWithInput(t, "", "resume", run, "--answer", "false", "--store", db)
	if code != exitOK {
		t.Fatalf("resume --answer after rollback: exit %d\n%s", code, stderr)
	}
	if out := outputsOf(t, stdout); out["more"] != false || out["n"] != 30.0 {
		t.Fatalf("outputs %v", out)
	}
	if strings.Contains(stderr, "ok    l[") {
		t.Fatalf("finished nodes ran again:\n%s", stderr)
	}
	// An answer no question takes is reported, not silently dropped.
	code, _, _ = flowrunWithInput(t, "", "rollback", run, "asked", "--store", db)
	code2, _, stderr := flowrunWithInput(t, "", "resume", run, "--from", "asked", "--answer", "true", "--store", db)
	if code != exitOK || code2 != exitOK || strings.Contains(stderr, "was not used") {
		t.Fatalf("fork with an answer: exit %d %d\n%s", code, code2, stderr)
	}
}

// show lists a run's checkpoints (sequence, node path, time), in text and
// in --json.
func TestHITL03ShowListsCheckpoints(t *testing.T) {
	dir := t.TempDir()
	db := filepath.Join(dir, "runs.db")
	p := writeFile(t, dir, "p.yaml", stepsPipeline(t))
	code, _, stderr := flowrunWithInput(t, "", p, "--store", db, "--auto")
	run := waitingRun(t, code, stderr, "is waiting for an answer")
	code, text, stderr := flowrunWithInput(t, "", "show", run, "--store", db)
	if code != exitOK {
		t.Fatalf("show: exit %d %s", code, stderr)
	}
	for i, path := range []string{"l[1]/inc", "l[2]/inc", "l[3]/inc", "l"} {
		re := regexp.MustCompile(fmt.Sprintf(`(?m)^  %d +%s +\d{4}-\d\d-\d\d \d\d:\d\d:\d\d\.\d{3}$`, i+1, regexp.QuoteMeta(path)))
		if !re.MatchString(text) {
			t.Errorf("show lacks checkpoint %d (%s):\n%s", i+1, path, text)
		}
	}
	if !strings.Contains(text, "checkpoints (flowrun resume "+run+" --from N forks from one):") {
		t.Errorf("no checkpoint heading:\n%s", text)
	}
	cps, _ := showJSON(t, db, run)["checkpoints"].([]any)
	if len(cps) != 4 {
		t.Fatalf("show --json checkpoints: %v", cps)
	}
	last := cps[3].(map[string]any)
	created, err := time.Parse(time.RFC3339Nano, fmt.Sprint(last["created"]))
	if last["seq"] != 4.0 || last["path"] != "l" || err != nil || time.Since(created) > time.Hour {
		t.Fatalf("checkpoint 4: %v (%v)", last, err)
	}
}

// Every command that takes a run takes "last" and an unambiguous prefix;
// an ambiguous prefix lists the runs it starts, an unknown id suggests.
func TestHITL04RunRefsEverywhere(t *testing.T) {
	dir := t.TempDir()
	db := filepath.Join(dir, "runs.db")
	p := writeFile(t, dir, "p.yaml", stepsPipeline(t))
	code, _, stderr := flowrunWithInput(t, "", p, "--store", db)
	first := waitingRun(t, code, stderr, "is waiting for an answer")
	code, _, stderr = flowrunWithInput(t, "", p, "--store", db)
	second := waitingRun(t, code, stderr, "is waiting for an answer")
	prefix := second[:len(second)-2]
	if strings.HasPrefix(first, prefix) {
		t.Skipf("the two run ids %s and %s share %s", first, second, prefix)
	}
	shared := commonPrefix(first, second)
	for _, ref := range []string{"last", prefix} {
		if s := showJSON(t, db, ref); s["id"] != second {
			t.Errorf("show %s: %v, want %s", ref, s["id"], second)
		}
		if code, out, stderr := flowrunWithInput(t, "", "show", ref, "--store", db); code != exitOK || !strings.Contains(out, "run "+second) {
			t.Errorf("show %s: exit %d %s%s", ref, code, out, stderr)
		}
	}
	if code, out, stderr := flowrunWithInput(t, "", "snapshot", prefix, "--label", "s1", "--store", db); code != exitOK || !strings.Contains(out, "of run "+second) {
		t.Errorf("snapshot by prefix: exit %d %s%s", code, out, stderr)
	}
	if code, out, stderr := flowrunWithInput(t, "", "snapshots", "last", "--store", db); code != exitOK || !strings.Contains(out, "s1") {
		t.Errorf("snapshots last: exit %d %s%s", code, out, stderr)
	}
	if code, out, stderr := flowrunWithInput(t, "", "rollback", prefix, "s1", "--store", db); code != exitOK || !strings.Contains(out, "run "+second+" rolled back") {
		t.Errorf("rollback by prefix: exit %d %s%s", code, out, stderr)
	}
	code, stdout, stderr := flowrunWithInput(t, "", "resume", "last", "--answer", "yes", "--store", db)
	if out := outputsOf(t, stdout); code != exitOK || out["n"] != 30.0 {
		t.Fatalf("resume last: exit %d %s", code, stderr)
	}
	if s := showJSON(t, db, first); s["status"] != "waiting" {
		t.Fatalf("resume last touched the older run: %v", s["status"])
	}

	for _, cmd := range [][]string{{"show"}, {"snapshots"}, {"snapshot", "--label", "x"}, {"rollback", "REF", "s1"}, {"resume"}} {
		args := func(ref string) []string {
			a := append([]string{cmd[0], ref}, cmd[1:]...)
			if cmd[0] == "rollback" {
				a = []string{"rollback", ref, "s1"}
			}
			return append(a, "--store", db)
		}
		code, _, stderr := flowrunWithInput(t, "", args(shared)...)
		if code != exitInvalid || !strings.Contains(stderr, fmt.Sprintf("run %q is ambiguous", shared)) ||
			!strings.Contains(stderr, first) || !strings.Contains(stderr, second) {
			t.Errorf("%s with an ambiguous prefix: exit %d\n%s", cmd[0], code, stderr)
		}
		code, _, stderr = flowrunWithInput(t, "", args(second[:len(second)-1]+"x")...)
		if code != exitInvalid || !strings.Contains(stderr, "did you mean "+second) {
			t.Errorf("%s with an unknown id: exit %d\n%s", cmd[0], code, stderr)
		}
	}
}

// Batches suggest as runs do.
func TestHITL04BatchDidYouMean(t *testing.T) {
	batches := viewStore(t)
	code, _, stderr := flowrunWithInput(t, "", "batch", "show", "b20261122T110000-bbbx", "--store", batches)
	if code != exitInvalid || !strings.Contains(stderr, "did you mean b20261122T110000-bbbb?") {
		t.Fatalf("exit %d\n%s", code, stderr)
	}
}

func commonPrefix(a, b string) string {
	i := 0
	for i < len(a) && i < len(b) && a[i] == b[i] {
		i++
	}
	return a[:i]
}

// snakeKey is the one key style of every JSON document flowrun prints.
var snakeKey = regexp.MustCompile(`^[a-z][a-z0-9]*(_[a-z0-9]+)*$`)

// checkKeys walks a JSON document and reports every key not in snake
// case, skipping the values that hold user data (inputs, outputs, model
// messages, tool arguments, answer schemas), whose keys are not flowrun's.
func checkKeys(t *testing.T, doc string, v any, path string) int {
	t.Helper()
	userData := map[string]bool{"inputs": true, "outputs": true, "output": true, "scores": true, "messages": true, "reply": true,
		"usage": true, "args": true, "result": true, "schema": true, "default": true, "item": true}
	n := 0
	switch x := v.(type) {
	case map[string]any:
		for k, val := range x {
			n++
			if !snakeKey.MatchString(k) {
				t.Errorf("%s: key %s.%s is not snake_case", doc, path, k)
			}
			if !userData[k] {
				n += checkKeys(t, doc, val, path+"."+k)
			}
		}
	case []any:
		for i, val := range x {
			n += checkKeys(t, doc, val, fmt.Sprintf("%s[%d]", path, i))
		}
	}
	return n
}

// show --json, runs --json, snapshots --json and batch show --json use
// snake_case keys throughout.
func TestHITL06JSONKeysSnakeCase(t *testing.T) {
	dir := t.TempDir()
	db := filepath.Join(dir, "runs.db")
	p := writeFile(t, dir, "p.yaml", stepsPipeline(t))
	code, _, stderr := flowrunWithInput(t, "", p, "--store", db)
	run := waitingRun(t, code, stderr, "is waiting for an answer")
	flowrunWithInput(t, "", "snapshot", run, "--label", "s", "--store", db)
	flowrunWithInput(t, "", "resume", run, "--from", "s", "--store", db)
	batches := viewStore(t)
	for _, args := range [][]string{
		{"show", run, "--json", "--store", db},
		{"show", "last", "--json", "--store", db},
		{"runs", "--json", "--store", db},
		{"snapshots", run, "--json", "--store", db},
		{"batch", "show", "last", "--format", "json", "--store", batches},
		{"batches", "--json", "--store", batches},
		{"batch", "compare", "b20261122T100000-aaaa", "b20261122T110000-bbbb", "--json", "--store", batches},
	} {
		code, out, stderr := flowrunWithInput(t, "", args...)
		var v any
		if err := json.Unmarshal([]byte(out), &v); code != exitOK || err != nil {
			t.Fatalf("%v: exit %d %v\n%s", args, code, err, stderr)
		}
		doc := strings.Join(args[:2], " ")
		if n := checkKeys(t, doc, v, ""); n < 5 {
			t.Errorf("%s: only %d keys walked", doc, n)
		}
	}
}
