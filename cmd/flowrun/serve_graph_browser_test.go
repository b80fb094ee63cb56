package main

import (
	"path/filepath"
	"strings"
	"testing"

	"github.com/chromedp/chromedp"

	"github.com/flowrun/flowrun/llm/llmtest"
)

// TestServeBrowserGraphsRead: every shipped pipeline's graph, as Chromium
// draws it on /start, reads without guessing: no two edge labels overlap,
// a loop's done edge leaves its loop box by the side, away from the body
// (not down into it, as iterate does), and an agent's box names its tools.
func TestServeBrowserGraphsRead(t *testing.T) {
	newTab := browser(t)
	base, _ := serve(t, "../../pipelines")
	b := newTab(t)
	files, err := filepath.Glob("../../pipelines/*.yaml")
	if err != nil {
		t.Fatal(err)
	}
	loops := 0
	for _, f := range files {
		name := filepath.Base(f)
		if strings.HasSuffix(name, ".test.yaml") || strings.HasSuffix(name, ".cassette.yaml") {
			continue
		}
		b.do("open "+name, chromedp.Navigate(base+"start?pipeline="+name), chromedp.WaitVisible(chromedp.CSS("svg.graph")))
		if o := b.value(`(() => {
			const r = Array.from(document.querySelectorAll("svg.graph text.elabel")).map(e => [e.textContent, e.getBoundingClientRect()]);
			const out = [];
			for (let i = 0; i < r.length; i++) for (let j = i + 1; j < r.length; j++) {
				const [a, p] = r[i], [b, q] = r[j];
				if (p.left < q.right && q.left < p.right && p.top < q.bottom && q.top < p.bottom) out.push(a + " / " + b);
			}
			return out.join("; ");
		})()`); o != "" {
			b.shot("overlap-" + name)
			t.Errorf("%s: edge labels overlap: %s", name, o)
		}
		// A done edge's points before its last two (the turn into its
		// target's top) lie left of its loop's box.
		if bad := b.value(`(() => {
			const out = [];
			document.querySelectorAll("svg.graph g.gnode.loop").forEach(g => {
				const box = g.querySelector("rect"), x = +box.getAttribute("x");
				const done = document.querySelector('svg.graph path.edge[data-from="' + CSS.escape(g.dataset.node) + '"][data-label="done"]');
				if (!done) { out.push(g.dataset.node + ": no done edge"); return; }
				const pts = done.getAttribute("d").split(" ").map(p => p.slice(1).split(",").map(Number));
				if (pts.slice(0, -2).some(p => p[0] > x)) out.push(g.dataset.node + ": " + done.getAttribute("d"));
			});
			return out.join("; ");
		})()`); bad != "" {
			t.Errorf("%s: a done edge runs into its loop's column: %s", name, bad)
		}
		if b.eval(`document.querySelector("svg.graph g.gnode.loop") !== null`) {
			loops++
		}
		if name == "triage.yaml" {
			if got := b.value(`document.querySelector('svg.graph g.gnode[data-node="draft"]').textContent`); !strings.Contains(got, "read_file") || !strings.Contains(got, "answer") {
				t.Errorf("triage: the agent's box reads %q, want its tools read_file and answer", got)
			}
		}
	}
	if loops == 0 {
		t.Error("no shipped pipeline drew a loop: the done edge went unchecked")
	}
}

