package main

import (
	"fmt"
	"slices"
	"strings"
	"sync"
	"testing"

	"github.com/flowrun/flowrun/llm/llmtest"
)

// The parallel_validate pipeline's scripted model, on the default task
// (flip the grid upside down). Round 1: the transform coder mirrors
// left-right (passes the symmetric first pair, fails the second) while the
// validate coder writes a correct checker, so validate accepts both
// training pairs but rejects transform's outputs for train 2 and the test.
// Round 2: shown the checker and its rejections, the transform coder flips
// the rows, and every check passes.
const (
	pvValidateCode = "def validate(input, output):\n    return output == [list(row) for row in input[::-1]]"
	pvDreamRound1  = "Observations: the output has the same size and colours as the input. The cells are mirrored; the first example looks like a left-right mirror."
	pvDreamRound2  = "The checker rejects the mirrored outputs: the rows must be reversed top to bottom, so the output is the input flipped upside down."
)

// pvScript answers the dreamer and both coders. transforms and validates
// list each coder's replies, one per round (the last repeats); a reply
// "500" answers with a server error (every retry too).
type pvScript struct {
	mu                   sync.Mutex
	transforms, validate []string
	nt, nv               int
	// prompts keeps each coder's user messages, in order.
	prompts map[string][]string
}

func (s *pvScript) next(list []string, n *int, coder string, raw string) llmtest.Reply {
	i := min(*n, len(list)-1)
	if list[i] == "500" {
		// A server error on every attempt: the node's retries run out.
		r := llmtest.Error(500, "the "+coder+" model is down")
		r.Header = map[string]string{"retry-after-ms": "1"} // the client's own retries, quickly
		return r
	}
	*n++
	if s.prompts == nil {
		s.prompts = map[string][]string{}
	}
	s.prompts[coder] = append(s.prompts[coder], raw)
	return llmtest.Reply{Text: list[i], Usage: llmtest.Usage{Prompt: 500, Completion: 90}}
}

func (s *pvScript) reply(r llmtest.Request) llmtest.Reply {
	s.mu.Lock()
	defer s.mu.Unlock()
	raw := string(r.Raw)
	switch {
	case strings.Contains(raw, "You study ARC puzzles"):
		text := pvDreamRound1
		if strings.Contains(raw, "Round ") {
			text = pvDreamRound2
		}
		return llmtest.Reply{Text: text, Usage: llmtest.Usage{Prompt: 400, Completion: 80}}
	case strings.Contains(raw, "checkers for ARC puzzles"):
		return s.next(s.validate, &s.nv, "validate", raw)
	case strings.Contains(raw, "You write Python 3"):
		return s.next(s.transforms, &s.nt, "transform", raw)
	}
	return llmtest.Error(400, "unexpected request")
}

// parallelValidateModel is the shipped cassette's script. It tells the
// rounds apart by the request alone (a round-2 transform request shows the
// colleague's checker), so recording twice gives the same cassette.
func parallelValidateModel(r llmtest.Request) llmtest.Reply {
	transforms := []string{fenced(refineWrongCode), fenced(refineRightCode)}
	if strings.Contains(string(r.Raw), "A colleague wrote this checker") {
		transforms = transforms[1:]
	}
	return (&pvScript{transforms: transforms, validate: []string{fenced(pvValidateCode)}}).reply(r)
}

// pvRun runs parallel_validate live against a fake model answering with
// script, and returns the outputs and the events.
func pvRun(t *testing.T, script *pvScript, args ...string) (map[string]any, []map[string]any) {
	t.Helper()
	return liveRun(t, shippedPath("parallel_validate.yaml"), script.reply, args...)
}

func pvIterations(out map[string]any) []map[string]any {
	var s []map[string]any
	for _, x := range out["iterations"].([]any) {
		s = append(s, x.(map[string]any))
	}
	return s
}

