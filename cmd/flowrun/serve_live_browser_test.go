package main

import (
	"context"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"

	"github.com/flowrun/flowrun/llm/llmtest"
	"github.com/flowrun/flowrun/store"
	"github.com/flowrun/flowrun/store/storetest"
)

const twoRepliesPipeline = `
version: 1
name: drafts
models:
  default: {model: gpt-4.1-mini}
nodes:
  - id: draft
    llm:
      prompt: "Draft a note"
  - id: polish
    llm:
      prompt: "Polish ${{ nodes.draft.text }}"
outputs: {text: nodes.polish.text}
`

const gridPipeline = `
version: 1
name: grids
state:
  grid: [[0, 1, 2, 3], [4, 5, 6, 7], [8, 9, 0, 1], [2, 2, 3, 3]]
  notes: {solved: true, tries: [1, 2]}
nodes:
  - id: solve
    set: {grid: state.grid}
outputs: {grid: state.grid, notes: state.notes}
`

// TestServeBrowserLiveListsPictures drives flowrun serve's live text,
// lists and pictures from headless Chromium: a model reply shows word by
// word while it streams in, and the open inspector renders the node
// again, without a reload, when its turn is recorded; an ARC grid shows
// as coloured cells in the outputs and the inspector.
func TestServeBrowserLiveListsPictures(t *testing.T) {
	newTab := browser(t)

	t.Run("model text mid-reply", func(t *testing.T) {
		fake := llmtest.New(t)
		t.Setenv("OPENAI_BASE_URL", fake.URL)
		first, second := make(chan struct{}), make(chan struct{})
		draft := "Dear team, the <b>quarterly</b> numbers are in and they look better than we feared. Details follow below."
		fake.Push(llmtest.Reply{Text: draft, Hold: first, HoldAfter: 9},
			llmtest.Reply{Text: "Polished: the numbers are in.", Hold: second, HoldAfter: 2})
		dir := t.TempDir()
		writeFile(t, dir, "drafts.yaml", twoRepliesPipeline)
		base, _ := serve(t, dir)
		b := newTab(t)
		b.do("start", chromedp.Navigate(base+"start?pipeline=drafts.yaml"), chromedp.Click(chromedp.CSS("#start")),
			chromedp.WaitVisible(chromedp.CSS(`#stream .stream-part[data-path="draft"]`)))
		b.do("open the inspector of the streaming node", chromedp.Click(chromedp.CSS(`#stream .stream-part a`)),
			chromedp.WaitVisible(chromedp.CSS(`#inspector[data-path="draft"]`)),
			chromedp.WaitVisible(chromedp.CSS(`#stream .stream-part[data-path="draft"]`)))
		b.eval("window.notReloaded = true")
		mid := "Dear team, the <b>quarterly</b> numbers are in and they "
		if got := b.text(`#stream .stream-text`); got != strings.TrimSpace(mid) && got != mid {
			t.Fatalf("mid-reply the page shows %q, want %q", got, mid)
		}
		if !b.eval(`document.querySelectorAll('#stream b').length === 0`) {
			t.Fatal("streamed text became markup")
		}
		b.shot("live-text")
		b.docShot("live-text")
		close(first)
		b.do("the turn is recorded: the inspector shows it and the stream box goes",
			chromedp.WaitVisible(chromedp.CSS(`#inspector .reply-text`)),
			chromedp.WaitVisible(chromedp.CSS(`#stream .stream-part[data-path="polish"]`)))
		if !b.eval("window.notReloaded === true") {
			t.Fatal("the page reloaded instead of rendering the inspector again")
		}
		if got := b.text("#inspector .reply-text"); got != draft {
			t.Fatalf("the inspector shows %q", got)
		}
		if b.eval(`document.querySelector('#stream .stream-part[data-path="draft"]') !== null`) {
			t.Fatal("the finished reply still shows as streaming")
		}
		b.shot("live-inspector")
		close(second)
		b.do("completes", waitStatus("completed"))
		if b.eval(`!document.getElementById("stream").hidden`) {
			t.Fatal("the stream box shows after the run ended")
		}
	})

	t.Run("ARC grid", func(t *testing.T) {
		dir := t.TempDir()
		writeFile(t, dir, "grids.yaml", gridPipeline)
		base, _ := serve(t, dir)
		b := newTab(t)
		b.do("run", chromedp.Navigate(base+"start?pipeline=grids.yaml"), chromedp.Click(chromedp.CSS("#start")), waitStatus("completed"),
			chromedp.Click(chromedp.CSS(`g[data-node="solve"]`)), chromedp.WaitVisible(chromedp.CSS("#inspector svg.arc-grid")))
		if !b.eval(`document.querySelectorAll('.outputs svg.arc-grid rect').length === 16 && document.querySelector('.outputs svg.arc-grid').getBoundingClientRect().width === 64`) {
			t.Fatal("the outputs do not draw the 4x4 grid in 16-pixel cells")
		}
		b.do("fold the notes", chromedp.Click(chromedp.CSS(`.outputs details.tree details.tree > summary`)))
		if b.eval(`document.querySelector('.outputs details.tree details.tree').open`) {
			t.Fatal("the JSON tree does not fold")
		}
		b.eval("window.scrollTo(0, 0), true")
		b.shot("arc-grid")
		b.docShot("arc-grid")
	})

	t.Run("500 runs filtered", func(t *testing.T) {
		dbPath := filepath.Join(t.TempDir(), "busy.db")
		st, err := store.Open(dbPath)
		if err != nil {
			t.Fatal(err)
		}
		err = storetest.Fill(context.Background(), st, 400, 5, 20)
		st.Close()
		if err != nil {
			t.Fatal(err)
		}
		base, _ := serve(t, t.TempDir(), "--store", dbPath)
		b := newTab(t)
		b.do("open the list", chromedp.Navigate(base), chromedp.WaitVisible(chromedp.CSS("#shown")))
		b.shows("1–50 of 405")
		if !b.eval(`document.querySelectorAll('#runrows tr.run, #runrows tr.batch-line').length === 50`) {
			t.Fatal("the first page does not show 50 lines")
		}
		b.do("filter by pipeline and start time",
			chromedp.SetValue(chromedp.CSS(`select[name="pipeline"]`), "alpha"),
			chromedp.SetValue(chromedp.CSS(`input[name="after"]`), "2020-01-01T00:00"),
			chromedp.Click(chromedp.CSS("#filter")),
			// The value as an attribute is the next page's, from the server.
			chromedp.WaitVisible(chromedp.CSS(`input[name="after"][value="2020-01-01T00:00"]`)))
		b.shows("1–50 of 139")
		if !b.eval(`[...document.querySelectorAll('#runrows tr.run td:nth-child(2)')].every(td => td.textContent === "alpha") && document.querySelectorAll('#runrows tr.batch-line').length === 5`) {
			t.Fatal("a run of another pipeline is listed, or the batches are not folded")
		}
		b.eval("window.scrollTo(0, 0), true")
		b.shot("runs-list-500")
		b.docShot("runs-list-500")
		// The live list renders its rows again as its stream starts: links
		// are followed by their address, not clicked while they may be
		// replaced.
		b.follow("#next")
		b.shows("51–100 of 139")
		b.do("back to the whole list", chromedp.Navigate(base))
		b.follow(`tr.batch-line a.expand`)
		b.shows("1–20 of 20")
		b.do("search an input", chromedp.Navigate(base), chromedp.SendKeys(chromedp.CSS(`input[name="text"]`), "topic 39"), chromedp.Click(chromedp.CSS("#filter")),
			chromedp.WaitVisible(chromedp.CSS(`input[name="text"][value="topic 39"]`)))
		b.shows("1–11 of 11")
	})
}

