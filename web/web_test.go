package web

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"html"
	"io"
	"mime/multipart"
	"net/http"
	"net/http/httptest"
	"net/url"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/flowrun/flowrun/dsl"
	"github.com/flowrun/flowrun/engine"
	"github.com/flowrun/flowrun/flowtest"
	"github.com/flowrun/flowrun/internal/testwait"
	"github.com/flowrun/flowrun/llm/llmtest"
	"github.com/flowrun/flowrun/nodes"
	"github.com/flowrun/flowrun/runtime"
	"github.com/flowrun/flowrun/store"
)

const chatPipeline = `
version: 1
name: chat
inputs:
  topic: {type: string, default: "web"}
  level: {type: string, enum: [low, high], default: low}
  count: {type: integer, default: 2}
models:
  default: {model: gpt-4.1-mini}
nodes:
  - id: reply
    llm:
      prompt: "Say something about ${{ inputs.topic }}"
outputs: {text: nodes.reply.text}
`

const askPipeline = `
version: 1
name: asker
state: {n: 0}
nodes:
  - id: rounds
    loop:
      max_iterations: 2
      until: state.n >= 2
      body:
        - id: inc
          set: {n: state.n + 1}
  - id: name
    ask:
      question: "Who are you?"
      schema: {type: object, properties: {who: {type: string}}, required: [who]}
  - id: careful
    confirm: true
    set: {}
outputs: {who: nodes.name.who}
`

const counterPipeline = `
version: 1
name: counter
state: {n: 0}
nodes:
  - id: rounds
    loop:
      max_iterations: 5
      until: state.n >= 5
      body:
        - id: inc
          confirm: true
          set: {n: state.n + 1}
outputs: {n: state.n}
`

const slowConfirmPipeline = `
version: 1
name: slowconfirm
models:
  default: {model: gpt-4.1-mini}
nodes:
  - id: think
    llm:
      prompt: "think"
  - id: act
    confirm: true
    set: {}
outputs: {text: nodes.think.text}
`

// testEngine runs pipelines with a model client pointed at OPENAI_BASE_URL
// (the fake server's, set by the test).
func testEngine(t *testing.T, st *store.Store) *engine.Engine {
	e, err := engine.New(engine.Options{Store: st, MaxAttempts: 1})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { e.Close() })
	return e
}

type harness struct {
	t    *testing.T
	srv  *Server
	ts   *httptest.Server
	st   *store.Store
	dir  string
	fake *llmtest.Server
	c    *http.Client
}