// pvRound is the node paths one round finishes. The two branches run at
// once, so their nodes interleave in any way; within a branch the order
// is fixed.
func pvRound(i int) []string {
	p := fmt.Sprintf("refine[%d]/", i)
	return []string{p + "dream",
		p + "coders[transform]/write_transform", p + "coders[transform]/take_transform", p + "coders[transform]/transform_status",
		p + "coders[validate]/write_validate", p + "coders[validate]/take_validate", p + "coders[validate]/validate_status",
		p + "coders", p + "check", p + "score", p + "record"}
}

// checkRoute compares the node paths that finished (evs in order) with
// the rounds expected: the same paths, in order except that the two
// branches' nodes may interleave (each branch keeps its own order), and
// the parallel node finishes after both. The failed paths fail instead
// (on_error: continue) and are left out of the finished ones.
func checkRoute(t *testing.T, evs []map[string]any, rounds int, failed ...string) {
	t.Helper()
	got := pathsOf(evs, "node_finished")
	if f := pathsOf(evs, "node_failed"); !slices.Equal(f, failed) && !(len(f) == 0 && len(failed) == 0) {
		t.Fatalf("failed nodes %v, want %v", f, failed)
	}
	want := []string{"prepare"}
	for i := 1; i <= rounds; i++ {
		for _, p := range pvRound(i) {
			if !slices.Contains(failed, p) {
				want = append(want, p)
			}
		}
	}
	want = append(want, "refine")
	sorted := func(s []string) []string { c := slices.Clone(s); slices.Sort(c); return c }
	if !slices.Equal(sorted(got), sorted(want)) {
		t.Fatalf("route:\n got %v\nwant %v (branches in any interleaving)", got, want)
	}
	branch := func(s []string, b string) []string {
		var out []string
		for _, p := range s {
			if strings.Contains(p, "[transform]") == (b == "transform") && strings.Contains(p, "[validate]") == (b == "validate") {
				out = append(out, p)
			}
		}
		return out
	}
	for _, b := range []string{"transform", "validate", ""} {
		if g, w := branch(got, b), branch(want, b); !slices.Equal(g, w) {
			t.Fatalf("route of branch %q:\n got %v\nwant %v", b, g, w)
		}
	}
}

func TestParallelValidateRouteAndSandbox(t *testing.T) {
	script := &pvScript{transforms: []string{fenced(refineWrongCode), fenced(refineRightCode)}, validate: []string{fenced(pvValidateCode)}}
	out, evs := pvRun(t, script)
	checkRoute(t, evs, 2)

	// The sandbox really ran both functions: round 1's transform mirrored
	// train 2, and validate rejected that output but accepted the truth.
	runs := sandboxRuns(evs)
	if len(runs) != 2 {
		t.Fatalf("%d sandbox runs, want 2", len(runs))
	}
	first := runs[0]["result"].(map[string]any)
	if got := fmt.Sprint(first["outputs"].([]any)[1].(map[string]any)["output"]); got != "[[0 1 1] [0 0 0] [2 0 0]]" {
		t.Fatalf("round 1 transform on train 2 produced %s", got)
	}
	v := first["validation"].(map[string]any)
	if v["train_passed"] != 2.0 || v["transform_passed"] != 1.0 || v["transform_total"] != 3.0 ||
		!strings.Contains(v["text"].(string), "validate(train 2 input, transform(train 2 input)): REJECTS") {
		t.Fatalf("round 1 validation %v", v)
	}
	second := runs[1]["result"].(map[string]any)
	if got := fmt.Sprint(second["outputs"].([]any)[2].(map[string]any)["output"]); got != "[[0 0 0] [3 3 0] [3 0 0]]" {
		t.Fatalf("round 2 transform on the test input produced %s", got)
	}

	it := pvIterations(out)
	if len(it) != 2 || it[0]["solved"] != false || it[0]["train_passed"] != 1.0 || it[0]["validate_transform_passed"] != 1.0 ||
		it[1]["solved"] != true || it[1]["validate_transform_passed"] != 3.0 || len(it[0]["failed"].([]any)) != 0 {
		t.Fatalf("iterations %v", it)
	}
	if out["solved"] != true || out["solved_train"] != true || out["solved_test"] != true || out["validate_accepts_train"] != true ||
		out["validate_accepts_transform"] != true || out["transform_code"] != refineRightCode || out["validate_code"] != pvValidateCode ||
		len(out["failures"].([]any)) != 0 {
		t.Fatalf("outputs %v", out)
	}

	// Cross-refinement: in round 2 each coder sees the other's code and
	// results; the dreamer (checked through its reply) saw both.
	if len(script.prompts["transform"]) != 2 || len(script.prompts["validate"]) != 2 {
		t.Fatalf("coder calls %d transform, %d validate", len(script.prompts["transform"]), len(script.prompts["validate"]))
	}
	tr2, va2 := script.prompts["transform"][1], script.prompts["validate"][1]
	for _, want := range []string{"A colleague wrote this checker", "def validate(input, output):", "REJECTS", pvDreamRound2} {
		if !strings.Contains(tr2, strings.ReplaceAll(want, "\n", `\n`)) {
			t.Errorf("round 2 transform prompt lacks %q", want)
		}
	}
	for _, want := range []string{"A colleague wrote this transform", "return [row[::-1] for row in grid]", "train 2: FAIL 4 pixels off"} {
		if !strings.Contains(va2, want) {
			t.Errorf("round 2 validate prompt lacks %q", want)
		}
	}
	if strings.Contains(script.prompts["transform"][0], "colleague") {
		t.Error("round 1 transform prompt shows a colleague's code")
	}
}

