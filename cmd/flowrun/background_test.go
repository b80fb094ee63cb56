package main

import (
	"fmt"
	"path/filepath"
	"reflect"
	"regexp"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/flowrun/flowrun/figures"
	"github.com/flowrun/flowrun/internal/testwait"
	"github.com/flowrun/flowrun/llm/llmtest"
	"github.com/flowrun/flowrun/runtime"
	"github.com/flowrun/flowrun/store"
)

const backgroundPipeline = `
version: 1
name: background
models:
  deep: {model: o3, api: responses, background: true, poll: 5ms}
nodes:
  - id: plan
    llm: {model: deep, prompt: "plan it"}
  - id: answer
    llm: {model: deep, prompt: "answer after ${{ nodes.plan.text }}"}
outputs:
  plan: nodes.plan.text
  answer: nodes.answer.text
`

// backgroundServer is a fake server whose background responses each stay
// in progress for three polls.
func backgroundServer(t *testing.T) *llmtest.Server {
	srv := llmtest.New(t)
	srv.Handle(func(r llmtest.Request) llmtest.Reply {
		if strings.Contains(string(r.Raw), "answer after") {
			return llmtest.Reply{Text: "the answer", Polls: 3}
		}
		return llmtest.Reply{Text: "the plan", Polls: 3}
	})
	return srv
}

func backgroundEnv(srv *llmtest.Server) []string {
	return []string{"OPENAI_BASE_URL=" + srv.URL, "OPENAI_API_KEY=sk-bgtest-5c1d9e7f3a2b"}
}

// TestBackgroundKillMatrix kills flowrun with SIGKILL at every point
// around a background response's create and polls, for the first node and
// for the second (the first one checkpointed), resumes the run in a new
// process and requires the outputs of an uninterrupted run with no
// response created twice.
func TestBackgroundKillMatrix(t *testing.T) {
	dir := t.TempDir()
	pipeline := writeFile(t, dir, "background.yaml", backgroundPipeline)
	base := backgroundServer(t)
	code, stdout, stderr := runDurProc(t, backgroundEnv(base), "run", pipeline, "--store", filepath.Join(dir, "base.db"))
	if code != exitOK {
		t.Fatalf("uninterrupted run: exit %d\n%s", code, stderr)
	}
	want := durOutputs(t, stdout)
	if n := base.Creates(); n != 2 {
		t.Fatalf("uninterrupted run created %d responses, want 2", n)
	}

	points := []struct {
		name     string
		what     string // the server event to kill at
		response int    // which response (1: plan's, 2: answer's)
		polls    int    // on a poll, which one
		after    bool   // kill just after the server answers, not before
		creates  int    // responses created in all (2 unless noted)
	}{
		{name: "plan/first-poll", what: "poll", response: 1, polls: 1},
		{name: "plan/mid-poll", what: "poll", response: 1, polls: 2},
		// The response completes on the server with nobody polling: the
		// resume collects it.
		{name: "plan/completing-poll", what: "poll", response: 1, polls: 4},
		{name: "plan/after-completing-poll", what: "poll", response: 1, polls: 4, after: true},
		{name: "answer/first-poll", what: "poll", response: 2, polls: 1},
		{name: "answer/completing-poll", what: "poll", response: 2, polls: 4},
		{name: "answer/after-completing-poll", what: "poll", response: 2, polls: 4, after: true},
		// Killed while the server creates the response, before its id
		// reaches flowrun: no one can know that response, so the resume
		// creates another. The one window the API leaves open.
		{name: "plan/during-create", what: "create", response: 1, creates: 3},
		{name: "answer/during-create", what: "create", response: 2, creates: 3},
	}
	for _, pt := range points {
		t.Run(pt.name, func(t *testing.T) {
			srv := backgroundServer(t)
			db := filepath.Join(t.TempDir(), "runs.db")
			var mu sync.Mutex
			order := map[string]int{} // response id -> creation order
			var p *durProc
			killed := make(chan struct{})
			var once sync.Once
			srv.OnBackground(func(ev llmtest.BackgroundEvent) {
				mu.Lock()
				if ev.What == "create" {
					order[ev.ID] = len(order) + 1
				}
				hit := ev.What == pt.what && order[ev.ID] == pt.response && ev.Polls == pt.polls
				proc := p
				mu.Unlock()
				if !hit {
					return
				}
				once.Do(func() {
					// killed closes first: the process's exit must not
					// look, to the select below, as if it came before.
					kill := func() {
						close(killed)
						proc.kill()
					}
					if pt.after {
						go func() {
							time.Sleep(time.Millisecond)
							kill()
						}()
						return
					}
					kill()
					<-proc.exited()
				})
			})
			mu.Lock()
			p = startDurProc(t, backgroundEnv(srv), "run", pipeline, "--store", db)
			mu.Unlock()
			select {
			case <-killed:
			case <-p.exited():
				if !pt.after {
					t.Fatalf("flowrun ended (%v) before the kill point\nstderr:\n%s", p.waitErr, p.stderr())
				}
			}
			if code := p.wait(); code != -1 {
				if code != exitOK {
					t.Fatalf("killed run: exit %d\n%s", code, p.stderr())
				}
				t.Logf("the run completed before the kill landed")
			}
			srv.OnBackground(nil)
			run := durOnlyRun(t, db)
			if run.Status != runtime.StatusInterrupted && run.Status != "completed" {
				t.Fatalf("killed run has status %s", run.Status)
			}
			if pt.what == "poll" && pt.response == 1 && !pt.after {
				// The response id is durable before the first poll; the
				// polls are events, which a killed process may lose.
				_, shown, _ := runDurProc(t, nil, "show", run.ID, "--store", db)
				line := regexp.MustCompile(`(?m)^in flight: plan: response resp_1 (queued|in progress), \d+s, polled (once|\d+ times)$`).FindString(shown)
				if line == "" {
					t.Errorf("show does not say the call is in flight:\n%s", shown)
				}
				t.Log(line)
			}
			code, stdout, stderr := runDurProc(t, backgroundEnv(srv), "resume", run.ID, "--store", db)
			if code != exitOK && run.Status != "completed" {
				t.Fatalf("resume: exit %d\n%s", code, stderr)
			}
			if got := durOnlyRun(t, db); got.Status != "completed" || !reflect.DeepEqual(fmt.Sprint(got.Outputs), fmt.Sprint(want)) {
				t.Fatalf("resumed run: status %s outputs %v, want %v\n%s", got.Status, got.Outputs, want, stdout)
			}
			wantCreates := max(pt.creates, 2)
			if n := srv.Creates(); n != wantCreates {
				t.Errorf("%d responses created, want %d", n, wantCreates)
			}
		})
	}
}

