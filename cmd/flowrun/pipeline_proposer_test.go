package main

import (
	"path/filepath"
	"strings"
	"testing"

	"github.com/flowrun/flowrun/llm/llmtest"
)

// proposerStage names the approach_proposer stage a request comes from, by
// its system prompt (pipelines/prompts/approach_proposer/*_system.md).
func proposerStage(r llmtest.Request) string {
	return callerOf(r, []marker{
		{"propose three distinct", "propose"},
		{"You evaluate proposed approaches", "evaluate_approaches"},
		{"You solve math problems", "solve"},
		{"You are an expert referee", "expert"},
		{"You orchestrate a solver", "orchestrate"},
	})
}

// proposerModel answers approach_proposer's calls the interesting way: the
// first solution has a gap, so the orchestrator asks for another round
// (CONTINUE), and the second one is final.
func proposerModel(r llmtest.Request) llmtest.Reply {
	usage := llmtest.Usage{Prompt: 400, Completion: 150}
	reply := func(text string) llmtest.Reply { return llmtest.Reply{Text: text, Usage: usage} }
	raw := string(r.Raw)
	switch proposerStage(r) {
	case "propose":
		return reply("1. Sandwich between squares: (n+1)^2 < n^2+2n+12 < (n+k)^2 for large n.\n" +
			"2. Complete the square: (n+1)^2 + 11 = m^2, so (m-n-1)(m+n+1) = 11.\n" +
			"3. Work modulo small numbers to restrict n.\nRisk of 3: it may not pin n down.")
	case "evaluate_approaches":
		return reply("Approach 2 is best: 11 is prime, so the factorisation leaves one case. " +
			"Solver: set m^2 = (n+1)^2 + 11 and factor the difference of squares.")
	case "solve":
		if strings.Contains(raw, "The orchestrator asks you to fix this") {
			return reply("m^2 - (n+1)^2 = 11 gives (m-n-1)(m+n+1) = 11. Both factors are positive integers " +
				"and m+n+1 > m-n-1, and 11 is prime, so m-n-1 = 1 and m+n+1 = 11: m = 6, n = 4. " +
				"Check: 16 + 8 + 12 = 36 = 6^2.\nAnswer: n = 4")
		}
		return reply("m^2 = (n+1)^2 + 11, so (m-n-1)(m+n+1) = 11, hence m-n-1 = 1, m+n+1 = 11 and n = 4.\nAnswer: n = 4")
	case "expert":
		if strings.Contains(raw, "Both factors are positive integers") {
			return reply("Every step holds; the answer n = 4 is correct and the proof is complete.")
		}
		return reply("The answer is right, but the solution does not say why both factors are positive, " +
			"so the factorisation 11 = 1 * 11 is not justified: the proof has a gap.")
	case "orchestrate":
		if strings.Contains(raw, "Round 1 of") {
			return reply(`{"action":"CONTINUE","feedback":"Justify that both factors are positive before using that 11 is prime.","question":"","final_answer":""}`)
		}
		return reply(`{"action":"FINAL","feedback":"","question":"","final_answer":"n = 4 is the only positive integer: 4^2 + 2*4 + 12 = 36 = 6^2."}`)
	}
	return llmtest.Error(400, "the scripted model does not know this request")
}

const proposerPipeline = "../../pipelines/approach_proposer.yaml"

// liveProposer is a fake model that tells which stage each request it
// answered came from.
type liveProposer struct{ *fakeModel }

func newLiveProposer(t *testing.T, reply func(llmtest.Request) llmtest.Reply) *liveProposer {
	t.Helper()
	return &liveProposer{newFakeModel(t, reply)}
}

// count is how many requests came from stage.
func (l *liveProposer) count(stage string) int {
	n := 0
	for _, s := range l.calls() {
		if s == stage {
			n++
		}
	}
	return n
}

// calls returns the stages the model was asked for so far, in order.
func (l *liveProposer) calls() []string {
	var out []string
	for _, r := range l.requests() {
		out = append(out, proposerStage(r))
	}
	return out
}

