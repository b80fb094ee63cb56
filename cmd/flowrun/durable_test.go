package main

// Durable runs, end to end: the flowrun command runs as a real subprocess
// (the test binary re-executed as the CLI, see flowrunProcess) against the
// fake model server over HTTP, and is killed, raced and inspected through
// its SQLite store.

import (
	"bufio"
	"bytes"
	"context"
	"crypto/rand"
	"crypto/sha256"
	"database/sql"
	"encoding/hex"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"maps"
	mrand "math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"reflect"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/flowrun/flowrun/llm/llmtest"
	"github.com/flowrun/flowrun/runtime"
	"github.com/flowrun/flowrun/store"
)

var (
	killPoints = flag.Int("kills", 20, "how many kill points TestKillAndResume tries (100 for a thorough local run)")
	killSeed   = flag.Uint64("kill-seed", 0, "seed of TestKillAndResume's kill points; 0 picks one and logs it")
)

// durDeadline bounds every subprocess: one that takes longer is hung, and
// is killed so that the test fails instead of hanging CI. It is not a
// timing assertion: a healthy run takes a fraction of a second, and a
// loaded machine only makes it longer, so TestMain sets it from the test
// binary's -timeout (testwait.Budget).
var durDeadline time.Duration

// killReplyDelay is how long the fake model takes to answer in the kill
// test: long enough that a kill can land while a call is in flight.
const killReplyDelay = 2 * time.Millisecond

// durablePipeline has a loop whose body maps model calls over four items
// and folds their results with a call that keeps a memory, then a last
// call that sees the whole memory. Every prompt starts with "@PATH ", the
// node's path, so that each request the fake model gets names its node.
// Its outputs include run.step: a resumed run counts every node once.
const durablePipeline = `
version: 1
name: durable
models: {default: {model: gpt-4.1-mini}}
inputs:
  topic: {type: string, default: plain}
memories:
  m: {system: "You fold findings."}
state:
  round: 0
  folds: []
nodes:
  - id: rounds
    loop:
      max_iterations: 3
      body:
        - id: tick
          set: {round: loop.iteration}
        - id: fan
          map:
            over: '["a", "b", "c", "d"]'
            max_concurrency: 2
            body:
              - id: ask
                llm: {prompt: "@rounds[${{ state.round }}]/fan[${{ index }}]/ask ${{ inputs.topic }} ${{ item }}"}
        - id: fold
          llm: {memory: m, prompt: '@rounds[${{ state.round }}]/fold ${{ join(map(nodes.fan, .text), ",") }}'}
          set: {folds: 'concat(state.folds, [nodes.fold.text])'}
  - id: summary
    llm: {memory: m, prompt: "@summary ${{ len(state.folds) }} folds on ${{ inputs.topic }}"}
outputs:
  folds: state.folds
  fan: map(nodes.fan, .text)
  summary: nodes.summary.text
  steps: run.step
`

// durableLLMPaths are the paths of every model call durablePipeline makes.
func durableLLMPaths() []string {
	var out []string
	for it := 1; it <= 3; it++ {
		for i := range 4 {
			out = append(out, fmt.Sprintf("rounds[%d]/fan[%d]/ask", it, i))
		}
		out = append(out, fmt.Sprintf("rounds[%d]/fold", it))
	}
	return append(out, "summary")
}

// durCall is one request the fake model received.
type durCall struct {
	key     string    // the API key it carried: which process sent it
	model   string    // the model id it asked for
	path    string    // the node that asked, from the prompt
	at      time.Time // when it arrived
	replied time.Time // when the answer went out; zero until then
}

// durModel is a deterministic model: its reply is a pure function of the
// messages of the request (the last user message, which names the node,
// and the memory before it), so any attempt at a node gets the same answer
// as long as the run's state, memory included, was restored faithfully.
// It tells processes apart by their API key.
type durModel struct {
	t   *testing.T
	srv *llmtest.Server

	mu    sync.Mutex
	calls []durCall
	seen  map[string]int                                    // requests per key
	hooks map[string]func(n int, path string) llmtest.Reply // per key, see hook
}

func newDurModel(t *testing.T) *durModel {
	m := &durModel{t: t, srv: llmtest.New(t), seen: map[string]int{}, hooks: map[string]func(int, string) llmtest.Reply{}}
	m.srv.Handle(m.handle)
	return m
}

// env is the environment of a flowrun process that uses this model with key.
func (m *durModel) env(key string) []string {
	return []string{"OPENAI_BASE_URL=" + m.srv.URL, "OPENAI_API_KEY=" + key}
}

// hook runs f on each request carrying key (n counts them from 1) before
// the reply. A reply f returns with a Status or Body replaces the answer,
// one with a Usage replaces the answer's usage; its Delay delays it.
func (m *durModel) hook(key string, f func(n int, path string) llmtest.Reply) {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.hooks[key] = f
}

