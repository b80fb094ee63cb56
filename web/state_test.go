package web

import (
	"net/url"
	"strings"
	"testing"

	"github.com/flowrun/flowrun/llm/llmtest"
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
