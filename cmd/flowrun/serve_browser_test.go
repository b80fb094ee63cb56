package main

import (
	"context"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/chromedp/cdproto/page"
	"github.com/chromedp/chromedp"

	"github.com/flowrun/flowrun/internal/browsertest"
	"github.com/flowrun/flowrun/llm/llmtest"
	"github.com/flowrun/flowrun/runtime"
	"github.com/flowrun/flowrun/store"
)

// tab is one browser tab of a test, with where its screenshots go.
type tab struct {
	t   *testing.T
	ctx context.Context
	dir string
}

func (b *tab) do(what string, steps ...chromedp.Action[chromedp.Void]) {
	b.t.Helper()
	ctx, cancel := context.WithTimeout(b.ctx, 60*time.Second)
	defer cancel()
	if err := chromedp.Do(ctx, steps...); err != nil {
		b.shot("failed-" + strings.ReplaceAll(what, " ", "-"))
		b.t.Fatalf("%s: %v", what, err)
	}
}

func (b *tab) text(sel string) string {
	b.t.Helper()
	ctx, cancel := context.WithTimeout(b.ctx, 30*time.Second)
	defer cancel()
	s, err := chromedp.Run(ctx, chromedp.Evaluate[string](`document.querySelector(`+strconv.Quote(sel)+`).innerText`))
	if err != nil {
		b.t.Fatalf("text of %s: %v", sel, err)
	}
	return s
}

func (b *tab) eval(js string) bool {
	b.t.Helper()
	ok, err := chromedp.Run(b.ctx, chromedp.Evaluate[bool](js))
	if err != nil {
		b.t.Fatalf("%s: %v", js, err)
	}
	return ok
}

// value is what js evaluates to as text, or "" while the page navigates
// (a script's context may be gone between pages).
func (b *tab) value(js string) string {
	s, err := chromedp.Run(b.ctx, chromedp.Evaluate[string](js))
	if err != nil {
		return ""
	}
	return s
}

// shot saves a screenshot of the whole page as name.png in the test's
// artifact directory.
func (b *tab) shot(name string) {
	ctx, cancel := context.WithTimeout(b.ctx, 30*time.Second)
	defer cancel()
	png, err := chromedp.Run(ctx, chromedp.FullScreenshot(100))
	if err != nil {
		b.t.Logf("screenshot %s: %v", name, err)
		return
	}
	path := filepath.Join(b.dir, name+".png")
	if err := os.WriteFile(path, png, 0o644); err != nil {
		b.t.Fatal(err)
	}
	b.t.Logf("screenshot: %s", path)
}

// browser starts headless Chromium for the test t (or skips it) and
// returns how a subtest opens a tab in it.
func browser(t *testing.T) func(t *testing.T) *tab {
	bctx := browsertest.Start(t, 1400, 1000)
	return func(t *testing.T) *tab {
		ctx, cancel := chromedp.NewContext(bctx)
		t.Cleanup(cancel)
		// The tab lives as long as the context of its first action: this one.
		if err := chromedp.Do(ctx); err != nil {
			t.Fatal(err)
		}
		return &tab{t: t, ctx: ctx, dir: t.ArtifactDir()}
	}
}

func waitStatus(status string) chromedp.Action[chromedp.Void] {
	return chromedp.WaitVisible(chromedp.CSS(`#status[data-status="` + status + `"]`))
}