// proposerRoute is the node paths the cassette's run starts, in order: two
// approach stages, a round the orchestrator continues, a final round.
var proposerRoute = []string{
	"propose", "evaluate_approaches", "rounds",
	"rounds[1]/solve", "rounds[1]/expert", "rounds[1]/orchestrate",
	"rounds[2]/solve", "rounds[2]/expert", "rounds[2]/orchestrate",
	"route",
}

// TestProposerReplayRouteAndExchange replays the cassette unattended and
// checks the route, the outputs, and that each stage's reply is the next
// stage's user message in the stored run (what flowrun show prints).
func TestProposerReplayRouteAndExchange(t *testing.T) {
	evs := replayRun(t, proposerPipeline, proposerRoute, "--auto")
	last := evs[len(evs)-1]
	out, _ := last["outputs"].(map[string]any)
	if last["status"] != "completed" || out["action"] != "FINAL" || out["rounds"] != 2.0 || out["user_answer"] != nil ||
		!strings.Contains(out["final_answer"].(string), "n = 4") || !strings.Contains(out["solution"].(string), "Both factors are positive") {
		t.Fatalf("finished %v", last)
	}

	// The stored run holds every exchange: each user message carries the
	// previous stage's reply.
	show := showJSON(t, "", runOf(t, evs))
	user, reply := map[string]string{}, map[string]string{}
	for _, e := range show["events"].([]any) {
		e := e.(map[string]any)
		if e["type"] != "model_turn" {
			continue
		}
		turn := e["turn"].(map[string]any)
		msgs := turn["messages"].([]any)
		user[e["path"].(string)] = msgs[len(msgs)-1].(map[string]any)["text"].(string)
		reply[e["path"].(string)] = turn["reply"].(map[string]any)["text"].(string)
	}
	for _, c := range []struct{ from, to, want string }{
		{"propose", "evaluate_approaches", ""},
		{"evaluate_approaches", "rounds[1]/solve", ""},
		{"rounds[1]/solve", "rounds[1]/expert", ""},
		{"rounds[1]/expert", "rounds[1]/orchestrate", ""},
		{"rounds[1]/solve", "rounds[1]/orchestrate", ""},
		{"rounds[1]/orchestrate", "rounds[2]/solve", "Justify that both factors are positive"},
		{"rounds[2]/solve", "rounds[2]/expert", ""},
		{"rounds[2]/expert", "rounds[2]/orchestrate", ""},
	} {
		want := c.want
		if want == "" {
			want = reply[c.from]
		}
		if want == "" || !strings.Contains(user[c.to], want) {
			t.Errorf("%s's user message lacks %s's output %q:\n%s", c.to, c.from, want, user[c.to])
		}
	}
	if !strings.Contains(user["propose"], "find every positive integer n") {
		t.Errorf("the proposer does not get the problem:\n%s", user["propose"])
	}
	code, text, _ := flowrunWithInput(t, "", "show", runOf(t, evs))
	if code != exitOK || !strings.Contains(text, "rounds[2]/orchestrate") || !strings.Contains(text, `"action":"FINAL"`) {
		t.Fatalf("show: exit %d\n%s", code, text)
	}
}

// TestProposerWithoutApproachesStartsAtSolver: with_approaches false skips
// the proposer and the evaluator, live.
func TestProposerWithoutApproachesStartsAtSolver(t *testing.T) {
	m := newLiveProposer(t, proposerModel)
	code, stdout, stderr := flowrun(t, proposerPipeline, "--auto", "--input", "with_approaches=false")
	if code != exitOK {
		t.Fatalf("exit %d\n%s", code, stderr)
	}
	want := []string{"solve", "expert", "orchestrate", "solve", "expert", "orchestrate"}
	if got := m.calls(); !jsonEqual(got, want) {
		t.Fatalf("model calls %q, want %q", got, want)
	}
	if out := outputsOf(t, stdout); out["action"] != "FINAL" || out["plan"] != "" || out["rounds"] != 2.0 {
		t.Fatalf("outputs %v", out)
	}
	if strings.Contains(string(m.srv.Requests()[0].Raw), "Chosen approach") {
		t.Fatal("the solver is told about an approach nobody chose")
	}
}

