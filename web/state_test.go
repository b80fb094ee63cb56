package web

import (
	"context"
	"fmt"
	"html"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/flowrun/flowrun/eventview"
	"github.com/flowrun/flowrun/llm/llmtest"
	"github.com/flowrun/flowrun/runtime"
)

// TestStateAtEveryStep: the run page shows the run's inputs (as text),
// each checkpoint's changes to the state, and with ?at=SEQ (a click on a
// timeline step) the state after that checkpoint and what it changed.
func TestStateAtEveryStep(t *testing.T) {
	h := newHarness(t, "")
	h.fake.Push(llmtest.Text("hi"))
	id := h.start(url.Values{"pipeline": {"chat.yaml"}, "in.topic": {"<b>birds</b>"}})
	h.await(id, "completed")
	if _, page := h.get("/runs/" + id); !strings.Contains(page, "<h2>Inputs</h2>") || !strings.Contains(page, "&lt;b&gt;birds&lt;/b&gt;") {
		t.Fatalf("the run page does not show its inputs as text:\n%s", page)
	}
	id = h.start(url.Values{"pipeline": {"asker.yaml"}})
	h.await(id, "waiting")
	_, page := h.get("/runs/" + id)
	for _, want := range []string{`id="state"`, `<a href="?at=1#state">1</a>`, `<span class="key mono">n</span>`, `<code>0</code> → <code>1</code>`,
		`<code>1</code> → <code>2</code>`, `href="?at=2#state" title="the state after this step"`} {
		if !strings.Contains(page, want) {
			t.Fatalf("run page lacks %q:\n%s", want, page)
		}
	}
	_, page = h.get("/runs/" + id + "?at=2")
	i := strings.Index(page, `id="state-at"`)
	if i < 0 {
		t.Fatalf("no state at checkpoint 2:\n%s", page)
	}
	at, _, _ := strings.Cut(page[i:], "</div>")
	for _, want := range []string{"After checkpoint 2", "rounds[2]/inc", `<code>1</code> → <code>2</code>`} {
		if !strings.Contains(at, want) {
			t.Fatalf("the state at checkpoint 2 lacks %q:\n%s", want, at)
		}
	}
	if strings.Contains(at, `<code>0</code> → <code>1</code>`) {
		t.Fatalf("the state at checkpoint 2 shows checkpoint 1's change:\n%s", at)
	}
}

// TestForkWithEditsFromTheStatePanel: the state panel at a checkpoint
// has a fork form holding each state variable and input as they were
// then; changing one forks with that edit, which the fork's page shows;
// a value of the wrong type is refused, naming the key and its type,
// and starts nothing; without the CSRF token the POST is refused. A run
// waiting on a question takes state edits with its answer.
func TestForkWithEditsFromTheStatePanel(t *testing.T) {
	h := newHarness(t, "")
	id := h.start(url.Values{"pipeline": {"asker.yaml"}})
	h.await(id, "waiting")
	_, page := h.get("/runs/" + id + "?at=2")
	for _, want := range []string{`id="fork-edit"`, `<input type="hidden" name="from" value="2">`, `name="set.n" value="2" step="1"`} {
		if !strings.Contains(page, want) {
			t.Fatalf("the fork form lacks %q:\n%s", want, page)
		}
	}
	code, loc := h.post("/runs/"+id+"/fork", url.Values{"from": {"2"}, "set.n": {"many"}})
	if code != http.StatusSeeOther || !strings.Contains(h.shown(loc), `state.n is of type integer (from its initial value); "many" is of type string`) {
		t.Fatalf("a wrong type: %d %s %q", code, loc, h.shown(loc))
	}
	if runs, _ := h.st.Runs(context.Background()); len(runs) != 1 {
		t.Fatalf("a refused edit started a run: %d runs", len(runs))
	}
	form := url.Values{"from": {"2"}, "set.n": {"40"}}
	req, _ := http.NewRequest(http.MethodPost, h.ts.URL+"/runs/"+id+"/fork", strings.NewReader(form.Encode()))
	req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	req.Header.Set("Origin", h.ts.URL)
	if resp, err := h.c.Do(req); err != nil || resp.StatusCode != http.StatusForbidden {
		t.Fatalf("a fork with edits without the CSRF token: %v %v", resp.StatusCode, err)
	}
	code, loc = h.post("/runs/"+id+"/fork", form)
	child, ok := strings.CutPrefix(loc, "/runs/")
	if code != http.StatusSeeOther || !ok {
		t.Fatalf("fork with an edit: %d %s", code, loc)
	}
	h.await(child, "waiting")
	_, page = h.get("/runs/" + child)
	if !strings.Contains(page, `id="edits"`) || !strings.Contains(page, `<span class="key mono">state.n</span> <code>2</code> → <code>40</code>`) {
		t.Fatalf("the fork's page does not show its edit:\n%s", page)
	}
	if _, page = h.get("/runs/" + id); !strings.Contains(page, `Forks: <a href="/runs/`+child+`">`) || strings.Count(page, "(at checkpoint") != 1 {
		t.Fatalf("the parent's page does not list its one fork %s, and only it:\n%s", child, page)
	}
	h.post("/runs/"+child+"/answer", url.Values{"a.who": {"ada"}, "set.n": {"41"}})
	h.awaitConfirmation(child)
	points, _ := h.st.Checkpoints(context.Background(), child, 0)
	if got := eventview.StateAfter(nil, points)["n"]; got != 41 {
		t.Fatalf("the state edited with the answer: n = %v", got)
	}
}