// TestServeBrowser drives flowrun serve from headless Chromium, one browser
// for every case: start a shipped pipeline from the form and watch it
// complete (and appear on a runs list open in another tab, without a
// reload); answer an ask and a confirmation; snapshot, roll back and
// fork; Stop during a slow model call, then Resume; a hostile reply
// rendered inert. Screenshots go to the test's artifact directory
// (go test -artifacts keeps them); FLOWRUN_DOCS_SCREENSHOT=1 also writes
// the run page's to docs/img/run-page.png.
func TestServeBrowser(t *testing.T) {
	newTab := browser(t)

	t.Run("shipped pipeline from the form", func(t *testing.T) {
		base, _ := serve(t, "../../pipelines")
		list := newTab(t)
		list.do("open the runs list", chromedp.Navigate(base), chromedp.WaitVisible(chromedp.CSS("#runrows")))
		list.eval("window.notReloaded = true")
		b := newTab(t)
		b.do("pick the pipeline",
			chromedp.Navigate(base+"start"),
			chromedp.SetValue(chromedp.CSS("#pipeline"), "approach_proposer.yaml"),
			chromedp.Click(chromedp.CSS("#pick")),
			chromedp.WaitVisible(chromedp.CSS("#launch")))
		if !strings.Contains(b.text("#launch"), "with_approaches") {
			t.Fatal("the form lacks the pipeline's inputs")
		}
		b.shot("start-form")
		b.do("start it", chromedp.Click(chromedp.CSS("#auto")), chromedp.Click(chromedp.CSS("#start")), waitStatus("completed"))
		if !b.eval(`document.querySelector('g[data-node="rounds"]').dataset.state === "done" && document.querySelectorAll('#timeline tr').length > 20`) {
			t.Fatal("the graph or the timeline does not show the finished run")
		}
		b.do("inspect the orchestrator", chromedp.Click(chromedp.CSS(`g[data-node="orchestrate"]`)), chromedp.WaitVisible(chromedp.CSS("#inspector .reply")))
		if !strings.Contains(b.text("#inspector"), "Structured output") {
			t.Fatal("the inspector does not render the orchestrator's JSON decision")
		}
		b.shot("run-page")
		list.do("the new run appears on the open runs list",
			chromedp.WaitVisible(chromedp.CSS(`#runrows tr.run .status.completed`)))
		if !list.eval("window.notReloaded === true") {
			t.Fatal("the runs list reloaded instead of updating live")
		}
		list.shot("runs-list")
		b.eval("window.scrollTo(0, 0), true")
		b.docShot("run-page")
	})

	t.Run("ask, confirm, snapshot, roll back, fork", func(t *testing.T) {
		dir := t.TempDir()
		writeFile(t, dir, "asker.yaml", askPipeline(t))
		base, _ := serve(t, dir)
		b := newTab(t)
		b.do("start",
			chromedp.Navigate(base+"start?pipeline=asker.yaml"),
			chromedp.Click(chromedp.CSS("#start")),
			chromedp.WaitVisible(chromedp.CSS(`input[name="a.who"]`)))
		b.do("snapshot while it waits",
			chromedp.SendKeys(chromedp.CSS("#snapshot-label"), "asked"),
			chromedp.Click(chromedp.CSS("#snapshot")),
			chromedp.WaitVisible(chromedp.CSS(`button.rollback[data-label="asked"]`)))
		b.shot("ask")
		b.do("answer the ask",
			chromedp.SetValue(chromedp.CSS(`input[name="a.who"]`), "ada"),
			chromedp.Click(chromedp.CSS("#answer-submit")),
			chromedp.WaitVisible(chromedp.CSS("#answer-yes")))
		b.shot("confirm")
		b.do("confirm", chromedp.Click(chromedp.CSS("#answer-yes")), waitStatus("completed"))
		if out := b.text(".outputs"); !strings.Contains(out, "who\nada") || !strings.Contains(out, "500") {
			t.Fatalf("outputs: %s", out)
		}
		parent, err := chromedp.Run(b.ctx, chromedp.Location())
		if err != nil {
			t.Fatal(err)
		}
		b.do("roll back", chromedp.Click(chromedp.CSS(`button.rollback[data-label="asked"]`)), chromedp.WaitVisible(chromedp.CSS(`#resume`)))
		b.do("fork from the snapshot", chromedp.Click(chromedp.CSS(`button.fork[data-label="asked"]`)), chromedp.WaitVisible(chromedp.CSS(`p.fork`)))
		if got := b.text("p.fork"); !strings.Contains(got, "Forked from") || !strings.Contains(parent, strings.Fields(got)[2]) {
			t.Fatalf("the fork says %q; its parent is %s", got, parent)
		}
		b.do("the fork asks again", chromedp.WaitVisible(chromedp.CSS(`input[name="a.who"]`)))
		b.shot("fork")
	})

	t.Run("stop during a slow model call, then resume", func(t *testing.T) {
		fake := llmtest.New(t)
		t.Setenv("OPENAI_BASE_URL", fake.URL)
		fake.Push(llmtest.Reply{Text: "too late", Delay: time.Minute}, llmtest.Text("resumed answer"))
		dir := t.TempDir()
		writeFile(t, dir, "slow.yaml", strings.Replace(secretPipeline, "env: [SERVICE_TOKEN]\n", "", 1))
		base, _ := serve(t, dir)
		b := newTab(t)
		b.do("start", chromedp.Navigate(base+"start?pipeline=slow.yaml"), chromedp.Click(chromedp.CSS("#start")), chromedp.WaitVisible(chromedp.CSS("#stop")))
		for fake.Calls() == 0 {
			time.Sleep(10 * time.Millisecond)
		}
		b.do("wait for the model call on the graph", chromedp.WaitVisible(chromedp.CSS(`g[data-node="reply"][data-state="running"]`)))
		b.shot("running")
		b.do("stop", chromedp.Click(chromedp.CSS("#stop")), waitStatus("stopped"))
		if !strings.Contains(b.text(".reason"), "stopped from the web UI") {
			t.Fatal("the page does not say why the run stopped")
		}
		b.shot("stopped")
		b.do("resume", chromedp.Click(chromedp.CSS("#resume")), waitStatus("completed"))
		if !strings.Contains(b.text(".outputs"), "resumed answer") {
			t.Fatal("the resumed run's output is not shown")
		}
	})

	t.Run("hostile reply rendered inert", func(t *testing.T) {
		fake := llmtest.New(t)
		t.Setenv("OPENAI_BASE_URL", fake.URL)
		xss := `<script>alert(1)</script><img src=x onerror=alert(2)>`
		fake.Push(llmtest.Text(xss))
		dir := t.TempDir()
		writeFile(t, dir, "chat.yaml", strings.Replace(secretPipeline, "env: [SERVICE_TOKEN]\n", "", 1))
		base, _ := serve(t, dir)
		b := newTab(t)
		var dialogs atomic.Int32
		if err := chromedp.Listen(b.ctx, func(ev any) {
			if _, ok := ev.(*page.EventJavascriptDialogOpening); ok {
				dialogs.Add(1)
			}
		}); err != nil {
			t.Fatal(err)
		}
		b.do("run", chromedp.Navigate(base+"start?pipeline=chat.yaml"), chromedp.Click(chromedp.CSS("#start")), waitStatus("completed"),
			chromedp.Click(chromedp.CSS(`g[data-node="reply"]`)), chromedp.WaitVisible(chromedp.CSS("#inspector .reply-text")))
		if got := b.text("#inspector .reply-text"); got != xss {
			t.Fatalf("the reply shows as %q", got)
		}
		if !b.eval(`document.querySelectorAll('main script, main img:not(.thumb)').length === 0 && !/<img/.test(document.querySelector('.outputs').innerHTML.replaceAll('&lt;img', ''))`) {
			t.Fatal("the reply became markup")
		}
		b.shot("xss-inert")
		time.Sleep(200 * time.Millisecond)
		if n := dialogs.Load(); n > 0 {
			t.Fatalf("%d dialogs opened: the reply ran as script", n)
		}
	})
}