// TestServeBrowserLivePath: while a run goes on, its page draws the path
// taken so far as events arrive, without a reload: the line into the
// node running now, and the lines between the nodes done.
func TestServeBrowserLivePath(t *testing.T) {
	newTab := browser(t)
	fake := llmtest.New(t)
	t.Setenv("OPENAI_BASE_URL", fake.URL)
	first, second := make(chan struct{}), make(chan struct{})
	fake.Push(llmtest.Reply{Text: "A draft of the note, in a few words.", Hold: first, HoldAfter: 3},
		llmtest.Reply{Text: "Polished: the note.", Hold: second, HoldAfter: 2})
	dir := t.TempDir()
	writeFile(t, dir, "drafts.yaml", twoRepliesPipeline)
	base, _ := serve(t, dir)
	b := newTab(t)
	taken := func(from, to string) chromedp.Action[chromedp.Void] {
		return chromedp.WaitVisible(chromedp.CSS(`svg.graph path.edge.taken[data-from="` + from + `"][data-to="` + to + `"]`))
	}
	b.do("start, the draft streaming", chromedp.Navigate(base+"start?pipeline=drafts.yaml"), chromedp.Click(chromedp.CSS("#start")),
		chromedp.WaitVisible(chromedp.CSS(`#stream .stream-part[data-path="draft"]`)), taken("__start", "draft"))
	b.eval("window.notReloaded = true")
	if b.eval(`document.querySelector('svg.graph path.edge.taken[data-from="draft"]') !== null`) {
		t.Fatal("the line out of the running draft is drawn as taken")
	}
	close(first)
	b.do("the draft done, the polish running", chromedp.WaitVisible(chromedp.CSS(`#stream .stream-part[data-path="polish"]`)),
		taken("draft", "polish"), taken("__start", "draft"))
	if !b.eval("window.notReloaded === true") {
		t.Fatal("the page reloaded to draw the path")
	}
	if !b.eval(`document.querySelector('svg.graph path.edge[data-from="draft"][data-to="polish"]').getAttribute("marker-end") === "url(#arrow-taken)"`) {
		t.Error("the taken line keeps the plain arrowhead")
	}
	b.shot("live-path")
	close(second)
	b.do("completes", waitStatus("completed"), taken("polish", "__end"))
}

// TestServeBrowserTriageMidRun: the shipped triage pipeline's page while
// its agent's reply streams in: the classifier done, the agent running
// with its tools on its box, the path so far drawn, the reply arriving.
// FLOWRUN_DOCS_SCREENSHOT=1 writes it to docs/img/run.png.
func TestServeBrowserTriageMidRun(t *testing.T) {
	newTab := browser(t)
	fake := llmtest.New(t)
	useModel(t, fake)
	hold := make(chan struct{})
	fake.Push(llmtest.JSON(map[string]any{"category": "billing", "urgent": false}),
		llmtest.Reply{ToolCalls: []llmtest.ToolCall{{Name: "read_file", Arguments: `{"path":"kb/billing.md"}`}}},
		llmtest.Reply{Text: "The knowledge base says a duplicate charge is refunded within five days, so I will refund it.", Hold: hold, HoldAfter: 8,
			ToolCalls: []llmtest.ToolCall{{Name: "answer", Arguments: `{"reply":"Sorry for the double charge: it is refunded.","refund":true}`}}})
	base, _ := serve(t, "../../pipelines")
	b := newTab(t)
	b.do("start triage, the agent's reply streaming", chromedp.Navigate(base+"start?pipeline=triage.yaml"), chromedp.Click(chromedp.CSS("#start")),
		chromedp.WaitVisible(chromedp.CSS(`#stream .stream-part[data-path="draft"]`)),
		chromedp.WaitVisible(chromedp.CSS(`svg.graph path.edge.taken[data-from="classify"][data-to="draft"]`)))
	if !b.eval(`document.querySelector('svg.graph g.gnode[data-node="draft"]').dataset.state === "running"`) {
		t.Errorf("the agent's box is %s mid-reply", b.value(`document.querySelector('svg.graph g.gnode[data-node="draft"]').dataset.state`))
	}
	// The page counts the agent's read_file call as it happens, as it
	// counts model turns.
	b.do("count the tool call live", chromedp.Poll[chromedp.Void](`document.getElementById("tools").textContent === "1"`, chromedp.WithPollingTimeout(durDeadline)))
	b.eval("window.scrollTo(0, 0), true")
	b.docView("run")
	close(hold)
	b.do("completes", waitStatus("completed"), chromedp.WaitVisible(chromedp.CSS(`svg.graph path.edge.taken[data-from="draft"][data-to="__end"]`)))
}