// TestProposerMaxLoops: --max-loops caps the rounds of an unattended run.
func TestProposerMaxLoops(t *testing.T) {
	m := newLiveProposer(t, proposerModel)
	code, stdout, stderr := flowrun(t, proposerPipeline, "--auto", "--max-loops", "1")
	if code != exitOK {
		t.Fatalf("exit %d\n%s", code, stderr)
	}
	if out := outputsOf(t, stdout); out["action"] != "CONTINUE" || out["rounds"] != 1.0 || m.count("solve") != 1 {
		t.Fatalf("outputs %v, calls %q", out, m.calls())
	}
}

// TestProposerAskUserWaitsThenResumes: ASK_USER ends in an ask that pauses
// the run, even under --auto; resume --answer finishes it with no model call.
func TestProposerAskUserWaitsThenResumes(t *testing.T) {
	m := newLiveProposer(t, func(r llmtest.Request) llmtest.Reply {
		if proposerStage(r) == "orchestrate" {
			return llmtest.Text(`{"action":"ASK_USER","feedback":"","question":"Is n allowed to be 0?","final_answer":""}`)
		}
		return proposerModel(r)
	})
	code, _, stderr := flowrun(t, proposerPipeline, "--auto")
	run := waitingRun(t, code, stderr, "is waiting for an answer (ask_user): Is n allowed to be 0?")
	calls := m.srv.Calls()
	if calls != 5 {
		t.Fatalf("%d model calls, want 5 (one round): %q", calls, m.calls())
	}
	code, stdout, stderr := flowrun(t, "resume", run, "--answer", "no, positive only")
	if code != exitOK {
		t.Fatalf("resume: exit %d\n%s", code, stderr)
	}
	if out := outputsOf(t, stdout); out["action"] != "ASK_USER" || out["user_answer"] != "no, positive only" || out["rounds"] != 1.0 {
		t.Fatalf("outputs %v", out)
	}
	if m.srv.Calls() != calls {
		t.Fatalf("resume called the model again: %q", m.calls())
	}
}

// TestProposerOrchestratorParseErrorHalts: a reply that is not JSON fails
// the orchestrator at once, with no repair turn and no retry.
func TestProposerOrchestratorParseErrorHalts(t *testing.T) {
	m := newLiveProposer(t, func(r llmtest.Request) llmtest.Reply {
		if proposerStage(r) == "orchestrate" {
			return llmtest.Text("I think we should CONTINUE.")
		}
		return proposerModel(r)
	})
	code, stdout, stderr := flowrun(t, proposerPipeline, "--auto", "--json")
	if code != exitFailed {
		t.Fatalf("exit %d, want %d\n%s", code, exitFailed, stderr)
	}
	evs := eventsOf(t, stdout)
	if n := m.count("orchestrate"); n != 1 {
		t.Fatalf("the orchestrator was asked %d times, want 1: %q", n, m.calls())
	}
	if r := pathsOf(evs, "node_retry"); len(r) != 0 {
		t.Fatalf("retried: %q", r)
	}
	last := evs[len(evs)-1]
	if last["status"] != "failed" || !strings.Contains(stdout, "invalid structured output") {
		t.Fatalf("finished %v\n%s", last, stdout)
	}
	if got := pathsOf(evs, "node_failed"); len(got) == 0 || got[0] != "rounds[1]/orchestrate" {
		t.Fatalf("failed nodes %q", got)
	}
}

// TestProposerServerErrorRetried: a 500 is retried and the run completes.
func TestProposerServerErrorRetried(t *testing.T) {
	m := newLiveProposer(t, proposerModel)
	m.srv.Push(llmtest.Error(500, "upstream hiccup"))
	code, stdout, stderr := flowrun(t, proposerPipeline, "--auto")
	if code != exitOK {
		t.Fatalf("exit %d\n%s", code, stderr)
	}
	if out := outputsOf(t, stdout); out["action"] != "FINAL" {
		t.Fatalf("outputs %v", out)
	}
	// The 500 reached the proposer's first try (Push answers before Handle,
	// so the handler saw only the retry).
	if n := m.count("propose"); n != 1 || m.srv.Calls() != 9 {
		t.Fatalf("%d calls, handler saw %q", m.srv.Calls(), m.calls())
	}
}