// TestServeBrowserShippedGraphs runs every shipped pipeline offline from
// its cassette and opens its run page in Chromium: the graph draws a box
// for every node of the layout and, the run having completed, leaves none
// of them pending (nodes not taken read as skipped, start and end as
// done). A screenshot of each graph goes to the test's artifacts.
func TestServeBrowserShippedGraphs(t *testing.T) {
	newTab := browser(t)
	db := filepath.Join(t.TempDir(), "runs.db")
	files, err := filepath.Glob("../../pipelines/*.yaml")
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, f := range files {
		if strings.HasSuffix(f, ".test.yaml") || strings.HasSuffix(f, ".cassette.yaml") {
			continue
		}
		if code, _, stderr := flowrunIn(t, db, "run", f, "--auto"); code != exitOK {
			t.Fatalf("flowrun run %s: exit %d\n%s", f, code, stderr)
		}
		names = append(names, strings.TrimSuffix(filepath.Base(f), ".yaml"))
	}
	st, err := store.Open(db)
	if err != nil {
		t.Fatal(err)
	}
	runs, err := st.Runs(context.Background())
	st.Close()
	if err != nil || len(runs) != len(names) {
		t.Fatalf("%d runs for %d pipelines: %v", len(runs), len(names), err)
	}
	base, _ := serve(t, "../../pipelines", "--store", db)
	b := newTab(t)
	for _, r := range runs {
		if r.Status != runtime.StatusCompleted {
			t.Errorf("%s: run %s %s, want completed", r.PipelineName, r.ID, r.Status)
			continue
		}
		b.do("open the run of "+r.PipelineName, chromedp.Navigate(base+"runs/"+r.ID), chromedp.WaitVisible(chromedp.CSS("svg.graph")))
		if !b.eval(`document.querySelectorAll("svg.graph g.gnode").length > 2`) {
			t.Errorf("%s: the graph draws no nodes", r.PipelineName)
		}
		if b.eval(`document.querySelector('svg.graph g.gnode[data-state="pending"]') !== null`) {
			t.Errorf("%s: a completed run's graph leaves nodes pending: %s", r.PipelineName,
				b.text(`svg.graph g.gnode[data-state="pending"]`))
		}
		b.shot("graph-" + r.PipelineName)
	}
}