// TestBackgroundStopCancelsOnServer stops a run while its background
// response is in progress, by each way a run is stopped, and requires the
// response cancelled on the server, the run resumable, and the resume to
// create a new response rather than collect the cancelled one.
func TestBackgroundStopCancelsOnServer(t *testing.T) {
	dir := t.TempDir()
	timed := strings.Replace(backgroundPipeline, `llm: {model: deep, prompt: "plan it"}`, "llm: {model: deep, prompt: \"plan it\"}\n    timeout: 2s\n    on_error: fail", 1)
	cases := []struct {
		name     string
		pipeline string
		stop     func(t *testing.T, p *durProc, db string)
		status   []string
		// at is the server event after which the run is stopped: a poll,
		// so that flowrun knows the response, or, with a node timeout,
		// the create (auto streams a call with a timeout).
		at string
	}{
		{name: "store-stop", pipeline: backgroundPipeline, at: "poll", status: []string{"stopped"}, stop: func(t *testing.T, p *durProc, db string) {
			st, err := store.Open(db)
			if err != nil {
				t.Error(err)
				return
			}
			defer st.Close()
			if err := st.RequestStop(t.Context(), durOnlyRun(t, db).ID, "the user pressed Stop"); err != nil {
				t.Error(err)
			}
		}},
		{name: "sigterm", pipeline: backgroundPipeline, at: "poll", status: []string{"stopped", string(runtime.StatusInterrupted)}, stop: func(t *testing.T, p *durProc, _ string) {
			if err := p.cmd.Process.Signal(syscall.SIGTERM); err != nil {
				t.Error(err)
			}
		}},
		{name: "ctrl-c", pipeline: backgroundPipeline, at: "poll", status: []string{"stopped", string(runtime.StatusInterrupted)}, stop: func(t *testing.T, p *durProc, _ string) {
			if err := p.cmd.Process.Signal(syscall.SIGINT); err != nil {
				t.Error(err)
			}
		}},
		// The response never ends: the node's timeout stops it.
		{name: "node-timeout", pipeline: timed, at: "create", status: []string{"failed"}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			pipeline := writeFile(t, dir, c.name+".yaml", c.pipeline)
			srv := llmtest.New(t)
			var mu sync.Mutex
			endless := true
			srv.Handle(func(llmtest.Request) llmtest.Reply {
				mu.Lock()
				defer mu.Unlock()
				if endless {
					return llmtest.Reply{Text: "never", Polls: 1 << 30}
				}
				return llmtest.Text("fine")
			})
			db := filepath.Join(t.TempDir(), "runs.db")
			polled := make(chan struct{})
			var once sync.Once
			srv.OnBackground(func(ev llmtest.BackgroundEvent) {
				if ev.What == c.at {
					once.Do(func() { close(polled) })
				}
			})
			p := startDurProc(t, backgroundEnv(srv), "run", pipeline, "--store", db)
			select {
			case <-polled:
			case <-p.exited():
				t.Fatalf("flowrun ended before polling\n%s", p.stderr())
			}
			asked := time.Now()
			if c.stop != nil {
				c.stop(t, p, db)
			}
			// Bounded by the test's -timeout, not by a guess at how fast
			// this machine is.
			id := <-srv.Cancels()
			since := "the stop was asked"
			if c.stop == nil {
				since = "the create (the node's timeout is 2s)"
			}
			t.Logf("%s: cancelled %s on the server %s after %s", c.name, id, time.Since(asked).Round(time.Millisecond), since)
			if s := srv.Status(id); s != "cancelled" {
				t.Errorf("server status %s", s)
			}
			p.wait()
			run := durOnlyRun(t, db)
			if !slices.Contains(c.status, string(run.Status)) {
				t.Fatalf("run status %s, want one of %v\n%s", run.Status, c.status, p.stderr())
			}
			mu.Lock()
			endless = false
			mu.Unlock()
			code, _, stderr := runDurProc(t, backgroundEnv(srv), "resume", run.ID, "--store", db)
			if code != exitOK {
				t.Fatalf("resume: exit %d\n%s", code, stderr)
			}
			if n := srv.Creates(); n != 3 {
				t.Errorf("%d responses created, want 3: the cancelled one, its replacement and the second node's", n)
			}
		})
	}
}