func newHarness(t *testing.T, token string, options ...func(*Options)) *harness {
	t.Helper()
	fake := llmtest.New(t)
	t.Setenv("OPENAI_BASE_URL", fake.URL)
	t.Setenv("OPENAI_API_KEY", "")
	dir := t.TempDir()
	for name, body := range map[string]string{"chat.yaml": chatPipeline, "asker.yaml": askPipeline, "counter.yaml": counterPipeline, "slowconfirm.yaml": slowConfirmPipeline, "broken.yaml": "version: 1\nname: broken\nnodes:\n  - id: a\n    sett: {}\n"} {
		if err := os.WriteFile(filepath.Join(dir, name), []byte(body), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	st, err := store.Open(filepath.Join(t.TempDir(), "runs.db"))
	if err != nil {
		t.Fatal(err)
	}
	o := Options{Store: st, Dir: dir, Engine: testEngine(t, st), Token: token, Poll: 10 * time.Millisecond}
	for _, f := range options {
		f(&o)
	}
	srv, err := New(o)
	if err != nil {
		t.Fatal(err)
	}
	ts := httptest.NewServer(srv)
	t.Cleanup(func() {
		ts.Close()
		srv.Close()
		st.Close()
	})
	c := &http.Client{CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
	return &harness{t: t, srv: srv, ts: ts, st: st, dir: dir, fake: fake, c: c}
}

func (h *harness) get(path string) (int, string) {
	h.t.Helper()
	resp, err := h.c.Get(h.ts.URL + path)
	if err != nil {
		h.t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b)
}

// post sends a form as the server's own page would: same origin, with
// the CSRF token. It returns the status and the Location.
func (h *harness) post(path string, form url.Values) (int, string) {
	h.t.Helper()
	form.Set("csrf", h.srv.csrf)
	req, _ := http.NewRequest(http.MethodPost, h.ts.URL+path, strings.NewReader(form.Encode()))
	req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	req.Header.Set("Origin", h.ts.URL)
	resp, err := h.c.Do(req)
	if err != nil {
		h.t.Fatal(err)
	}
	resp.Body.Close()
	return resp.StatusCode, resp.Header.Get("Location")
}

// shown is the error the page at loc shows, once.
func (h *harness) shown(loc string) string {
	h.t.Helper()
	_, page := h.get(loc)
	_, msg, _ := strings.Cut(page, `<pre class="error" id="error">`)
	msg, _, _ = strings.Cut(msg, "</pre>")
	return html.UnescapeString(msg)
}

// start starts a pipeline from the form and returns the run's id.
func (h *harness) start(form url.Values) string {
	h.t.Helper()
	code, loc := h.post("/start", form)
	id, ok := strings.CutPrefix(loc, "/runs/")
	if code != http.StatusSeeOther || !ok {
		h.t.Fatalf("start: %d, Location %q", code, loc)
	}
	return id
}

// await waits until the run has status.
// startNew writes the pipeline src as name in the served directory and
// starts it.
func (h *harness) startNew(name, src string) string {
	h.t.Helper()
	if err := os.WriteFile(filepath.Join(h.dir, name), []byte(src), 0o644); err != nil {
		h.t.Fatal(err)
	}
	return h.start(url.Values{"pipeline": {name}})
}

func (h *harness) await(id string, status runtime.Status) *store.Run {
	h.t.Helper()
	var r *store.Run
	var err error
	if !testwait.Until(func() bool {
		r, err = h.st.Run(context.Background(), id)
		return err == nil && r.Status == status
	}) {
		if err != nil {
			h.t.Fatalf("run %s: %v, want status %s within %s", id, err, status, testwait.Hang())
		}
		h.t.Fatalf("run %s: status %v after %s, want %s (%v)", id, r.Status, testwait.Hang(), status, r.Error)
	}
	return r
}

// awaitModelCall waits until the fake model server has had a request.
func (h *harness) awaitModelCall() {
	h.t.Helper()
	if !testwait.Until(func() bool { return h.fake.Calls() > 0 }) {
		h.t.Fatalf("no model call within %s", testwait.Hang())
	}
}

// awaitConfirmation waits until the run waits on a confirmation.
func (h *harness) awaitConfirmation(id string) *store.Run {
	h.t.Helper()
	run := h.await(id, "waiting")
	if !testwait.Until(func() bool {
		run = h.await(id, "waiting")
		return run.Pending != nil && run.Pending.Kind == runtime.QuestionConfirm
	}) {
		h.t.Fatalf("run %s: waiting on %+v after %s, want a confirmation", id, run.Pending, testwait.Hang())
	}
	return run
}

func TestStartFormRunsAndRunPageShowsIt(t *testing.T) {
	h := newHarness(t, "")
	h.fake.Push(llmtest.Text("hello from the model"))
	code, body := h.get("/start?pipeline=chat.yaml")
	for _, want := range []string{`name="in.topic" value="web"`, `<option value="high">high</option>`, `name="in.count" value="2" step="1"`, `name="model.default" value="gpt-4.1-mini"`} {
		if code != 200 || !strings.Contains(body, want) {
			t.Fatalf("start form: %d, want %q in:\n%s", code, want, body)
		}
	}
	id := h.start(url.Values{"pipeline": {"chat.yaml"}, "in.topic": {"birds"}, "in.level": {"high"}, "in.count": {"3"}, "model.default": {"gpt-other"}})
	run := h.await(id, "completed")
	if got := h.fake.Last().Model; got != "gpt-other" {
		t.Fatalf("the model override did not apply: %s", got)
	}
	if run.Inputs["topic"] != "birds" || run.Inputs["count"] != 3 || run.Outputs["text"] != "hello from the model" {
		t.Fatalf("inputs %v outputs %v", run.Inputs, run.Outputs)
	}
	if got := h.fake.Last().Raw; !strings.Contains(string(got), "Say something about birds") {
		t.Fatalf("model was sent %s", got)
	}
	_, page := h.get("/runs/" + id)
	// chat has no state: the state panel says so rather than show an empty table.
	for _, want := range []string{`data-node="reply" data-state="done"`, "hello from the model", `class="status completed"`, "reply", `id="no-state-changes"`} {
		if !strings.Contains(page, want) {
			t.Fatalf("run page lacks %q", want)
		}
	}
	if err := os.WriteFile(filepath.Join(h.dir, "chat.yaml"), []byte(strings.Replace(chatPipeline, "id: reply", "id: renamed", 1)), 0o644); err != nil {
		t.Fatal(err)
	}
	if _, page := h.get("/runs/" + id); !strings.Contains(page, `data-node="reply"`) || strings.Contains(page, `data-node="renamed"`) {
		t.Fatal("after an edit, the graph is not of the pipeline the run ran")
	}
	_, list := h.get("/?pipeline=chat&status=completed")
	if !strings.Contains(list, id) {
		t.Fatalf("runs list lacks %s", id)
	}
	_, list = h.get("/?status=failed")
	if strings.Contains(list, id) {
		t.Fatalf("the status filter kept run %s", id)
	}
}

// An invalid input is refused with the schema's reason and starts nothing.
func TestStartRefusesBadInput(t *testing.T) {
	h := newHarness(t, "")
	code, loc := h.post("/start", url.Values{"pipeline": {"chat.yaml"}, "in.level": {"medium"}})
	if msg := h.shown(loc); code != http.StatusSeeOther || !strings.Contains(msg, "level") {
		t.Fatalf("%d %s: %q", code, loc, msg)
	}
	runs, _ := h.st.Runs(context.Background())
	if len(runs) != 0 {
		t.Fatalf("%d runs started", len(runs))
	}
}

func TestStartShowsDiagnosticsWithCaret(t *testing.T) {
	h := newHarness(t, "")
	_, body := h.get("/start?pipeline=broken.yaml")
	if !strings.Contains(body, `id="diagnostics"`) || !strings.Contains(body, "broken.yaml:5:5") || !strings.Contains(body, "^") {
		t.Fatalf("no diagnostics with position and caret:\n%s", body)
	}
}

// Only pipelines under the directory can be started, however named.
func TestStartOnlyUnderDir(t *testing.T) {
	h := newHarness(t, "")
	outside := filepath.Join(t.TempDir(), "outside.yaml")
	if err := os.WriteFile(outside, []byte(chatPipeline), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(outside, filepath.Join(h.dir, "link.yaml")); err != nil {
		t.Fatal(err)
	}
	rel, _ := filepath.Rel(h.dir, outside)
	for _, name := range []string{outside, rel, "link.yaml"} {
		code, loc := h.post("/start", url.Values{"pipeline": {name}})
		msg := h.shown(loc)
		if code != http.StatusSeeOther || !strings.Contains(msg, "outside the served directory") {
			t.Errorf("%s: %d %s: %q", name, code, loc, msg)
		}
		if strings.Contains(msg, h.dir) {
			t.Errorf("%s: the message names the server's directory: %q", name, msg)
		}
	}
	if runs, _ := h.st.Runs(context.Background()); len(runs) != 0 {
		t.Fatalf("%d runs started", len(runs))
	}
}

func TestStateChangesNeedCSRFTokenAndSameOrigin(t *testing.T) {
	h := newHarness(t, "")
	send := func(origin, token string) int {
		form := url.Values{"pipeline": {"chat.yaml"}, "csrf": {token}}
		req, _ := http.NewRequest(http.MethodPost, h.ts.URL+"/start", strings.NewReader(form.Encode()))
		req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
		if origin != "" {
			req.Header.Set("Origin", origin)
		}
		resp, err := h.c.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		return resp.StatusCode
	}
	for _, c := range []struct{ origin, token string }{
		{h.ts.URL, ""}, {h.ts.URL, "wrong"}, {"http://evil.example", h.srv.csrf}, {"", h.srv.csrf},
		// Same host and port, another scheme or port: another origin.
		{strings.Replace(h.ts.URL, "http://", "https://", 1), h.srv.csrf},
		{strings.Replace(h.ts.URL, "http://", "ws://", 1), h.srv.csrf},
		{h.ts.URL + "1", h.srv.csrf},
		{"null", h.srv.csrf},
	} {
		if got := send(c.origin, c.token); got != http.StatusForbidden {
			t.Errorf("origin %q token %q: %d, want 403", c.origin, c.token, got)
		}
	}
	if runs, _ := h.st.Runs(context.Background()); len(runs) != 0 {
		t.Fatalf("%d runs started", len(runs))
	}
	// The server's own origin, its host written in capitals, passes the
	// check (the start then redirects).
	h.fake.Push(llmtest.Text("hello"))
	if got := send(strings.ToUpper(h.ts.URL), h.srv.csrf); got != http.StatusSeeOther {
		t.Errorf("this server's own origin: %d, want 303", got)
	}
}

func TestTokenRequiredAndKeptInCookie(t *testing.T) {
	h := newHarness(t, "s3cret-token")
	if code, _ := h.get("/"); code != http.StatusUnauthorized {
		t.Fatalf("no token: %d", code)
	}
	if code, _ := h.get("/?token=wrong"); code != http.StatusUnauthorized {
		t.Fatalf("wrong token: %d", code)
	}
	resp, err := h.c.Get(h.ts.URL + "/?token=s3cret-token")
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusSeeOther || strings.Contains(resp.Header.Get("Location"), "token") {
		t.Fatalf("token: %d to %q", resp.StatusCode, resp.Header.Get("Location"))
	}
	req, _ := http.NewRequest(http.MethodGet, h.ts.URL+"/", nil)
	for _, c := range resp.Cookies() {
		req.AddCookie(c)
	}
	resp, err = h.c.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("with the cookie: %d", resp.StatusCode)
	}
}

// Without a token, a request naming another host (DNS rebinding) is refused.
func TestLoopbackOnlyAnswersLoopbackHosts(t *testing.T) {
	h := newHarness(t, "")
	req, _ := http.NewRequest(http.MethodGet, h.ts.URL+"/", nil)
	req.Host = "attacker.example:8377"
	resp, err := h.c.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusMisdirectedRequest {
		t.Fatalf("%d", resp.StatusCode)
	}
	if !IsLoopback("127.0.0.1:8377") || !IsLoopback("[::1]:1") || !IsLoopback("localhost:80") || IsLoopback("0.0.0.0:8377") || IsLoopback(":8377") {
		t.Fatal("IsLoopback")
	}
}

// A model reply, a tool result or an input holding markup is shown as
// text, on the page and in the live stream.
func TestModelOutputIsEscaped(t *testing.T) {
	h := newHarness(t, "")
	xss := `<script>alert(1)</script><img src=x onerror=alert(2)>`
	h.fake.Push(llmtest.Text(xss))
	id := h.start(url.Values{"pipeline": {"chat.yaml"}, "in.topic": {xss}})
	h.await(id, "completed")
	_, page := h.get("/runs/" + id + "?path=reply")
	if strings.Contains(page, "<script>alert") || strings.Contains(page, "<img src=x") {
		t.Fatal("markup from the model reached the page unescaped")
	}
	if !strings.Contains(page, "&lt;script&gt;alert(1)&lt;/script&gt;&lt;img src=x onerror=alert(2)&gt;") {
		t.Fatal("the reply is not shown as text")
	}
	stream := h.stream("/runs/"+id+"/live?after=0", "event: status", `"completed"`, `"tokens":`)
	if strings.Contains(stream, "<script>alert") || strings.Contains(stream, "<img src") {
		t.Fatal("markup reached the live stream unescaped")
	}
}

// stream reads an SSE stream until it has seen every one of want.
func (h *harness) stream(path string, want ...string) string {
	h.t.Helper()
	ctx := testwait.HangContext(h.t)
	req, _ := http.NewRequestWithContext(ctx, http.MethodGet, h.ts.URL+path, nil)
	resp, err := h.c.Do(req)
	if err != nil {
		h.t.Fatal(err)
	}
	defer resp.Body.Close()
	var got strings.Builder
	sc := bufio.NewScanner(resp.Body)
	sc.Buffer(make([]byte, 1<<20), 1<<24)
	for sc.Scan() {
		got.WriteString(sc.Text() + "\n")
		done := true
		for _, w := range want {
			done = done && strings.Contains(got.String(), w)
		}
		if done {
			return got.String()
		}
	}
	if ctx.Err() != nil {
		h.t.Fatalf("stream %s: no %q within %s:\n%s", path, want, testwait.Hang(), got.String())
	}
	h.t.Fatalf("stream %s ended without %q:\n%s", path, want, got.String())
	return ""
}

// A run started by another process on the same store appears on the live
// runs list.
func TestRunsListLiveSeesOtherWriters(t *testing.T) {
	h := newHarness(t, "")
	other, err := store.Open(h.st.Path())
	if err != nil {
		t.Fatal(err)
	}
	defer other.Close()
	ready := make(chan struct{})
	go func() {
		<-ready
		p, _ := dsl.Load(filepath.Join(h.dir, "asker.yaml"))
		r := &engine.Runner{Store: other, Kinds: nodes.Kinds(nodes.Services{})}
		_, _ = r.StartAs(context.Background(), "20990101T000000-elsewhere", p, nil)
	}()
	close(ready)
	h.stream("/live/runs", "20990101T000000-elsewhere", "waiting")
}

func TestAnswerConfirmSnapshotRollbackFork(t *testing.T) {
	h := newHarness(t, "")
	id := h.start(url.Values{"pipeline": {"asker.yaml"}})
	h.await(id, "waiting")
	_, page := h.get("/runs/" + id)
	if !strings.Contains(page, `name="a.who"`) || !strings.Contains(page, "Who are you?") {
		t.Fatal("no answer form for the ask")
	}
	if code, loc := h.post("/runs/"+id+"/snapshot", url.Values{"label": {"asked"}}); code != http.StatusSeeOther || strings.Contains(loc, "flash=") {
		t.Fatalf("snapshot: %d %s", code, loc)
	}
	if code, loc := h.post("/runs/"+id+"/answer", url.Values{"a.who": {"ada"}}); code != http.StatusSeeOther || strings.Contains(loc, "flash=") {
		t.Fatalf("answer: %d %s", code, loc)
	}
	run := h.awaitConfirmation(id)
	_, page = h.get("/runs/" + id)
	if !strings.Contains(page, `id="answer-yes"`) {
		t.Fatal("no Yes/No for the confirmation")
	}
	h.post("/runs/"+id+"/answer", url.Values{"answer": {"yes"}})
	run = h.await(id, "completed")
	if run.Outputs["who"] != "ada" {
		t.Fatalf("outputs %v", run.Outputs)
	}
	code, loc := h.post("/runs/"+id+"/fork", url.Values{"from": {"asked"}})
	child, ok := strings.CutPrefix(loc, "/runs/")
	if code != http.StatusSeeOther || !ok {
		t.Fatalf("fork: %d %s", code, loc)
	}
	c := h.await(child, "waiting")
	if c.ParentRun != id {
		t.Fatalf("fork's parent %q", c.ParentRun)
	}
	_, page = h.get("/runs/" + child)
	if !strings.Contains(page, "Forked from <a href=\"/runs/"+id+"\">") {
		t.Fatal("the fork does not link to its parent")
	}
	if !strings.Contains(page, `data-node="inc" data-state="done"`) {
		t.Fatal("the body of the loop the fork restored does not show as done")
	}
	if code, loc := h.post("/runs/"+id+"/rollback", url.Values{"snapshot": {"asked"}}); code != http.StatusSeeOther || strings.Contains(loc, "flash=") {
		t.Fatalf("rollback: %d %s", code, loc)
	}
	snaps, _ := h.st.Snapshots(context.Background(), id)
	if len(snaps) != 2 || snaps[1].Kind != store.KindRollback {
		t.Fatalf("snapshots after rollback: %v", snaps)
	}
	_, loc = h.post("/runs/"+id+"/fork", url.Values{"from": {"0"}})
	child, ok = strings.CutPrefix(loc, "/runs/")
	if !ok {
		t.Fatalf("fork from checkpoint 0: %s", loc)
	}
	if c := h.await(child, "waiting"); c.ParentRun != id || c.ParentSeq != 0 || c.Pending == nil || c.Pending.Path != "name" {
		t.Fatalf("fork from checkpoint 0: %+v", c)
	}
}

// Stop cancels the model call in flight; the run is stopped and resumes.
func TestStopDuringModelCallThenResume(t *testing.T) {
	h := newHarness(t, "")
	h.fake.Push(llmtest.Reply{Text: "late", Delay: time.Minute}, llmtest.Text("on time"))
	id := h.start(url.Values{"pipeline": {"chat.yaml"}})
	h.awaitModelCall()
	if code, loc := h.post("/runs/"+id+"/stop", url.Values{}); code != http.StatusSeeOther || strings.Contains(loc, "flash=") {
		t.Fatalf("stop: %d %s", code, loc)
	}
	run := h.await(id, "stopped")
	if !strings.Contains(run.Reason, "stopped from the web UI") {
		t.Fatalf("reason %q", run.Reason)
	}
	if _, page := h.get("/runs/" + id); !strings.Contains(page, `data-node="reply" data-state="pending"`) {
		t.Fatal("the node cut short does not show as pending, to run again")
	}
	// The abandoned call is marked cancelled, not as a failure to fix.
	if _, page := h.get("/runs/" + id); !strings.Contains(page, "cancelled: cancelled while calling") {
		t.Fatal("the abandoned model call is not shown as cancelled")
	}
	h.post("/runs/"+id+"/resume", url.Values{})
	run = h.await(id, "completed")
	if run.Outputs["text"] != "on time" {
		t.Fatalf("outputs %v", run.Outputs)
	}
}

// A run this server did not start (the CLI's, here a runner of its own
// on the same store) shows a Stop button; Stop asks it through the store,
// and it ends stopped with the web UI's reason, the model call abandoned.
func TestStopRunStartedElsewhere(t *testing.T) {
	h := newHarness(t, "")
	h.fake.Push(llmtest.Reply{Text: "late", Delay: time.Minute})
	type ending struct {
		res *runtime.Result
		err error
	}
	p, ds := dsl.Load(filepath.Join(h.dir, "chat.yaml"))
	if p == nil {
		t.Fatal(ds)
	}
	ended := make(chan ending, 1)
	go func() {
		r, err := testEngine(h.t, h.st).Start(context.Background(), p, nil, engine.RunOptions{})
		if err != nil {
			ended <- ending{nil, err}
			return
		}
		ended <- ending{r.Wait(), nil}
	}()
	h.awaitModelCall()
	runs, err := h.st.Runs(context.Background())
	if err != nil || len(runs) != 1 {
		t.Fatalf("runs %v (%v)", runs, err)
	}
	id := runs[0].ID
	if _, page := h.get("/runs/" + id); !strings.Contains(page, `id="stop"`) {
		t.Fatal("no Stop button for a run started by another process")
	}
	asked := time.Now()
	if code, loc := h.post("/runs/"+id+"/stop", url.Values{}); code != http.StatusSeeOther || strings.Contains(loc, "flash=") {
		t.Fatalf("stop: %d %s: %s", code, loc, h.shown(loc))
	}
	select {
	case e := <-ended:
		if e.res == nil || e.res.Status != runtime.StatusStopped || e.res.Reason != "stopped from the web UI" {
			t.Fatalf("the run ended %+v (%v), want stopped from the web UI", e.res, e.err)
		}
	case <-time.After(testwait.Hang()):
		t.Fatalf("the run did not stop %s after Stop", time.Since(asked))
	}
	if run := h.await(id, "stopped"); run.Reason != "stopped from the web UI" {
		t.Fatalf("recorded reason %q", run.Reason)
	}
	if code, loc := h.post("/runs/"+id+"/stop", url.Values{}); code != http.StatusSeeOther || !strings.Contains(h.shown(loc), "not running") {
		t.Fatalf("a second stop of the stopped run: %d %s", code, loc)
	}
}

// The batch pages list batches with their progress, show one's items and
// compare two, fixed and broken items named.
func TestBatchPages(t *testing.T) {
	h := newHarness(t, "")
	ctx := context.Background()
	add := func(id string, pass ...bool) {
		b := &store.Batch{ID: id, Pipeline: "chat.yaml", PipelineAbs: filepath.Join(h.dir, "chat.yaml"), PipelineName: "chat", Dataset: "d.jsonl"}
		var items []*store.BatchItem
		for i := range pass {
			items = append(items, &store.BatchItem{Index: i, Key: fmt.Sprintf("item-%d", i), Item: map[string]any{"q": i}})
		}
		if err := h.st.CreateBatch(ctx, b, items); err != nil {
			t.Fatal(err)
		}
		for i, p := range pass {
			it := items[i]
			it.Status, it.Scores, it.CostUSD = "completed", map[string]any{"correct": p}, 0.01
			if err := h.st.FinishItem(ctx, it); err != nil {
				t.Fatal(err)
			}
		}
	}
	add("batch-a", true, false, true)
	add("batch-b", false, true, true)
	_, list := h.get("/batches")
	if !strings.Contains(list, `href="/batches/batch-a"`) || !strings.Contains(list, `<progress max="3" value="3">`) {
		t.Fatalf("batches list:\n%s", list)
	}
	_, one := h.get("/batches/batch-b")
	if !strings.Contains(one, "item-2") || !strings.Contains(one, `<span class="score pass">correct ✓</span>`) ||
		!strings.Contains(one, `<tbody class="item failing" id="item-0">`) || strings.Contains(one, "correct=") {
		t.Fatalf("batch page:\n%s", one)
	}
	_, cmp := h.get("/compare?a=batch-a&b=batch-b")
	fixed, broken, _ := strings.Cut(cmp, "<h2>Broken")
	if !strings.Contains(fixed, "<td>item-1</td>") || !strings.Contains(broken, "<td>item-0</td>") {
		t.Fatalf("compare page:\n%s", cmp)
	}
	if code, report := h.get("/batches/batch-b/report?against=batch-a"); code != 200 || !strings.Contains(report, "item-0") {
		t.Fatalf("report: %d", code)
	}
}

func TestRunsListSorts(t *testing.T) {
	h := newHarness(t, "")
	ctx := context.Background()
	for i, cost := range []float64{0.5, 0.1, 0.9} {
		id := fmt.Sprintf("run-%d", i)
		if err := h.st.CreateRun(ctx, &store.Run{ID: id, Pipeline: "chat.yaml", PipelineAbs: filepath.Join(h.dir, "chat.yaml"), PipelineName: "chat"}); err != nil {
			t.Fatal(err)
		}
		if err := h.st.Finish(ctx, id, store.Ending{Status: "completed", CostUSD: cost, Tokens: 100 - i}); err != nil {
			t.Fatal(err)
		}
	}
	order := func(query string) string {
		_, page := h.get("/?" + query)
		var ids []string
		for _, part := range strings.Split(page, `data-run="`)[1:] {
			ids = append(ids, part[:strings.Index(part, `"`)])
		}
		return strings.Join(ids, " ")
	}
	for query, want := range map[string]string{
		"sort=cost&order=desc":   "run-2 run-0 run-1",
		"sort=cost&order=asc":    "run-1 run-0 run-2",
		"sort=tokens&order=desc": "run-0 run-1 run-2",
		"":                       "run-2 run-1 run-0",
	} {
		if got := order(query); got != want {
			t.Errorf("%q: %s, want %s", query, got, want)
		}
	}
}

// Images sent to a model show as thumbnails from raster data URLs only.
func TestThumbnails(t *testing.T) {
	png := thumbnail("data:image/png;base64,iVBORw0KGgo=")
	if png.Src == nil || png.Link != "" {
		t.Fatalf("png: %+v", png)
	}
	for _, u := range []string{"data:image/svg+xml;base64,PHN2Zz4=", `data:image/png;base64,"><script>`, "javascript:alert(1)", "https://example.com/a.png"} {
		if got := thumbnail(u); got.Src != nil {
			t.Errorf("%s shown as an image", u)
		}
	}
}

// A file given for a string input is its text, as --input name=@file.
func TestStartWithFileInput(t *testing.T) {
	h := newHarness(t, "")
	h.fake.Push(llmtest.Text("ok"))
	var body bytes.Buffer
	mw := multipart.NewWriter(&body)
	_ = mw.WriteField("csrf", h.srv.csrf)
	_ = mw.WriteField("pipeline", "chat.yaml")
	_ = mw.WriteField("in.topic", "ignored")
	fw, _ := mw.CreateFormFile("file.topic", "topic.txt")
	_, _ = fw.Write([]byte("topic from a file"))
	mw.Close()
	req, _ := http.NewRequest(http.MethodPost, h.ts.URL+"/start", &body)
	req.Header.Set("Content-Type", mw.FormDataContentType())
	req.Header.Set("Origin", h.ts.URL)
	resp, err := h.c.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	id, ok := strings.CutPrefix(resp.Header.Get("Location"), "/runs/")
	if !ok {
		t.Fatalf("start: %d %s", resp.StatusCode, resp.Header.Get("Location"))
	}
	if run := h.await(id, "completed"); run.Inputs["topic"] != "topic from a file" {
		t.Fatalf("inputs %v", run.Inputs)
	}
}

// Auto-advance answers the confirmations; max loops caps the loop.
func TestStartAutoAndMaxLoops(t *testing.T) {
	h := newHarness(t, "")
	id := h.start(url.Values{"pipeline": {"counter.yaml"}, "auto": {"on"}, "max_loops": {"2"}})
	if run := h.await(id, "completed"); run.Outputs["n"] != 2 {
		t.Fatalf("outputs %v", run.Outputs)
	}
	id = h.start(url.Values{"pipeline": {"counter.yaml"}})
	h.await(id, "waiting")
	h.resumeOnAuto(id)
}

// A run's settings outlive the server that started it: another server on
// the same store resumes it with the max loops it was started with, and
// the auto-advance switched there is recorded with the run.
func TestSettingsOutliveTheServer(t *testing.T) {
	h := newHarness(t, "")
	id := h.start(url.Values{"pipeline": {"counter.yaml"}, "max_loops": {"2"}})
	h.await(id, "waiting")
	other := newHarness(t, "", func(o *Options) { o.Store, o.Dir, o.Engine = h.st, h.dir, testEngine(t, h.st) })
	other.post("/runs/"+id+"/auto", url.Values{"auto": {"on"}})
	if run, _ := h.st.Run(context.Background(), id); !run.Spec.Auto || run.Spec.MaxLoops != 2 {
		t.Fatalf("the run records %+v, want auto-advance and max loops 2", run.Spec)
	}
	other.resume(id)
	if run := h.await(id, "completed"); run.Outputs["n"] != 2 {
		t.Fatalf("resumed by another server: outputs %v, want n = 2 (max loops 2)", run.Outputs)
	}
}

// resumeOnAuto switches a waiting counter.yaml run to auto-advance and
// resumes it: it counts on to 5.
func (h *harness) resumeOnAuto(id string) {
	h.t.Helper()
	h.post("/runs/"+id+"/auto", url.Values{"auto": {"on"}})
	h.resume(id)
	if run := h.await(id, "completed"); run.Outputs["n"] != 5 {
		h.t.Fatalf("outputs %v", run.Outputs)
	}
}

// resume resumes the run from its page. A run that has just recorded
// that it waits may still be closing its services here, and is refused
// as already running until it is done: the resume is tried again while
// that is the refusal, and any other refusal fails the test.
func (h *harness) resume(id string) {
	h.t.Helper()
	refusal := ""
	if !testwait.Until(func() bool {
		code, loc := h.post("/runs/"+id+"/resume", url.Values{})
		if code != http.StatusSeeOther {
			h.t.Fatalf("resume %s: status %d", id, code)
		}
		if !strings.Contains(loc, "flash=") {
			return true
		}
		refusal = h.shown(loc)
		if refusal != "run "+id+" is already running" {
			h.t.Fatalf("resume %s refused: %q", id, refusal)
		}
		return false
	}) {
		h.t.Fatalf("resume %s still refused after %s: %q", id, testwait.Hang(), refusal)
	}
}

// TestResumeWaitsWhileThePreviousRunCloses: a resume that comes while
// the run's previous goroutine is still active here, between the run
// recording that it waits and its services closing (as when a person
// presses Yes the moment the question shows, or under load), waits for
// it to close and goes on: no "already running" refusal is shown.
func TestResumeWaitsWhileThePreviousRunCloses(t *testing.T) {
	h := newHarness(t, "")
	id := h.start(url.Values{"pipeline": {"counter.yaml"}})
	h.await(id, "waiting")
	h.awaitNotActive(id)
	closing := &activeRun{cancel: func(error) {}, human: newHuman(false), done: make(chan struct{}), text: newLiveText()}
	h.srv.mu.Lock()
	h.srv.active[id] = closing
	h.srv.mu.Unlock()
	time.AfterFunc(200*time.Millisecond, func() {
		closing.ended.Store(true)
		h.srv.mu.Lock()
		delete(h.srv.active, id)
		h.srv.mu.Unlock()
		close(closing.done)
	})
	h.resumeOnAuto(id)
	h.srv.flash.mu.Lock()
	defer h.srv.flash.mu.Unlock()
	for _, msg := range h.srv.flash.msgs {
		if strings.Contains(msg, "already running") {
			t.Errorf("the resume was refused while the previous run closed: %q", msg)
		}
	}
}

// awaitNotActive waits until no goroutine of the run is active here.
func (h *harness) awaitNotActive(id string) {
	h.t.Helper()
	if !testwait.Until(func() bool {
		h.srv.mu.Lock()
		defer h.srv.mu.Unlock()
		return h.srv.active[id] == nil
	}) {
		h.t.Fatalf("run %s still active here %s after it recorded that it waits", id, testwait.Hang())
	}
}

// Closing the server stops its runs, recorded as stopped and resumable,
// and waits for them.
func TestCloseStopsRuns(t *testing.T) {
	h := newHarness(t, "")
	h.fake.Push(llmtest.Reply{Text: "late", Delay: time.Minute})
	id := h.start(url.Values{"pipeline": {"chat.yaml"}})
	h.awaitModelCall()
	h.srv.Close()
	run, err := h.st.Run(context.Background(), id)
	if err != nil || run.Status != "stopped" || !strings.Contains(run.Reason, "shutting down") {
		t.Fatalf("after Close: %+v %v", run, err)
	}
}

// A page shows an error only from the server's own redirect, once: a
// link cannot put words on it.
func TestErrorsShownOnlyFromTheServer(t *testing.T) {
	h := newHarness(t, "")
	code, loc := h.post("/start", url.Values{"pipeline": {"chat.yaml"}, "in.level": {"medium"}})
	if code != http.StatusSeeOther || !strings.Contains(h.shown(loc), "level") {
		t.Fatalf("%d %s", code, loc)
	}
	if msg := h.shown(loc); msg != "" {
		t.Fatalf("shown twice: %q", msg)
	}
	if msg := h.shown("/?error=Your+session+expired&flash=made-up"); msg != "" {
		t.Fatalf("a link made the page say %q", msg)
	}
}

// Auto-advance switched on while a run runs answers the confirmation that
// comes after: the run completes instead of waiting.
func TestAutoAdvanceSwitchedOnWhileRunning(t *testing.T) {
	h := newHarness(t, "")
	h.fake.Push(llmtest.Reply{Text: "thought", Delay: 500 * time.Millisecond})
	id := h.start(url.Values{"pipeline": {"slowconfirm.yaml"}})
	h.awaitModelCall()
	if _, page := h.get("/runs/" + id); !strings.Contains(page, "Auto-advance: off") {
		t.Fatal("auto-advance does not show as off")
	}
	h.post("/runs/"+id+"/auto", url.Values{"auto": {"on"}})
	if _, page := h.get("/runs/" + id); !strings.Contains(page, "Auto-advance: on") {
		t.Fatal("auto-advance does not show as on")
	}
	if run := h.await(id, "completed"); run.Outputs["text"] != "thought" {
		t.Fatalf("outputs %v", run.Outputs)
	}
}

// A second Resume of a run already running here is refused: one run never
// executes twice at once.
func TestResumeRefusedWhileRunning(t *testing.T) {
	h := newHarness(t, "")
	h.fake.Push(llmtest.Reply{Text: "slow", Delay: 500 * time.Millisecond})
	id := h.start(url.Values{"pipeline": {"chat.yaml"}})
	h.awaitModelCall()
	_, loc := h.post("/runs/"+id+"/resume", url.Values{})
	if msg := h.shown(loc); !strings.Contains(msg, "already running") {
		t.Fatalf("second resume: %q", msg)
	}
	h.await(id, "completed")
	if n := h.fake.Calls(); n != 1 {
		t.Fatalf("%d model calls", n)
	}
}

// Answering No stops the run (as in the CLI); its page still offers the
// confirmation, and Yes from there runs the node.
func TestDeclinedConfirmationStopsAndYesResumes(t *testing.T) {
	h := newHarness(t, "")
	id := h.start(url.Values{"pipeline": {"asker.yaml"}})
	h.await(id, "waiting")
	h.post("/runs/"+id+"/answer", url.Values{"a.who": {"ada"}})
	run := h.awaitConfirmation(id)
	if code, loc := h.post("/runs/"+id+"/answer", url.Values{"answer": {"no"}}); code != http.StatusSeeOther || strings.Contains(loc, "flash=") {
		t.Fatalf("answering no: %d %s", code, loc)
	}
	run = h.await(id, "stopped")
	if !strings.Contains(run.Reason, "declined") {
		t.Fatalf("reason %q", run.Reason)
	}
	_, page := h.get("/runs/" + id)
	if !strings.Contains(page, `id="answer-yes"`) {
		t.Fatal("the declined confirmation is not offered again on the stopped run's page")
	}
	if code, loc := h.post("/runs/"+id+"/answer", url.Values{"answer": {"yes"}}); code != http.StatusSeeOther || strings.Contains(loc, "flash=") {
		t.Fatalf("answering yes: %d %s", code, loc)
	}
	if run = h.await(id, "completed"); run.Outputs["who"] != "ada" {
		t.Fatalf("outputs %v", run.Outputs)
	}
}

// An expression that would exhaust memory fails its own run with class
// expression_limit; the server and a run started beside it go on.
func TestExpressionBombFailsOnlyItsRun(t *testing.T) {
	h := newHarness(t, "")
	bomb := "version: 1\nname: bomb\nstate: {x: \"\"}\nnodes:\n  - id: grow\n    set: {x: 'repeat(repeat(\"x\", 999999), 999999)'}\n"
	if err := os.WriteFile(filepath.Join(h.dir, "bomb.yaml"), []byte(bomb), 0o644); err != nil {
		t.Fatal(err)
	}
	h.fake.Push(llmtest.Text("still here"))
	bad := h.start(url.Values{"pipeline": {"bomb.yaml"}})
	good := h.start(url.Values{"pipeline": {"chat.yaml"}, "in.topic": {"birds"}, "in.level": {"high"}, "in.count": {"1"}})
	if r := h.await(bad, "failed"); !strings.Contains(r.Error, "expression stopped") {
		t.Fatalf("the bomb run failed with %q", r.Error)
	}
	if r := h.await(good, "completed"); r.Outputs["text"] != "still here" {
		t.Fatalf("the other run: outputs %v", r.Outputs)
	}
	if code, _ := h.get("/"); code != http.StatusOK {
		t.Fatalf("the server answers %d", code)
	}
}

// The UI's pages describe what is missing and offer its own actions;
// none tells the user a command to type.
func TestPagesTellNoCommand(t *testing.T) {
	h := newHarness(t, "")
	for _, c := range []struct {
		path string
		code int
		want string
	}{
		{"/runs/zzz", http.StatusNotFound, `no such run &#34;zzz&#34; in `},
		{"/batches/zzz", http.StatusNotFound, `no batch &#34;zzz&#34; in `},
		{"/batches/zzz/report", http.StatusNotFound, `no batch &#34;zzz&#34; in `},
		{"/", http.StatusOK, `<a href="/start">Start one</a>`},
		{"/batches", http.StatusOK, "No batches yet"},
	} {
		code, body := h.get(c.path)
		if code != c.code || !strings.Contains(body, c.want) || strings.Contains(body, "flowrun ") {
			t.Errorf("%s: %d, want %d with %q and no command:\n%s", c.path, code, c.code, c.want, body)
		}
	}
}

// TestMakeThisATest: a finished run downloads as a test case that loads
// as one and replays the run (its pipeline beside it, its route and
// outputs expected); the run page and the batch page link to it.
func TestMakeThisATest(t *testing.T) {
	h := newHarness(t, "")
	id := h.start(url.Values{"pipeline": {"counter.yaml"}, "auto": {"on"}, "max_loops": {"2"}})
	h.await(id, "completed")
	resp, err := h.c.Get(h.ts.URL + "/runs/" + id + "/test.yaml")
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK || !strings.Contains(resp.Header.Get("Content-Disposition"), "counter."+id+".test.yaml") {
		t.Fatalf("%d %v\n%s", resp.StatusCode, resp.Header, body)
	}
	file := filepath.Join(h.dir, "counter.test.yaml")
	if err := os.WriteFile(file, body, 0o644); err != nil {
		t.Fatal(err)
	}
	f, ds := flowtest.Load(file)
	if f == nil || len(ds) > 0 || !strings.Contains(string(body), "pipeline: counter.yaml") || !strings.Contains(string(body), "route:") {
		t.Fatalf("the case does not load as a test of counter.yaml: %v\n%s", ds, body)
	}
	if _, page := h.get("/runs/" + id); !strings.Contains(page, `/runs/`+id+`/test.yaml`) {
		t.Fatal("the run page does not offer the test case")
	}
	if code, _ := h.get("/runs/nope/test.yaml"); code != http.StatusNotFound {
		t.Fatalf("an unknown run: %d", code)
	}
}

const describedPipeline = `
version: 1
name: greeter
description: Greets whoever it is given, in one line.
inputs:
  who: {type: string, default: "world"}
state: {line: "", loud: ""}
nodes:
  - id: greet
    set: {line: '"hello " + inputs.who'}
  - id: shout
    set: {loud: 'state.line + "!"'}
outputs: {line: state.loud}
`

// The start page lists the pipelines, each with its description, and no
// cassette, test or data file whatever its name; a chosen one shows its
// graph before it starts.
func TestStartListsPipelinesWithTheirGraph(t *testing.T) {
	h := newHarness(t, "")
	for name, body := range map[string]string{"greeter.yaml": describedPipeline, "cassette.yaml": "version: 1\nentries: []\n",
		"greeter.cassette.yaml": "version: 1\nentries: []\n", "greeter.test.yaml": "pipeline: greeter.yaml\ncases: []\n", "data.yaml": "- {who: a}\n"} {
		if err := os.WriteFile(filepath.Join(h.dir, name), []byte(body), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	_, body := h.get("/start")
	for _, want := range []string{`<a href="/start?pipeline=greeter.yaml">greeter</a>`, "Greets whoever it is given, in one line.", `href="/start?pipeline=chat.yaml"`} {
		if !strings.Contains(body, want) {
			t.Errorf("the start page lacks %q:\n%s", want, body)
		}
	}
	for _, not := range []string{"cassette.yaml", "test.yaml", "data.yaml", h.dir} {
		if strings.Contains(body, not) {
			t.Errorf("the start page lists %q:\n%s", not, body)
		}
	}
	_, body = h.get("/start?pipeline=greeter.yaml")
	for _, want := range []string{`<svg class="graph"`, `data-node="greet"`, `data-node="shout"`, `id="description"`, `id="start"`} {
		if !strings.Contains(body, want) {
			t.Errorf("the chosen pipeline's page lacks %q:\n%s", want, body)
		}
	}
	if strings.Contains(body, `?path=`) {
		t.Error("the graph of a pipeline not yet run links to an inspector")
	}
}

// The start page shows a chosen pipeline's plan under its graph: what a
// run with the inputs' defaults can call and cost at most, and what
// leaves a figure unbounded.
func TestStartShowsThePlan(t *testing.T) {
	h := newHarness(t, "")
	_, body := h.get("/start?pipeline=chat.yaml")
	// reply: 5 tries of its one call (the client's default), no max_tokens.
	for _, want := range []string{`id="plan"`, `<td class="mono">reply</td><td>5</td><td>∞</td>`, "set max_tokens on node reply or on model default"} {
		if !strings.Contains(body, want) {
			t.Errorf("the start page lacks %q:\n%s", want, body)
		}
	}
}

// A pipeline that runs Python, on a server without Python for WASI, is
// refused with the command that installs it and no path on the server.
func TestStartSaysHowToInstallPython(t *testing.T) {
	t.Setenv("XDG_CACHE_HOME", t.TempDir())
	h := newHarness(t, "")
	const py = "version: 1\nname: py\nnodes:\n  - id: calc\n    code:\n      language: python\n      source: |\n        result = 1\noutputs: {r: nodes.calc.result}\n"
	if err := os.WriteFile(filepath.Join(h.dir, "py.yaml"), []byte(py), 0o644); err != nil {
		t.Fatal(err)
	}
	code, loc := h.post("/start", url.Values{"pipeline": {"py.yaml"}})
	msg := h.shown(loc)
	if code != http.StatusSeeOther || !strings.Contains(msg, "run flowrun sandbox install python") || !strings.Contains(msg, "py.yaml") {
		t.Fatalf("%d %s: %q", code, loc, msg)
	}
	if strings.Contains(msg, h.dir) || strings.Contains(msg, os.Getenv("XDG_CACHE_HOME")) {
		t.Fatalf("the message names a path on the server: %q", msg)
	}
}

// visibleRows are the timeline rows of a run page that show, as "label:
// text", hidden ones left out.
func visibleRows(page string) []string {
	var out []string
	for _, m := range timelineRow.FindAllStringSubmatch(page, -1) {
		if m[1] == "" {
			out = append(out, m[2]+": "+m[3])
		}
	}
	return out
}

var timelineRow = regexp.MustCompile(`<tr class="[^"]*" data-seq="\d+"( hidden)?><td class="at">.*?</td><td class="label">(.*?)</td><td class="path">.*?</td><td class="text">(.*?)</td></tr>`)

// Each answer adds one "resumed" row to the timeline, on the page and on
// its live stream, not a row for every node the resume restored.
func TestTimelineOneResumedRowPerAnswer(t *testing.T) {
	h := newHarness(t, "")
	id := h.start(url.Values{"pipeline": {"counter.yaml"}})
	for range 5 {
		h.awaitConfirmation(id)
		if code, loc := h.post("/runs/"+id+"/answer", url.Values{"answer": {"yes"}}); code != http.StatusSeeOther || strings.Contains(loc, "flash=") {
			t.Fatalf("answer: %d %s: %s", code, loc, h.shown(loc))
		}
	}
	h.await(id, "completed")
	_, page := h.get("/runs/" + id)
	if strings.Contains(page, `id="no-state-changes"`) || !strings.Contains(page, `<table class="steps">`) {
		t.Error("the counter's state changes are not listed")
	}
	var live strings.Builder
	for _, line := range strings.Split(h.stream("/runs/"+id+"/live?after=0&status=running", "event: status"), "\n") {
		var m struct{ Row string }
		if data, ok := strings.CutPrefix(line, "data: "); ok && json.Unmarshal([]byte(data), &m) == nil {
			live.WriteString(m.Row)
		}
	}
	for what, body := range map[string]string{"page": page, "live stream": live.String()} {
		resumed, restored := 0, 0
		rows := visibleRows(body)
		for _, r := range rows {
			if strings.HasPrefix(r, "resumed: ") {
				resumed++
			}
			if strings.Contains(r, "restored from its checkpoint") {
				restored++
			}
		}
		if resumed != 5 || restored != 0 {
			t.Errorf("%s: %d resumed rows and %d restored nodes shown for 5 answers:\n%s", what, resumed, restored, strings.Join(rows, "\n"))
		}
	}
}