func (m *durModel) handle(r llmtest.Request) llmtest.Reply {
	key := strings.TrimPrefix(r.Header.Get("Authorization"), "Bearer ")
	if r.Body == nil {
		// A body cut short: its sender was killed while writing it.
		return llmtest.Error(400, "fake model: truncated request")
	}
	msgs, _ := r.Body["messages"].([]any)
	last := ""
	h := sha256.New()
	for _, x := range msgs {
		msg, _ := x.(map[string]any)
		role, _ := msg["role"].(string)
		text := llmtest.MessageText(msg["content"])
		fmt.Fprintf(h, "%s\x00%s\x00", role, text)
		if role == "user" {
			last = text
		}
	}
	path, _, _ := strings.Cut(strings.TrimPrefix(last, "@"), " ")
	if r.API != "chat" || !strings.HasPrefix(last, "@") {
		m.t.Errorf("fake model: request %d (%s) does not name its node: %q", r.N, r.API, last)
		return llmtest.Error(400, "fake model: no @path in the prompt")
	}
	m.mu.Lock()
	i := len(m.calls)
	model, _ := r.Body["model"].(string)
	m.calls = append(m.calls, durCall{key: key, model: model, path: path, at: r.At})
	m.seen[key]++
	n, hook := m.seen[key], m.hooks[key]
	m.mu.Unlock()
	answer := llmtest.Reply{Text: fmt.Sprintf("%s#%x", path, h.Sum(nil)[:4]), Usage: llmtest.Usage{Prompt: 10 * len(msgs), Completion: 3}}
	if hook != nil {
		rep := hook(n, path)
		if rep.Status != 0 || rep.Body != "" {
			answer = rep
		}
		if rep.Usage != (llmtest.Usage{}) {
			answer.Usage = rep.Usage
		}
		time.Sleep(rep.Delay)
	}
	// A server honours max_tokens: no more output is billed.
	for _, field := range []string{"max_completion_tokens", "max_tokens"} {
		if most, ok := r.Body[field].(float64); ok {
			answer.Usage.Completion = min(answer.Usage.Completion, int(most))
		}
	}
	m.mu.Lock()
	m.calls[i].replied = time.Now()
	m.mu.Unlock()
	return answer
}

// call is the n-th request (from 1) that carried key.
func (m *durModel) call(key string, n int) durCall {
	m.mu.Lock()
	defer m.mu.Unlock()
	for _, c := range m.calls {
		if c.key == key {
			if n--; n == 0 {
				return c
			}
		}
	}
	return durCall{}
}

// paths are the node paths of the requests that carried key, in arrival order.
func (m *durModel) paths(key string) []string {
	m.mu.Lock()
	defer m.mu.Unlock()
	var out []string
	for _, c := range m.calls {
		if c.key == key {
			out = append(out, c.path)
		}
	}
	return out
}

// durProc is a flowrun subprocess.
type durProc struct {
	t        *testing.T
	args     []string
	cmd      *exec.Cmd
	out, err lockedBuffer
	reap     sync.Once
	done     chan struct{}
	waitErr  error
}

// startDurProc starts flowrun as a subprocess. It is not reaped until
// wait (or the test's end), so that a killed one can be seen as a zombie.
func startDurProc(t *testing.T, env []string, args ...string) *durProc {
	t.Helper()
	// A -race binary sleeps a second at exit (atexit_sleep_ms) unless told
	// not to; races in the subprocess are still reported, and exit 66.
	env = append([]string{"GORACE=" + strings.TrimSpace(os.Getenv("GORACE")+" atexit_sleep_ms=0")}, env...)
	p := &durProc{t: t, args: args, cmd: flowrunProcess(t, env, args...), done: make(chan struct{})}
	p.cmd.Stdout, p.cmd.Stderr = &p.out, &p.err
	if err := p.cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		// No subprocess outlives its test, even a failed one.
		_ = p.cmd.Process.Signal(syscall.SIGKILL)
		p.startReaper()
		<-p.done
	})
	return p
}

func (p *durProc) startReaper() {
	p.reap.Do(func() {
		go func() {
			p.waitErr = p.cmd.Wait()
			close(p.done)
		}()
	})
}

func (p *durProc) pid() int { return p.cmd.Process.Pid }

func (p *durProc) kill() {
	if err := p.cmd.Process.Signal(syscall.SIGKILL); err != nil && !errors.Is(err, os.ErrProcessDone) {
		p.t.Fatal(err)
	}
}

// exited is closed when the process has ended and been reaped.
func (p *durProc) exited() <-chan struct{} {
	p.startReaper()
	return p.done
}

// wait reaps the process and returns its exit code (-1 if a signal ended
// it). One that runs past durDeadline is killed and fails the test.
func (p *durProc) wait() int {
	p.t.Helper()
	select {
	case <-p.exited():
	case <-time.After(durDeadline):
		p.t.Fatalf("flowrun %s still running after %s: killed it\nstderr:\n%s", strings.Join(p.args, " "), durDeadline, p.abort())
	}
	var ee *exec.ExitError
	switch {
	case p.waitErr == nil:
		return 0
	case errors.As(p.waitErr, &ee):
		return ee.ExitCode()
	}
	p.t.Fatalf("flowrun %s: %v", strings.Join(p.args, " "), p.waitErr)
	return 0
}

// abort kills and reaps the process and returns its stderr.
func (p *durProc) abort() string {
	p.kill()
	<-p.exited()
	return p.stderr()
}

// stdout and stderr are what the process printed so far.
func (p *durProc) stdout() string { return p.out.String() }
func (p *durProc) stderr() string { return p.err.String() }