// A background call is seen in the node's span: created and completed,
// with the response id.
func TestBackgroundInTrace(t *testing.T) {
	otelEnv(t)
	rc, url := startOTLPReceiver(t)
	srv := backgroundServer(t)
	t.Setenv("OPENAI_BASE_URL", srv.URL)
	pipeline := writeFile(t, t.TempDir(), "background.yaml", backgroundPipeline)
	code, _, stderr := flowrun(t, "run", pipeline, "--store", filepath.Join(t.TempDir(), "runs.db"), "--otel", url)
	if code != exitOK {
		t.Fatalf("exit %d\n%s", code, stderr)
	}
	spans, _ := rc.take()
	var got []string
	for _, s := range spans {
		if s.Name != "node plan" {
			continue
		}
		for _, ev := range s.Events {
			for _, a := range ev.Attributes {
				if a.Key == "flowrun.remote_work.id" {
					got = append(got, ev.Name+" "+a.Value.GetStringValue())
				}
			}
		}
	}
	want := []string{"flowrun.remote_work.created resp_1", "flowrun.remote_work.completed resp_1"}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("span events of node plan: %v, want %v", got, want)
	}
}

// TestBackgroundReattachOnAnotherWorker kills the cluster worker running a
// batch item in the middle of its background call; another worker picks
// the item up from the checkpoints JetStream holds and re-attaches to the
// same response.
func TestBackgroundReattachOnAnotherWorker(t *testing.T) {
	dir := t.TempDir()
	pipeline := writeFile(t, dir, "background.yaml", strings.Replace(backgroundPipeline, "models:", "inputs: {id: {type: string}}\nmodels:", 1))
	data := clusterItems(t, dir, 1)
	srv := backgroundServer(t)
	ns := startNATS(t)
	worker := func() *durProc {
		return startDurProc(t, backgroundEnv(srv), append([]string{"worker", "--nats", ns.url(), "--concurrency", "1", "--ack-wait", "3s", "--cache-dir", t.TempDir()}, workerKeys(t)...)...)
	}
	first := worker()
	killed := make(chan struct{})
	var once sync.Once
	srv.OnBackground(func(ev llmtest.BackgroundEvent) {
		if ev.What == "poll" && ev.ID == "resp_1" && ev.Polls == 2 {
			once.Do(func() {
				first.kill()
				<-first.exited()
				close(killed)
			})
		}
	})
	db := filepath.Join(t.TempDir(), "coord.db")
	coord := startDurProc(t, backgroundEnv(srv), append([]string{"batch", pipeline, "--dataset", data, "--nats", ns.url(), "--store", db}, coordinatorKeys(t)...)...)
	select {
	case <-killed:
	case <-coord.exited():
		t.Fatalf("the batch ended before the kill\n%s", coord.stderr())
	}
	worker()
	if code := coord.wait(); code != exitOK {
		t.Fatalf("batch: exit %d\n%s", code, coord.stderr())
	}
	if n := srv.Creates(); n != 2 {
		t.Errorf("%d responses created, want 2: the second worker must re-attach to the first's", n)
	}
}