// TestQuestionsWithContext: a confirmation shows what will run (kind,
// model, the rendered system prompt and prompt) and the output that led
// there, as text; an ask shows the output before it.
func TestQuestionsWithContext(t *testing.T) {
	h := newHarness(t, "")
	essay, err := os.ReadFile(filepath.Join("testdata", "essay.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(h.dir, "essay.yaml"), essay, 0o644); err != nil {
		t.Fatal(err)
	}
	id := h.start(url.Values{"pipeline": {"essay.yaml"}})
	h.await(id, "waiting")
	_, page := h.get("/runs/" + id)
	for _, want := range []string{`Will run: <b>llm</b> node <span class="mono">write</span> · model <span class="mono">gpt-4.1-mini</span>`,
		`<pre class="text qcontext-system">You write short essays.</pre>`,
		`<pre class="text qcontext-prompt">Write about birds from: &lt;i&gt;outline&lt;/i&gt; about birds</pre>`,
		`the output of <span class="mono">outline</span>`, `&lt;i&gt;outline&lt;/i&gt; about birds`} {
		if !strings.Contains(page, want) {
			t.Fatalf("the confirmation lacks %q:\n%s", want, page)
		}
	}
	id = h.start(url.Values{"pipeline": {"asker.yaml"}})
	h.await(id, "waiting")
	_, page = h.get("/runs/" + id)
	if !strings.Contains(page, `the output of <span class="mono">rounds</span>`) || strings.Contains(page, "Will run:") {
		t.Fatalf("the ask's context:\n%s", page)
	}
}

// TestCallNodesFoldedThenOpen: a call node is drawn folded, its box a
// link that unfolds it (?open=ID); open, the nodes of the pipeline it
// calls are drawn with their states and link to the inspector at their
// paths, keeping the call open.
func TestCallNodesFoldedThenOpen(t *testing.T) {
	h := newHarness(t, "")
	for name, body := range map[string]string{
		"inner.yaml": "version: 1\nname: inner\ninputs: {x: {type: integer}}\nnodes:\n  - id: double\n    set: {}\n  - id: never\n    when: inputs.x > 100\n    set: {}\noutputs: {y: inputs.x * 2}\n",
		"outer.yaml": "version: 1\nname: outer\nnodes:\n  - id: solve\n    call: {pipeline: inner.yaml, inputs: {x: 21}}\noutputs: {y: nodes.solve.y}\n",
	} {
		if err := os.WriteFile(filepath.Join(h.dir, name), []byte(body), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	id := h.start(url.Values{"pipeline": {"outer.yaml"}})
	h.await(id, "completed")
	_, page := h.get("/runs/" + id)
	if !strings.Contains(page, `<a href="?open=solve" title="unfold the pipeline it calls"><g class="gnode box call" data-node="solve" data-state="done">`) ||
		strings.Contains(page, `data-node="solve/double"`) {
		t.Fatalf("the call is not drawn folded:\n%s", page)
	}
	_, page = h.get("/runs/" + id + "?open=solve")
	for _, want := range []string{`<a href="?open=" title="fold the pipeline it calls">`,
		`<a href="?path=solve%2fdouble&amp;open=solve#inspector"><g class="gnode box" data-node="solve/double" data-state="done">`,
		`data-node="solve/never" data-state="skipped"`} {
		if !strings.Contains(page, want) {
			t.Fatalf("the open call lacks %q:\n%s", want, page)
		}
	}
	if _, page = h.get("/runs/" + id + "?open=solve&path=solve/double"); !strings.Contains(page, `<h2>Node <span class="mono">solve/double</span>`) {
		t.Fatalf("a node inside the call is not inspectable:\n%s", page)
	}
}

// linesPipeline keeps text with a leading line break, inner line breaks
// and trailing spaces in its state, and confirms the node that reads it.
const linesPipeline = `version: 1
name: lines
state: {notes: ""}
models:
  default: {model: gpt-4.1-mini}
nodes:
  - id: outline
    set: {notes: '"\nfirst line\nsecond line  "'}
  - id: write
    confirm: true
    llm:
      prompt: "Write from: ${{ state.notes }}"
outputs: {text: nodes.write.text}
`

// TestYesEditsNothingUntouched: Yes posts the state form as a browser
// does, each textarea as the HTML parser read it from the page (its first
// line break dropped) with its line breaks sent as \r\n. Nothing was
// changed, so nothing is an edit and the model gets the state as it was.
func TestYesEditsNothingUntouched(t *testing.T) {
	h := newHarness(t, "")
	if err := os.WriteFile(filepath.Join(h.dir, "lines.yaml"), []byte(linesPipeline), 0o644); err != nil {
		t.Fatal(err)
	}
	h.fake.Push(llmtest.Text("done"))
	id := h.start(url.Values{"pipeline": {"lines.yaml"}})
	h.awaitConfirmation(id)
	_, page := h.get("/runs/" + id)
	_, area, ok := strings.Cut(page, `<textarea name="set.notes" rows="4">`)
	area, _, _ = strings.Cut(area, "</textarea>")
	if !ok {
		t.Fatalf("no textarea for state.notes:\n%s", page)
	}
	shown := strings.TrimPrefix(html.UnescapeString(area), "\n") // as the HTML parser reads a textarea
	sent := strings.ReplaceAll(shown, "\n", "\r\n")
	h.post("/runs/"+id+"/answer", url.Values{"answer": {"yes"}, "set.notes": {sent}})
	h.await(id, "completed")
	if got := llmtest.MessageText(h.fake.Last().Body["messages"].([]any)[0].(map[string]any)["content"]); got != "Write from: \nfirst line\nsecond line  " {
		t.Fatalf("the model got %q", got)
	}
	if _, page = h.get("/runs/" + id); strings.Contains(page, `id="edits"`) {
		t.Fatalf("an untouched textarea was recorded as an edit:\n%s", page)
	}
}

// An answer from a page older than the run's question (a second tab, a
// double submit) is refused, and the run still waits where it did.
func TestStalePageAnswersNothing(t *testing.T) {
	h := newHarness(t, "")
	id := h.start(url.Values{"pipeline": {"asker.yaml"}})
	h.await(id, "waiting")
	_, page := h.get("/runs/" + id)
	stale := url.Values{"a.who": {"eve"}, "question": {hiddenValue(t, page, "question")}, "points": {hiddenValue(t, page, "points")}}
	if stale.Get("question") != "name" {
		t.Fatalf("the answer form names question %q, want name", stale.Get("question"))
	}
	h.post("/runs/"+id+"/answer", url.Values{"a.who": {"ada"}, "question": stale["question"], "points": stale["points"]})
	h.awaitConfirmation(id)

	_, loc := h.post("/runs/"+id+"/answer", stale)
	if msg := h.shown(loc); !strings.Contains(msg, "this page was about name, but run "+id+" now waits at careful") {
		t.Fatalf("a stale answer was not refused: %q", msg)
	}
	_, page = h.get("/runs/" + id)
	yes := url.Values{"answer": {"yes"}, "question": {"careful"}, "points": stale["points"]}
	_, loc = h.post("/runs/"+id+"/answer", yes)
	if msg := h.shown(loc); !strings.Contains(msg, "went on since this page showed it") {
		t.Fatalf("a Yes from a page with older state was not refused: %q", msg)
	}
	if run, _ := h.st.Run(context.Background(), id); run.Status != runtime.StatusWaiting || run.Pending == nil || run.Pending.Path != "careful" {
		t.Fatalf("after refused answers the run is %s at %v", run.Status, run.Pending)
	}
	yes.Set("points", hiddenValue(t, page, "points"))
	h.post("/runs/"+id+"/answer", yes)
	if run := h.await(id, "completed"); run.Outputs["who"] != "ada" {
		t.Fatalf("outputs %v", run.Outputs)
	}
}

// hiddenValue is the value of the answer form's hidden field name.
func hiddenValue(t *testing.T, page, name string) string {
	t.Helper()
	_, v, ok := strings.Cut(page, `<input type="hidden" name="`+name+`" value="`)
	v, _, _ = strings.Cut(v, `"`)
	if !ok {
		t.Fatalf("no hidden %s field in the answer form", name)
	}
	return html.UnescapeString(v)
}

// A question after a branch shows what the branch's condition read (the
// classifier's confidence), not the branch's own {case, next}.
func TestQuestionAfterABranchShowsWhatItRead(t *testing.T) {
	h := newHarness(t, "")
	const routed = `
version: 1
name: routed
state: {confidence: 0}
nodes:
  - id: classify
    set: {confidence: 0.42}
  - id: route
    branch:
      - when: nodes.classify.confidence < 0.5
        next: check
    default: end
  - id: check
    ask:
      question: "Unsure: which label?"
outputs: {label: nodes.check}
`
	id := h.startNew("routed.yaml", routed)
	run := h.await(id, "waiting")
	if c := run.Pending.Context; c == nil || c.After != "classify" || fmt.Sprint(c.Output) != "map[confidence:0.42]" {
		t.Fatalf("the question's context: %+v", c)
	}
	_, page := h.get("/runs/" + id)
	if !strings.Contains(page, `the output of <span class="mono">classify</span>`) || strings.Contains(page, `the output of <span class="mono">route</span>`) {
		t.Fatalf("the question's context on the page:\n%s", page)
	}
}

// The graph draws the path a run took: the lines between the nodes that
// ran, not those to a node a branch passed over.
func TestGraphHighlightsThePathTaken(t *testing.T) {
	h := newHarness(t, "")
	const skips = `
version: 1
name: skips
state: {n: 0}
nodes:
  - id: first
    set: {n: 1}
  - id: route
    branch:
      - when: state.n == 1
        next: last
  - id: passed
    set: {n: 2}
  - id: last
    set: {n: 3}
outputs: {n: state.n}
`
	id := h.startNew("skips.yaml", skips)
	h.await(id, "completed")
	_, page := h.get("/runs/" + id)
	edge := func(from, to string) string {
		m := regexp.MustCompile(`class="edge([^"]*)" data-from="` + from + `" data-to="` + to + `"`).FindStringSubmatch(page)
		if m == nil {
			t.Fatalf("no line %s -> %s:\n%s", from, to, page)
		}
		return m[1]
	}
	for _, ln := range [][2]string{{"first", "route"}, {"route", "last"}} {
		if !strings.Contains(edge(ln[0], ln[1]), "taken") {
			t.Errorf("the line %s -> %s the run took is not drawn as taken", ln[0], ln[1])
		}
	}
	for _, ln := range [][2]string{{"route", "passed"}, {"passed", "last"}} {
		if strings.Contains(edge(ln[0], ln[1]), "taken") {
			t.Errorf("the line %s -> %s to a node passed over is drawn as taken", ln[0], ln[1])
		}
	}
}

// TestPagesNameNoServerPath: the run page and the runs list name a run's
// pipeline relative to the served directory, never by its path on the
// server.
func TestPagesNameNoServerPath(t *testing.T) {
	h := newHarness(t, "")
	h.fake.Push(llmtest.Text("hi"))
	id := h.start(url.Values{"pipeline": {"chat.yaml"}, "in.topic": {"birds"}})
	h.await(id, "completed")
	for _, path := range []string{"/runs/" + id, "/"} {
		_, page := h.get(path)
		if strings.Contains(page, h.dir) || !strings.Contains(page, "chat.yaml") {
			t.Errorf("%s names the pipeline by its path on the server (%s), or not at all:\n%s", path, h.dir, page)
		}
	}
}