// follow opens the link sel names.
func (b *tab) follow(sel string) {
	b.t.Helper()
	href := b.look(`document.querySelector(`+strconv.Quote(sel)+`)?.href ?? ""`, func(s string) bool { return s != "" })
	if href == "" {
		b.t.Fatalf("no link %s", sel)
	}
	b.do("follow "+sel, chromedp.Navigate(href))
}

// shows waits until the runs list says it shows lines, failing with what
// it says instead.
func (b *tab) shows(lines string) {
	b.t.Helper()
	if got := b.look(`document.getElementById("shown")?.textContent ?? ""`, func(s string) bool { return s == lines }); got != lines {
		b.shot("failed-shows")
		b.t.Fatalf("the runs list shows %q, want %q", got, lines)
	}
}

// look evaluates js until what it gives is good, for up to 30 seconds,
// and returns the last it gave. The page may be navigating meanwhile: a
// look that fails, or does not return within a second (as one taken
// while the page navigates may never), is taken again.
func (b *tab) look(js string, good func(string) bool) string {
	deadline := time.Now().Add(30 * time.Second)
	got := ""
	for time.Now().Before(deadline) {
		ctx, cancel := context.WithTimeout(b.ctx, time.Second)
		s, err := chromedp.Run(ctx, chromedp.Evaluate[string](js))
		cancel()
		if got = s; err == nil && good(s) {
			return s
		}
		time.Sleep(20 * time.Millisecond)
	}
	return got
}