// One coder fails for good in round 1 (a server error on every retry):
// the other's function is kept and tested, the failure is recorded in the
// outputs and shown by flowrun show, and round 2 recovers.
func TestParallelValidateOneCoderFails(t *testing.T) {
	script := &pvScript{transforms: []string{fenced(refineWrongCode), fenced(refineRightCode)}, validate: []string{"500", fenced(pvValidateCode)}}
	// The validate coder is down for round 1 only: switch it back on once
	// the transform coder has answered round 1.
	down := true
	inner := script.reply
	srvReply := func(r llmtest.Request) llmtest.Reply {
		raw := string(r.Raw)
		if down && strings.Contains(raw, "Round ") {
			script.mu.Lock()
			script.validate = script.validate[1:]
			script.mu.Unlock()
			down = false
		}
		return inner(r)
	}
	out, evs := liveRun(t, shippedPath("parallel_validate.yaml"), srvReply)
	checkRoute(t, evs, 2, "refine[1]/coders[validate]/write_validate", "refine[1]/coders[validate]/take_validate")

	// Round 1's transform was still tested, with no validate to judge it.
	runs := sandboxRuns(evs)
	first := runs[0]["result"].(map[string]any)
	if got := fmt.Sprint(first["outputs"].([]any)[1].(map[string]any)["output"]); got != "[[0 1 1] [0 0 0] [2 0 0]]" {
		t.Fatalf("round 1 transform on train 2 produced %s", got)
	}
	if v := first["validation"].(map[string]any); v["load_error"] != "no validate code yet" {
		t.Fatalf("round 1 validation %v", v)
	}
	it := pvIterations(out)
	if len(it) != 2 || fmt.Sprint(it[0]["failed"]) != "[validate]" || it[0]["train_passed"] != 1.0 || fmt.Sprint(it[1]["failed"]) != "[]" {
		t.Fatalf("iterations %v", it)
	}
	failures := out["failures"].([]any)
	if len(failures) != 1 {
		t.Fatalf("failures %v", failures)
	}
	f := failures[0].(map[string]any)
	if f["coder"] != "validate" || f["iteration"] != 1.0 || !strings.HasPrefix(f["error"].(string), "server: ") {
		t.Fatalf("failure %v", f)
	}
	if out["solved"] != true || out["transform_code"] != refineRightCode || out["validate_code"] != pvValidateCode {
		t.Fatalf("outputs %v", out)
	}
	failed := false
	for _, e := range evs {
		if e["type"] == "node_failed" && e["path"] == "refine[1]/coders[validate]/write_validate" {
			failed = true
		}
	}
	if !failed {
		t.Fatal("no node_failed event for refine[1]/coders[validate]/write_validate")
	}
	code, text, _ := flowrun(t, "show", runOf(t, evs))
	if code != exitOK || !strings.Contains(text, "refine[1]/coders[validate]/write_validate") || !strings.Contains(text, "validate model is down") {
		t.Fatalf("show: exit %d\n%s", code, text)
	}
}