// TestBackgroundBatchCostCapCancels: on workers, i2's plan spends past
// --max-cost-usd while i1's background response is in flight (i2's plan
// answers only once i1's response is polled, so the order is fixed). The
// batch's ledger refuses i2's next call before it is sent, the halt
// stops i1 and its response is cancelled on the server. The cancelled
// call counts at its reservation, never $0, and the stop line, the
// summary and the store tell one and the same spend.
func TestBackgroundBatchCostCapCancels(t *testing.T) {
	dir := t.TempDir()
	pipeline := writeFile(t, dir, "background.yaml", strings.NewReplacer(
		"models:", "inputs: {id: {type: string}}\nmodels:",
		`prompt: "plan it"`, `prompt: "plan ${{ inputs.id }}"`,
	).Replace(backgroundPipeline))
	data := clusterItems(t, dir, 2)
	srv := llmtest.New(t)
	polled := make(chan struct{})
	var once sync.Once
	srv.OnBackground(func(e llmtest.BackgroundEvent) {
		if e.What == "poll" {
			once.Do(func() { close(polled) })
		}
	})
	var answers atomic.Int32
	srv.Handle(func(r llmtest.Request) llmtest.Reply {
		raw := string(r.Raw)
		switch {
		case strings.Contains(raw, "answer after"):
			answers.Add(1)
		case strings.Contains(raw, "plan i2"):
			select {
			case <-polled:
			case <-time.After(testwait.Hang()):
				t.Errorf("i1's response was never polled")
			}
			return llmtest.Reply{Text: "the plan for i2", Usage: llmtest.Usage{Prompt: 1_000_000, Completion: 3}}
		}
		// Only the halt ends this response.
		return llmtest.Reply{Text: "never", Polls: 1 << 30}
	})
	ns := startNATS(t)
	startDurProc(t, backgroundEnv(srv), append([]string{"worker", "--nats", ns.url(), "--concurrency", "2", "--ack-wait", "3s", "--cache-dir", t.TempDir()}, workerKeys(t)...)...)
	db := filepath.Join(t.TempDir(), "coord.db")
	coord := startDurProc(t, backgroundEnv(srv), append([]string{"batch", pipeline, "--dataset", data, "--nats", ns.url(), "--store", db, "--max-cost-usd", "1"}, coordinatorKeys(t)...)...)
	select {
	case id := <-srv.Cancels():
		if s := srv.Status(id); s != "cancelled" {
			t.Errorf("response %s: %s on the server, want cancelled", id, s)
		}
	case <-time.After(testwait.Hang()):
		t.Fatalf("no background response was cancelled\n%s", coord.abort())
	}
	if code := coord.wait(); code != exitFailed || !strings.Contains(coord.stderr(), "stopped: the batch's cost cap of ") {
		t.Fatalf("batch: exit %d\n%s", code, coord.stderr())
	}
	if n := answers.Load(); n != 0 {
		t.Errorf("%d answer calls were sent, want none: the ledger refuses i2's before it is sent", n)
	}
	b, rows := lastBatch(t, db)
	spent := 0.0
	for _, r := range rows {
		if id := fmt.Sprint(r.Item["id"]); id == "i1" && r.CostUSD <= 0 {
			t.Errorf("i1, cancelled in flight, recorded $%v: want its reservation", r.CostUSD)
		}
		spent += r.CostUSD
	}
	told := figures.USD(spent)
	stopLine := regexp.MustCompile(`(?m)^stopped: .*$`).FindString(coord.stderr())
	summary := regexp.MustCompile(`(?m)^batch \S+ stopped: .*$`).FindString(coord.stderr())
	if !strings.Contains(stopLine, "reached: "+told+" spent") || !strings.Contains(b.Reason, "reached: "+told+" spent") || !strings.Contains(summary, "; "+told+",") {
		t.Errorf("the store recorded %s; the stop line says %q, the batch's reason %q, the summary %q", told, stopLine, b.Reason, summary)
	}
}

// A --model override that asks for background mode on a chat completions
// model is refused before any call, naming the model and the fix.
func TestBackgroundOverrideOnChatModel(t *testing.T) {
	t.Setenv("OPENAI_BASE_URL", "http://127.0.0.1:1/v1")
	code, _, stderr := flowrun(t, proposerPipeline, "--auto", "--model", "default=,background")
	if code != exitInvalid || !strings.Contains(stderr, `model override "default=,background": model "default": background needs the Responses API`) || !strings.Contains(stderr, "add the option responses") {
		t.Fatalf("exit %d\n%s", code, stderr)
	}
}
