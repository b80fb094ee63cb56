package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/chromedp/chromedp"

	"github.com/flowrun/flowrun/llm/llmtest"
)

// essayPipeline is the web package's confirmation pipeline with plain
// notes, as the screenshot in the docs shows it (the web package's own
// test keeps the markup, to check that it is shown as text).
func essayPipeline(t *testing.T) string {
	t.Helper()
	b, err := os.ReadFile(filepath.Join("..", "..", "web", "testdata", "essay.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	return strings.Replace(string(b), `"<i>outline</i> about "`, `"three facts about "`, 1)
}

// docShot saves the tab's page as docs/img/NAME.png when
// FLOWRUN_DOCS_SCREENSHOT=1, besides the test's artifact.
func (b *tab) docShot(name string) {
	b.shot(name)
	if os.Getenv("FLOWRUN_DOCS_SCREENSHOT") != "1" {
		return
	}
	png, err := chromedp.Run(b.ctx, chromedp.FullScreenshot(100))
	if err == nil {
		err = os.WriteFile("../../docs/img/"+name+".png", png, 0o644)
	}
	if err != nil {
		b.t.Fatal(err)
	}
}

// TestServeBrowserState: in Chromium, a click on a timeline step shows
// the state then and what the step changed; a fork from there with an
// edited value goes on from it and its page shows the edit; a
// confirmation shows the rendered prompt, the model and the output
// that led there.
func TestServeBrowserState(t *testing.T) {
	newTab := browser(t)

	t.Run("state diff, time travel and fork with an edit", func(t *testing.T) {
		dir := t.TempDir()
		writeFile(t, dir, "asker.yaml", askPipeline(t))
		base, _ := serve(t, dir)
		b := newTab(t)
		b.do("start", chromedp.Navigate(base+"start?pipeline=asker.yaml"), chromedp.Click(chromedp.CSS("#start")),
			chromedp.WaitVisible(chromedp.CSS(`input[name="a.who"]`)))
		b.do("click the third step on the timeline", chromedp.Click(chromedp.CSS(`#timeline a[href="?at=3#state"]`)),
			chromedp.WaitVisible(chromedp.CSS("#state-at")))
		at := b.text("#state-at")
		if !strings.Contains(at, "After checkpoint 3 rounds[3]/inc") || !strings.Contains(at, "n 2 → 3") {
			t.Fatalf("the state at checkpoint 3:\n%s", at)
		}
		b.docShot("state-diff")
		b.do("fork with n edited", chromedp.Click(chromedp.CSS("#fork-edit summary")),
			chromedp.SetValue(chromedp.CSS(`#fork-edit input[name="set.n"]`), "40"),
			chromedp.Click(chromedp.CSS("#fork-edited")), chromedp.WaitVisible(chromedp.CSS("#edits")))
		if got := b.text("#edits"); !strings.Contains(got, "state.n 3 → 40") {
			t.Fatalf("the fork's edits: %q", got)
		}
		b.do("the fork goes on from the edit", chromedp.WaitVisible(chromedp.CSS(`input[name="a.who"]`)))
		if q := b.text("#question"); !strings.Contains(q, "Counted to 40.") {
			t.Fatalf("the fork's question: %q", q)
		}
		b.docShot("fork-edit")
	})

	t.Run("a confirmation with its context", func(t *testing.T) {
		fake := llmtest.New(t)
		t.Setenv("OPENAI_BASE_URL", fake.URL)
		fake.Push(llmtest.Text("Birds fly."))
		dir := t.TempDir()
		writeFile(t, dir, "essay.yaml", essayPipeline(t))
		base, _ := serve(t, dir)
		b := newTab(t)
		b.do("start", chromedp.Navigate(base+"start?pipeline=essay.yaml"), chromedp.Click(chromedp.CSS("#start")),
			chromedp.WaitVisible(chromedp.CSS("#qcontext")))
		got := b.text("#qcontext")
		for _, want := range []string{"Will run: llm node write · model gpt-4.1-mini", "You write short essays.", "Write about birds from: three facts about birds", "the output of outline"} {
			if !strings.Contains(got, want) {
				t.Fatalf("the confirmation lacks %q:\n%s", want, got)
			}
		}
		b.docShot("confirm-context")
		b.do("confirm", chromedp.Click(chromedp.CSS("#answer-yes")), waitStatus("completed"))
	})
}