// runDurProc runs flowrun to its end as a subprocess, within durDeadline.
func runDurProc(t *testing.T, env []string, args ...string) (code int, stdout, stderr string) {
	t.Helper()
	p := startDurProc(t, env, args...)
	code = p.wait()
	return code, p.stdout(), p.stderr()
}

// durOutputs decodes the outputs a completed run prints on stdout.
func durOutputs(t *testing.T, stdout string) map[string]any {
	t.Helper()
	var out map[string]any
	if err := json.Unmarshal([]byte(stdout), &out); err != nil || out == nil {
		t.Fatalf("stdout is not the outputs as one JSON object (%v):\n%s", err, stdout)
	}
	return out
}

// durCheckpointPaths are the paths of a run's current checkpoints, read from
// the store by this (test) process.
func durCheckpointPaths(t *testing.T, db, run string) []string {
	t.Helper()
	st, err := store.Open(db)
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	cps, err := st.Checkpoints(context.Background(), run, 0)
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, cp := range cps {
		out = append(out, cp.Path)
	}
	return out
}

// durOnlyRun is the single run in a store.
func durOnlyRun(t *testing.T, db string) *store.Run {
	t.Helper()
	st, err := store.Open(db)
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	runs, err := st.Runs(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	if len(runs) != 1 {
		t.Fatalf("%d runs in %s, want 1", len(runs), db)
	}
	return runs[0]
}

func durSet(list []string) map[string]bool {
	m := make(map[string]bool, len(list))
	for _, x := range list {
		m[x] = true
	}
	return m
}

// TestKillAndResume kills a run with SIGKILL at points spread over its
// whole length, each time resumes it in a new process, and requires the
// outputs of an uninterrupted run and no model call for a node that had
// finished before the kill. -kills=100 tries more points; -kill-seed
// replays a failing sequence (timing still varies a little).
func TestKillAndResume(t *testing.T) {
	dir := t.TempDir()
	pipeline := writeFile(t, dir, "durable.yaml", durablePipeline)
	model := newDurModel(t)
	all := durableLLMPaths()

	slow := func(int, string) llmtest.Reply { return llmtest.Reply{Delay: killReplyDelay} }
	model.hook("sk-base", slow)
	base := filepath.Join(dir, "base.db")
	code, stdout, stderr := runDurProc(t, model.env("sk-base"), "run", pipeline, "--store", base)
	if code != exitOK {
		t.Fatalf("uninterrupted run: exit %d\n%s", code, stderr)
	}
	want := durOutputs(t, stdout)
	if got := model.paths("sk-base"); !reflect.DeepEqual(durSorted(got), durSorted(all)) {
		t.Fatalf("uninterrupted run asked the model for\n%v\nwant each of\n%v", got, all)
	}
	baseRun := durOnlyRun(t, base)
	done := durSet(durCheckpointPaths(t, base, baseRun.ID))
	for _, p := range all {
		if !done[p] {
			t.Fatalf("no checkpoint for %s: a prompt's @path is not its node's path (checkpoints %v)", p, done)
		}
	}

	// The mean time between two model requests: kills land up to two of
	// them after the k-th request (slower under -race, or on a busy machine).
	gap := model.call("sk-base", len(all)).at.Sub(model.call("sk-base", 1).at) / time.Duration(len(all)-1)
	maxDelay := max(2*gap, 2*killReplyDelay)

	seed := *killSeed
	if seed == 0 {
		seed = uint64(time.Now().UnixNano())
	}
	t.Logf("kill points: %d, seed %d (rerun with -kill-seed=%d), delays up to %s", *killPoints, seed, seed, maxDelay)
	rng := mrand.New(mrand.NewPCG(seed, 0x5eed))
	// Kill when the k-th model request arrives, every k in 1..len(all)
	// once per round, after a random delay: while the call is in flight,
	// as its reply is handled and checkpointed, or a node or two later.
	var ks []int
	for len(ks) < *killPoints {
		for _, i := range rng.Perm(len(all)) {
			ks = append(ks, i+1)
		}
	}
	start := time.Now()
	outcomes := map[string]int{}
	for i := range *killPoints {
		kill := durKill{k: ks[i], delay: time.Duration(rng.Float64() * float64(maxDelay))}
		// Every fourth point also kills the resume, at a random one of the
		// model calls it has left, and resumes again.
		var again *durKill
		if i%4 == 3 {
			again = &durKill{frac: rng.Float64(), delay: time.Duration(rng.Float64() * float64(maxDelay))}
		}
		name := fmt.Sprintf("%03d/k=%d/delay=%s", i, kill.k, kill.delay.Round(10*time.Microsecond))
		if again != nil {
			name += "/then-resume-killed"
		}
		t.Run(name, func(t *testing.T) {
			first, second := durKillPoint(t, model, pipeline, i, kill, again, want, all)
			outcomes["run "+first]++
			if second != "" {
				outcomes["resume "+second]++
			}
		})
		if t.Failed() {
			t.Fatalf("seed %d", seed)
		}
	}
	t.Logf("%d kill points in %s:", *killPoints, time.Since(start).Round(time.Millisecond))
	for _, o := range slices.Sorted(maps.Keys(outcomes)) {
		t.Logf("%4d %s", outcomes[o], o)
	}
}

// durKill is where to kill a process: when the fake model gets its k-th
// request (or, for a resume, the one at frac of the calls it has left),
// after delay.
type durKill struct {
	k     int
	frac  float64
	delay time.Duration
}

// durKillPoint runs one kill point: a run killed, optionally its resume
// killed too, then a resume to the end. It says where the kills landed.
func durKillPoint(t *testing.T, model *durModel, pipeline string, i int, kill durKill, again *durKill, want map[string]any, all []string) (first, second string) {
	db := filepath.Join(t.TempDir(), "runs.db")
	code, landed := durKillAt(t, model, fmt.Sprintf("sk-%d-run", i), kill, db, nil, "run", pipeline)
	if code == exitOK {
		if run := durOnlyRun(t, db); run.Status != "completed" || !durJSONEqual(t, run.Outputs, want) {
			t.Fatalf("run exited 0 before the kill, with status %s and outputs %v", run.Status, run.Outputs)
		}
		return landed, ""
	}
	run := durOnlyRun(t, db)
	if run.Status == "completed" {
		return durCompleted(t, db, run, want), ""
	}
	if run.Status != runtime.StatusInterrupted {
		t.Fatalf("a killed run has status %s, want %s", run.Status, runtime.StatusInterrupted)
	}
	if again != nil {
		finished := durCheckpointPaths(t, db, run.ID)
		left := len(all) - durCountIn(finished, all)
		if left == 0 {
			second = "not killed: no model call left"
		} else {
			k2 := *again
			k2.k = 1 + int(k2.frac*float64(left))
			code, where := durKillAt(t, model, fmt.Sprintf("sk-%d-resume-killed", i), k2, db, durSet(finished), "resume", run.ID)
			if code == exitOK {
				if got := durOnlyRun(t, db); got.Status != "completed" || !durJSONEqual(t, got.Outputs, want) {
					t.Fatalf("resume exited 0 before its kill, with status %s and outputs %v", got.Status, got.Outputs)
				}
				return landed, where
			}
			if got := durOnlyRun(t, db); got.Status == "completed" {
				return landed, durCompleted(t, db, got, want)
			}
			second = where
		}
	}

	// Resume to the end.
	finished := durCheckpointPaths(t, db, run.ID)
	isDone := durSet(finished)
	key := fmt.Sprintf("sk-%d-resume", i)
	code, stdout, stderr := runDurProc(t, model.env(key), "resume", run.ID, "--store", db)
	if code != exitOK {
		t.Fatalf("resume: exit %d\n%s", code, stderr)
	}
	if got := durOutputs(t, stdout); !reflect.DeepEqual(got, want) {
		t.Fatalf("resumed run's outputs differ from an uninterrupted run's:\n got %v\nwant %v", got, want)
	}
	asked := map[string]int{}
	for _, path := range model.paths(key) {
		asked[path]++
	}
	for _, path := range all {
		switch {
		case isDone[path] && asked[path] > 0:
			t.Errorf("resume asked the model again for %s, which had finished (and was checkpointed) before the kill", path)
		case !isDone[path] && asked[path] != 1:
			t.Errorf("resume asked the model %d times for %s, which had not finished before the kill", asked[path], path)
		}
	}
	if got := durOnlyRun(t, db); got.Status != "completed" || got.PID != 0 || !durJSONEqual(t, got.Outputs, want) {
		t.Errorf("after the resume the store has the run %s, held by pid %d, with outputs %v; want completed, released, %v", got.Status, got.PID, got.Outputs, want)
	}
	return landed, second
}

// durKillAt runs flowrun on store db with its own API key and SIGKILLs it
// when the fake model gets its kill.k-th request, after kill.delay. It
// returns the exit code and where the kill landed. A resume (finished:
// the paths checkpointed before it started) must not call the model for
// those.
func durKillAt(t *testing.T, model *durModel, key string, kill durKill, db string, finished map[string]bool, args ...string) (int, string) {
	t.Helper()
	args = append(args, "--store", db)
	arrived := make(chan struct{})
	model.hook(key, func(n int, _ string) llmtest.Reply {
		if n == kill.k {
			close(arrived)
		}
		return llmtest.Reply{Delay: killReplyDelay}
	})
	p := startDurProc(t, model.env(key), args...)
	var killedAt time.Time
	select {
	case <-arrived:
		time.Sleep(kill.delay)
		killedAt = time.Now()
		p.kill()
	case <-p.exited():
		t.Fatalf("flowrun %s ended (%v) before its model request %d\nstderr:\n%s", args[0], p.waitErr, kill.k, p.stderr())
	case <-time.After(durDeadline):
		t.Fatalf("flowrun %s: model request %d never came\nstderr:\n%s", args[0], kill.k, p.abort())
	}
	code := p.wait()
	for _, path := range model.paths(key) {
		if finished[path] {
			t.Errorf("resume asked the model again for %s, which had finished before it started", path)
		}
	}
	if code == exitOK {
		return code, "finished before the kill"
	}
	if code != -1 {
		t.Fatalf("flowrun %s: exit %d before the kill landed\n%s", args[0], code, p.stderr())
	}
	kth := model.call(key, kill.k)
	switch {
	case kth.replied.IsZero() || kth.replied.After(killedAt):
		return code, "killed with the k-th call in flight"
	case !slices.Contains(durCheckpointPaths(t, db, durOnlyRun(t, db).ID), kth.path):
		return code, "killed after the k-th reply, before its checkpoint"
	}
	return code, "killed after the k-th call's checkpoint"
}

// durCompleted checks a run that was killed after it had recorded its end.
func durCompleted(t *testing.T, db string, run *store.Run, want map[string]any) string {
	t.Helper()
	finished := durCheckpointPaths(t, db, run.ID)
	if len(finished) == 0 || finished[len(finished)-1] != "summary" || !durJSONEqual(t, run.Outputs, want) {
		t.Fatalf("run recorded as completed with outputs %v, and its checkpoints end %v", run.Outputs, finished)
	}
	return "killed after completing"
}

// durCountIn counts the entries of paths that are in all.
func durCountIn(paths, all []string) int {
	in := durSet(all)
	n := 0
	for _, p := range paths {
		if in[p] {
			n++
		}
	}
	return n
}

// durJSONEqual compares two values as JSON.
func durJSONEqual(t *testing.T, a, b any) bool {
	t.Helper()
	norm := func(v any) any {
		data, err := json.Marshal(v)
		if err != nil {
			t.Fatal(err)
		}
		var out any
		if err := json.Unmarshal(data, &out); err != nil {
			t.Fatal(err)
		}
		return out
	}
	return reflect.DeepEqual(norm(a), norm(b))
}

func durSorted(s []string) []string {
	c := slices.Clone(s)
	slices.Sort(c)
	return c
}

// TestTwoProcessesOneStore runs two runs of one pipeline in two processes
// at once on one store. The fake model holds each process's first request
// until the other's has arrived, so both runs are in progress together,
// and answers slowly, so that their checkpoints interleave.
func TestTwoProcessesOneStore(t *testing.T) {
	dir := t.TempDir()
	pipeline := writeFile(t, dir, "durable.yaml", durablePipeline)
	model := newDurModel(t)

	base := filepath.Join(dir, "base.db")
	want := map[string]map[string]any{}
	for _, topic := range []string{"alpha", "beta"} {
		code, stdout, stderr := runDurProc(t, model.env("sk-base"), "run", pipeline, "--input", "topic="+topic, "--store", base)
		if code != exitOK {
			t.Fatalf("run alone: exit %d\n%s", code, stderr)
		}
		want[topic] = durOutputs(t, stdout)
	}
	if reflect.DeepEqual(want["alpha"], want["beta"]) {
		t.Fatal("the two topics give the same outputs: the test could not tell the runs apart")
	}

	both := make(chan struct{})
	var once sync.Once
	// Registered after the server: a failed test does not leave a request
	// held until the deadline while the server's Close waits for it.
	t.Cleanup(func() { once.Do(func() { close(both) }) })
	var mu sync.Mutex
	first := map[string]bool{}
	for _, key := range []string{"sk-alpha", "sk-beta"} {
		model.hook(key, func(n int, _ string) llmtest.Reply {
			if n == 1 {
				mu.Lock()
				first[key] = true
				if len(first) == 2 {
					once.Do(func() { close(both) })
				}
				mu.Unlock()
				select {
				case <-both:
				case <-time.After(durDeadline):
					t.Errorf("%s: the other process never sent a request", key)
				}
			}
			return llmtest.Reply{Delay: 3 * time.Millisecond}
		})
	}
	shared := filepath.Join(dir, "shared.db")
	procs := map[string]*durProc{}
	for _, topic := range []string{"alpha", "beta"} {
		procs[topic] = startDurProc(t, model.env("sk-"+topic), "run", pipeline, "--input", "topic="+topic, "--json", "--store", shared)
	}
	ids := map[string]string{}
	for _, topic := range []string{"alpha", "beta"} {
		p := procs[topic]
		if code := p.wait(); code != exitOK {
			t.Fatalf("%s: exit %d\n%s", topic, code, p.stderr())
		}
		fin := durLastEvent(t, p.stdout())
		if fin.Type != "run_finished" || fin.Status != "completed" {
			t.Fatalf("%s: last event %+v", topic, fin)
		}
		if !reflect.DeepEqual(fin.Outputs, want[topic]) {
			t.Errorf("%s: outputs\n %v\nwant (run alone)\n %v", topic, fin.Outputs, want[topic])
		}
		ids[topic] = fin.Run
	}
	select {
	case <-both:
	default:
		t.Fatal("the two runs did not overlap")
	}

	code, stdout, stderr := runDurProc(t, nil, "runs", "--json", "--store", shared)
	if code != exitOK {
		t.Fatalf("runs --json: exit %d\n%s", code, stderr)
	}
	var runs []struct {
		ID      string         `json:"id"`
		Status  string         `json:"status"`
		Inputs  map[string]any `json:"inputs"`
		Outputs map[string]any `json:"outputs"`
	}
	if err := json.Unmarshal([]byte(stdout), &runs); err != nil {
		t.Fatalf("runs --json: %v\n%s", err, stdout)
	}
	if len(runs) != 2 {
		t.Fatalf("runs --json lists %d runs, want 2:\n%s", len(runs), stdout)
	}
	baseCPs := len(durCheckpointPaths(t, base, durRunOfTopic(t, base, "alpha")))
	for _, r := range runs {
		topic, _ := r.Inputs["topic"].(string)
		if r.ID != ids[topic] || r.Status != "completed" || !reflect.DeepEqual(r.Outputs, want[topic]) {
			t.Errorf("runs --json: %+v, want run %s completed with %v", r, ids[topic], want[topic])
		}
		if n := len(durCheckpointPaths(t, shared, r.ID)); n != baseCPs {
			t.Errorf("run %s has %d checkpoints, a run alone has %d", r.ID, n, baseCPs)
		}
	}
}

// durRunOfTopic is the id of the run in db whose topic input is topic.
func durRunOfTopic(t *testing.T, db, topic string) string {
	t.Helper()
	st, err := store.Open(db)
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	runs, err := st.Runs(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	for _, r := range runs {
		if r.Inputs["topic"] == topic {
			return r.ID
		}
	}
	t.Fatalf("no run of topic %s in %s", topic, db)
	return ""
}

// durFinished is the last line of --json output.
type durFinished struct {
	Type    string         `json:"type"`
	Run     string         `json:"run"`
	Status  string         `json:"status"`
	Outputs map[string]any `json:"outputs"`
}

func durLastEvent(t *testing.T, stdout string) durFinished {
	t.Helper()
	var last string
	sc := bufio.NewScanner(strings.NewReader(stdout))
	sc.Buffer(nil, 1<<20)
	for sc.Scan() {
		if strings.TrimSpace(sc.Text()) != "" {
			last = sc.Text()
		}
	}
	var e durFinished
	if err := json.Unmarshal([]byte(last), &e); err != nil {
		t.Fatalf("last line of --json output: %v\n%s", err, last)
	}
	return e
}

const durTwoCalls = `
version: 1
name: two
models: {default: {model: gpt-4.1-mini}}
nodes:
  - id: first
    llm: {prompt: "@first hello"}
  - id: second
    llm: {prompt: "@second ${{ nodes.first.text }}"}
outputs: {second: nodes.second.text}
`

// TestResumeInProgress resumes a run while its process is still running it
// (held in its second model call): refused with the holder's pid and exit
// 2. Once the holder has ended (failed, killed, or killed and not yet
// reaped by its parent), the resume goes ahead and redoes only the
// unfinished node; of two resumes started at once, one does.
func TestResumeInProgress(t *testing.T) {
	for _, end := range []string{"failed", "killed", "zombie", "killed, then two resumes at once"} {
		t.Run(end, func(t *testing.T) {
			if end == "zombie" {
				if _, err := os.Stat("/proc/self/stat"); err != nil {
					t.Skip("needs /proc to see a zombie")
				}
			}
			dir := t.TempDir()
			pipeline := writeFile(t, dir, "two.yaml", durTwoCalls)
			db := filepath.Join(dir, "runs.db")
			model := newDurModel(t)
			held, release := make(chan struct{}), make(chan struct{})
			var releaseOnce sync.Once
			// Registered after the server, so it runs before the server's
			// Close, which waits for the held request.
			t.Cleanup(func() { releaseOnce.Do(func() { close(release) }) })
			model.hook("sk-held", func(_ int, path string) llmtest.Reply {
				if path != "second" {
					return llmtest.Reply{}
				}
				close(held)
				select {
				case <-release:
				case <-time.After(durDeadline):
				}
				return llmtest.Error(401, "Incorrect API key provided.")
			})

			p := startDurProc(t, model.env("sk-held"), "run", pipeline, "--store", db)
			var early <-chan struct{}
			if end != "zombie" { // reaping it here would leave no zombie to see
				early = p.exited()
			}
			select {
			case <-held:
			case <-early:
				t.Fatalf("run ended early (%v):\n%s", p.waitErr, p.stderr())
			case <-time.After(durDeadline):
				t.Fatalf("the run never reached its second model call:\n%s", p.abort())
			}
			run := durOnlyRun(t, db)
			if run.Status != runtime.StatusRunning || run.PID != p.pid() {
				t.Fatalf("run %s: status %s pid %d, want running in pid %d", run.ID, run.Status, run.PID, p.pid())
			}

			code, _, stderr := runDurProc(t, model.env("sk-early"), "resume", run.ID, "--store", db)
			wantMsg := fmt.Sprintf("run %s is in progress in pid %d", run.ID, p.pid())
			if code != exitInvalid || !strings.Contains(stderr, wantMsg) {
				t.Fatalf("resume of a run in progress: exit %d, stderr:\n%s\nwant exit 2 and %q", code, stderr, wantMsg)
			}
			if got := model.paths("sk-early"); len(got) > 0 {
				t.Fatalf("the refused resume called the model for %v", got)
			}

			switch end {
			case "failed":
				releaseOnce.Do(func() { close(release) })
				if code := p.wait(); code != exitFailed {
					t.Fatalf("held run: exit %d, want 1 (its second call got a 401)\n%s", code, p.stderr())
				}
			case "zombie":
				p.kill()
				durWaitZombie(t, p.pid())
			default:
				p.kill()
				p.wait()
			}
			if end == "killed, then two resumes at once" {
				durRaceResumes(t, model, run.ID, db)
				return
			}

			code, stdout, stderr := runDurProc(t, model.env("sk-resume"), "resume", run.ID, "--store", db)
			if code != exitOK {
				t.Fatalf("resume after the holder %s: exit %d\n%s", end, code, stderr)
			}
			if out := durOutputs(t, stdout); !strings.HasPrefix(fmt.Sprint(out["second"]), "second#") {
				t.Fatalf("outputs %v", out)
			}
			if got := model.paths("sk-resume"); !reflect.DeepEqual(got, []string{"second"}) {
				t.Fatalf("the resume asked the model for %v, want only the unfinished node second", got)
			}
			if end == "zombie" {
				p.wait()
			}
		})
	}
}

// durRaceResumes starts two resumes of a run at once. The fake model holds
// the one that gets to the model call until the other has exited, which
// must have been refused: the run is in progress in the first one's pid.
func durRaceResumes(t *testing.T, model *durModel, runID, db string) {
	keys := []string{"sk-race-1", "sk-race-2"}
	won := make(chan string, len(keys))
	release := make(chan struct{})
	var once sync.Once
	t.Cleanup(func() { once.Do(func() { close(release) }) })
	procs := map[string]*durProc{}
	for _, key := range keys {
		model.hook(key, func(_ int, path string) llmtest.Reply {
			if path == "second" {
				won <- key
				select {
				case <-release:
				case <-time.After(durDeadline):
				}
			}
			return llmtest.Reply{}
		})
		procs[key] = startDurProc(t, model.env(key), "resume", runID, "--store", db)
	}
	var winner string
	select {
	case winner = <-won:
	case <-time.After(durDeadline):
		t.Fatal("neither resume got to the model call")
	}
	loser := procs[keys[0]]
	if winner == keys[0] {
		loser = procs[keys[1]]
	}
	select {
	case <-loser.exited():
	case other := <-won:
		t.Fatalf("both resumes run the run: %s and %s got to its model call", winner, other)
	case <-time.After(durDeadline):
		t.Fatalf("the second resume neither ran nor exited:\n%s", loser.abort())
	}
	want := fmt.Sprintf("run %s is in progress in pid %d", runID, procs[winner].pid())
	if code := loser.wait(); code != exitInvalid || !strings.Contains(loser.stderr(), want) {
		t.Fatalf("the second resume: exit %d, stderr:\n%s\nwant exit 2 and %q", code, loser.stderr(), want)
	}
	once.Do(func() { close(release) })
	if code := procs[winner].wait(); code != exitOK {
		t.Fatalf("the resume that won: exit %d\n%s", code, procs[winner].stderr())
	}
	if got := model.paths(winner); !reflect.DeepEqual(got, []string{"second"}) {
		t.Fatalf("the resume asked the model for %v, want only the unfinished node second", got)
	}
}

// durWaitZombie waits until a killed, unreaped process is a zombie.
func durWaitZombie(t *testing.T, pid int) {
	t.Helper()
	deadline := time.Now().Add(durDeadline)
	for {
		b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
		if err != nil {
			t.Fatalf("pid %d: %v", pid, err)
		}
		if i := bytes.LastIndexByte(b, ')'); i > 0 && bytes.HasPrefix(bytes.TrimSpace(b[i+1:]), []byte("Z")) {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("pid %d is not a zombie after SIGKILL: %s", pid, b)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// TestSecretNotInStore runs model calls with a recognisable API key in the
// process environment (OPENAI_API_KEY, and a variable a model names with
// api_key_env), through a 401 whose body echoes the key, a resume and
// successful calls, then reads every column of every row of every table of
// the store, and the database files' raw bytes, looking for the key.
func TestSecretNotInStore(t *testing.T) {
	random := func() string {
		var b [12]byte
		_, _ = rand.Read(b[:])
		return hex.EncodeToString(b[:])
	}
	secret := "FLOWRUNSECRET" + random()
	key := "sk-proj-" + secret
	// A password in OPENAI_BASE_URL is a secret in the environment too.
	password := "FLOWRUNPASSWORD" + random()
	dir := t.TempDir()
	db := filepath.Join(dir, "runs.db")
	model := newDurModel(t)
	var mu sync.Mutex
	reject := true
	echo := func(_ int, _ string) llmtest.Reply {
		mu.Lock()
		defer mu.Unlock()
		if reject {
			r := llmtest.Error(401, "Incorrect API key provided: "+key+". You can find your API key at https://platform.openai.com/account/api-keys.")
			r.Header = map[string]string{"X-Echo-Key": key}
			return r
		}
		return llmtest.Reply{}
	}
	model.hook(key, echo)
	setReject := func(v bool) {
		mu.Lock()
		reject = v
		mu.Unlock()
	}
	viaEnv := writeFile(t, dir, "env.yaml", durTwoCalls)
	viaKeyEnv := writeFile(t, dir, "keyenv.yaml", strings.Replace(durTwoCalls,
		"models: {default: {model: gpt-4.1-mini}}",
		fmt.Sprintf("models: {default: {model: gpt-4.1-mini, base_url: %q, api_key_env: FLOWRUN_TEST_MODEL_KEY}}", model.srv.URL), 1))
	env := model.env(key)
	keyEnv := []string{"FLOWRUN_TEST_MODEL_KEY=" + key}
	urlEnv := []string{"OPENAI_BASE_URL=" + strings.Replace(model.srv.URL, "://", "://flowrun:"+password+"@", 1), "OPENAI_API_KEY=" + key}

	var outputs []string
	step := func(wantCode int, env []string, args ...string) string {
		t.Helper()
		code, stdout, stderr := runDurProc(t, env, append(args, "--store", db)...)
		if code != wantCode {
			t.Fatalf("flowrun %s: exit %d, want %d\n%s", strings.Join(args, " "), code, wantCode, stderr)
		}
		outputs = append(outputs, stdout, stderr)
		return stderr
	}
	stderr := step(exitFailed, env, "run", viaEnv)
	if !strings.Contains(stderr, "Incorrect API key provided") {
		t.Fatalf("the 401's message is not reported, so the test proves nothing:\n%s", stderr)
	}
	failed := durOnlyRun(t, db).ID
	step(exitFailed, keyEnv, "run", viaKeyEnv)
	step(exitFailed, urlEnv, "run", viaEnv)
	step(exitFailed, env, "resume", failed, "--json")
	setReject(false)
	step(exitOK, env, "resume", failed)
	step(exitOK, env, "run", viaEnv, "--json")
	step(exitOK, keyEnv, "run", viaKeyEnv)
	step(exitOK, nil, "show", failed)
	if n := len(model.paths(key)); n < 8 {
		t.Fatalf("only %d model requests carried the key", n)
	}

	secrets := []string{secret, password}
	for i, out := range outputs {
		for _, sec := range secrets {
			if strings.Contains(out, sec) {
				t.Errorf("a secret is printed by a flowrun command (output %d):\n%s", i, out)
			}
		}
	}
	cells := durDumpStore(t, db)
	sawError, sawURL := false, false
	for _, c := range cells {
		for _, sec := range secrets {
			if strings.Contains(c.text, sec) {
				t.Errorf("a secret is in the store: table %s, row %d, column %s:\n%s", c.table, c.row, c.column, c.text)
			}
		}
		sawError = sawError || strings.Contains(c.text, "Incorrect API key provided")
		sawURL = sawURL || strings.Contains(c.text, "//flowrun:")
	}
	if !sawError {
		t.Error("no row holds the 401's message: the dump may not be reading the store")
	}
	if !sawURL {
		t.Error("no row names the endpoint with its user name, so the password check proves little")
	}
	for _, suffix := range []string{"", "-wal", "-shm", "-journal"} {
		raw, err := os.ReadFile(db + suffix)
		if errors.Is(err, os.ErrNotExist) {
			continue
		}
		if err != nil {
			t.Fatal(err)
		}
		for _, sec := range secrets {
			if bytes.Contains(raw, []byte(sec)) {
				t.Errorf("a secret is in the bytes of %s (a deleted or overwritten row?)", filepath.Base(db+suffix))
			}
		}
	}
}

type durCell struct {
	table, column string
	row           int
	text          string
}

// durDumpStore reads every column of every row of every table in the
// database (tables found in sqlite_master) as text.
func durDumpStore(t *testing.T, path string) []durCell {
	t.Helper()
	db, err := sql.Open("sqlite", "file:"+path+"?mode=ro")
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	var tables []string
	rows, err := db.Query(`SELECT name FROM sqlite_master WHERE type = 'table'`)
	if err != nil {
		t.Fatal(err)
	}
	for rows.Next() {
		var name string
		if err := rows.Scan(&name); err != nil {
			t.Fatal(err)
		}
		tables = append(tables, name)
	}
	if err := rows.Err(); err != nil {
		t.Fatal(err)
	}
	rows.Close()
	for _, want := range []string{"runs", "checkpoints", "events", "snapshots"} {
		if !slices.Contains(tables, want) {
			t.Fatalf("no table %s in the store (tables: %v)", want, tables)
		}
	}
	var out []durCell
	for _, table := range tables {
		rows, err := db.Query(`SELECT * FROM "` + strings.ReplaceAll(table, `"`, `""`) + `"`)
		if err != nil {
			t.Fatal(err)
		}
		cols, err := rows.Columns()
		if err != nil {
			t.Fatal(err)
		}
		n := 0
		for rows.Next() {
			vals := make([]any, len(cols))
			ptrs := make([]any, len(cols))
			for i := range vals {
				ptrs[i] = &vals[i]
			}
			if err := rows.Scan(ptrs...); err != nil {
				t.Fatal(err)
			}
			for i, v := range vals {
				text := fmt.Sprint(v)
				if b, ok := v.([]byte); ok {
					text = string(b)
				}
				out = append(out, durCell{table: table, column: cols[i], row: n, text: text})
			}
			n++
		}
		if err := rows.Err(); err != nil {
			t.Fatal(err)
		}
		rows.Close()
		if table == "events" && n == 0 {
			t.Fatal("the store holds no events")
		}
	}
	return out
}