// TestProposerPersistentErrorStopsResumably: an error the node's retry:
// cannot get past fails the run; resume continues at the failed stage
// without redoing finished ones.
func TestProposerPersistentErrorStopsResumably(t *testing.T) {
	// A Retry-After beyond what the client waits through returns at once,
	// and the node does not run again on top of the client: one request.
	m := newLiveProposer(t, func(r llmtest.Request) llmtest.Reply {
		if proposerStage(r) == "solve" {
			return llmtest.RateLimited("Retry-After", "600")
		}
		return proposerModel(r)
	})
	code, stdout, stderr := flowrun(t, proposerPipeline, "--auto", "--json")
	if code != exitFailed {
		t.Fatalf("exit %d, want %d\n%s", code, exitFailed, stderr)
	}
	evs := eventsOf(t, stdout)
	if got := pathsOf(evs, "node_retry"); len(got) != 0 {
		t.Fatalf("node retries %q: the client's retry policy is the only one", got)
	}
	if m.count("solve") != 1 {
		t.Fatalf("calls %q", m.calls())
	}
	run := runOf(t, evs)
	if s := showJSON(t, "", run); s["status"] != "failed" {
		t.Fatalf("status %v", s["status"])
	}
	m.setReply(proposerModel)
	before := len(m.calls())
	code, stdout, stderr = flowrun(t, "resume", run, "--auto")
	if code != exitOK {
		t.Fatalf("resume: exit %d\n%s", code, stderr)
	}
	if out := outputsOf(t, stdout); out["action"] != "FINAL" || out["rounds"] != 2.0 {
		t.Fatalf("outputs %v", out)
	}
	if again := m.calls()[before:]; again[0] != "solve" || m.count("propose") != 1 || m.count("evaluate_approaches") != 1 {
		t.Fatalf("resume redid finished stages: %q", m.calls())
	}
}

// TestProposerInputChecks: empty text, text that names no problem, and a
// missing value are refused with exit 2 before any model call.
func TestProposerInputChecks(t *testing.T) {
	m := newLiveProposer(t, proposerModel)
	null := writeFile(t, t.TempDir(), "in.json", `{"problem": null}`)
	for _, c := range []struct {
		args []string
		want string
	}{
		{[]string{"--input", "problem="}, "length must be >= 1"},
		{[]string{"--input", "problem=What is 2+2?"}, "does not match pattern"},
		{[]string{"--inputs", null}, "expected string, but got null"},
	} {
		code, _, stderr := flowrun(t, append([]string{proposerPipeline, "--auto"}, c.args...)...)
		if code != exitInvalid || !strings.Contains(stderr, `input "problem": `+c.want) ||
			!strings.Contains(stderr, `mention "problem", "question" or "research"`) {
			t.Errorf("%q: exit %d\n%s", c.args, code, stderr)
		}
	}
	// Any case counts.
	code, _, stderr := flowrun(t, proposerPipeline, "--auto", "--input", "problem=A RESEARCH note: is 91 prime?", "--max-loops", "1")
	if code != exitOK {
		t.Errorf("exit %d\n%s", code, stderr)
	}
	if n := m.srv.Calls(); n != 5 {
		t.Fatalf("%d model calls, want 5 (only the valid run's)", n)
	}
}

// TestProposerDocumented: docs/pipelines.md embeds the pipeline's current
// graph and the example inputs replay offline.
func TestProposerDocumented(t *testing.T) {
	checkDocumented(t, "approach_proposer.yaml")
	code, stdout, stderr := flowrun(t, proposerPipeline, "--auto", "--inputs", filepath.Join("..", "..", "pipelines", "examples", "math_problem.yaml"))
	if code != exitOK || outputsOf(t, stdout)["action"] != "FINAL" {
		t.Fatalf("example inputs: exit %d\n%s", code, stderr)
	}
}