// The transform coder answers without a code block in round 1: the
// validate coder's checker is kept and tested on the training pairs, and
// the transform failure reaches both coders and the dreamer in round 2.
func TestParallelValidateReplyWithoutCode(t *testing.T) {
	script := &pvScript{transforms: []string{"I would flip the grid.", fenced(refineRightCode)}, validate: []string{fenced(pvValidateCode)}}
	out, evs := pvRun(t, script)
	checkRoute(t, evs, 2, "refine[1]/coders[transform]/take_transform")
	first := sandboxRuns(evs)[0]["result"].(map[string]any)
	v := first["validation"].(map[string]any)
	if first["transform_error"] != "no transform code yet" || v["train_passed"] != 2.0 || v["accepts_train"] != true {
		t.Fatalf("round 1: %v", first)
	}
	it := pvIterations(out)
	if len(it) != 2 || fmt.Sprint(it[0]["failed"]) != "[transform]" {
		t.Fatalf("iterations %v", it)
	}
	f := out["failures"].([]any)[0].(map[string]any)
	if f["coder"] != "transform" || !strings.Contains(f["error"].(string), "no code block") {
		t.Fatalf("failures %v", out["failures"])
	}
	if !strings.Contains(script.prompts["transform"][1], "no transform came back") {
		t.Errorf("round 2 transform prompt does not say the last round failed:\n%s", script.prompts["transform"][1])
	}
	if out["solved"] != true || out["validate_code"] != pvValidateCode {
		t.Fatalf("outputs %v", out)
	}
}

// A transform that ends the interpreter (SystemExit is no Exception, so
// the wrapper does not catch it) fails the whole sandbox run: the round
// scores as nothing produced, both coders are told, and round 2 solves.
func TestParallelValidateSandboxRunFails(t *testing.T) {
	exits := "def transform(grid):\n    raise SystemExit(3)"
	script := &pvScript{transforms: []string{fenced(exits), fenced(refineRightCode)}, validate: []string{fenced(pvValidateCode)}}
	out, evs := pvRun(t, script)
	checkRoute(t, evs, 2)
	if r := sandboxRuns(evs)[0]; r["ok"] != false || r["result"] != nil || !strings.Contains(fmt.Sprint(r["error"]), "SystemExit: 3") {
		t.Fatalf("round 1 sandbox run %v", r)
	}
	it := pvIterations(out)
	if len(it) != 2 || it[0]["train_passed"] != 0.0 || it[0]["validate_train_passed"] != 0.0 || it[1]["solved"] != true {
		t.Fatalf("iterations %v", it)
	}
	if !strings.Contains(script.prompts["validate"][1], "the sandbox run failed: runtime_error: Traceback") {
		t.Errorf("round 2 validate prompt does not show the failed run:\n%s", script.prompts["validate"][1])
	}
	if out["solved"] != true {
		t.Fatalf("outputs %v", out)
	}
}

// TestParallelValidateDocumented: docs/pipelines.md embeds the pipeline's
// current graph.
func TestParallelValidateDocumented(t *testing.T) {
	checkDocumented(t, "parallel_validate.yaml")
}
