package main

import (
	"context"
	"path/filepath"
	"strings"
	"testing"

	"github.com/chromedp/chromedp"

	"github.com/flowrun/flowrun/store"
)

// shippedRun records a run of the shipped pipeline name, replayed from
// its cassette, in the store db and returns its id.
func shippedRun(t *testing.T, db, name string) string {
	t.Helper()
	if code, _, stderr := flowrunIn(t, db, "run", "../../pipelines/"+name+".yaml", "--auto"); code != exitOK {
		t.Fatalf("flowrun run %s: exit %d\n%s", name, code, stderr)
	}
	st, err := store.Open(db)
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	runs, err := st.Runs(context.Background())
	if err != nil || len(runs) == 0 {
		t.Fatalf("%d runs: %v", len(runs), err)
	}
	return runs[0].ID
}

// TestServeBrowserRunPageFits: an ARC run's page is no wider than a
// 1,400 px window, as it opens, with each node in the inspector and at
// each step's state, every fold open: long values (code, grids, JSON
// with no space to break at) wrap or fold. The inspector opens beside
// the graph, which draws the path the run took.
func TestServeBrowserRunPageFits(t *testing.T) {
	newTab := browser(t)
	db := filepath.Join(t.TempDir(), "runs.db")
	id := shippedRun(t, db, "single_pair")
	base, _ := serve(t, "../../pipelines", "--store", db)
	b := newTab(t)
	b.do("open the ARC run", chromedp.Navigate(base+"runs/"+id), chromedp.WaitVisible(chromedp.CSS("svg.graph")))
	links := strings.Fields(b.value(`Array.from(document.querySelectorAll('svg.graph a, table.steps a')).map(a => a.getAttribute("href")).join(" ")`))
	if len(links) < 10 {
		t.Fatalf("the page links to %d nodes and steps", len(links))
	}
	for _, link := range append([]string{""}, links...) {
		b.do("open "+link, chromedp.Navigate(base+"runs/"+id+link), chromedp.WaitVisible(chromedp.CSS("#timeline")))
		b.eval(`document.querySelectorAll("details").forEach(d => d.open = true), true`)
		if b.eval(`document.documentElement.scrollWidth <= window.innerWidth`) {
			continue
		}
		wide := b.value(`Array.from(document.querySelectorAll("main *")).filter(e => e.getBoundingClientRect().right > window.innerWidth + 1).slice(-4).map(e => e.tagName + "." + e.className + " " + Math.round(e.getBoundingClientRect().right) + "px: " + (e.innerText || "").slice(0, 60)).join("\n")`)
		t.Errorf("%s: the page is %s px wide in a %s px window:\n%s", link, b.value(`String(document.documentElement.scrollWidth)`), b.value(`String(window.innerWidth)`), wide)
	}
	// The inspector opens beside the graph, not below the page's values.
	b.do("inspect the coder", chromedp.Navigate(base+"runs/"+id+"?path=refine%5B1%5D%2Fcode"), chromedp.WaitVisible(chromedp.CSS("#inspector")))
	b.eval("window.scrollTo(0, 0), true")
	if !b.eval(`(() => { const g = document.querySelector(".graph-panel").getBoundingClientRect(), i = document.getElementById("inspector").getBoundingClientRect();
		return i.left >= g.right && Math.abs(i.top - g.top) < 100 })()`) {
		t.Errorf("the inspector is not beside the graph: graph %s, inspector %s", b.value(`JSON.stringify(document.querySelector(".graph-panel").getBoundingClientRect())`),
			b.value(`JSON.stringify(document.getElementById("inspector").getBoundingClientRect())`))
	}
	if !b.eval(`document.querySelectorAll("svg.graph path.edge.taken").length > 5`) {
		t.Error("the graph does not draw the path the run took")
	}
	b.docShot("run-inspector")
	b.do("open the ARC run with its first step's state", chromedp.Navigate(base+"runs/"+id+"?at=1#state"), chromedp.WaitVisible(chromedp.CSS("#state-at")))
	b.eval("window.scrollTo(0, 0), true")
	b.docShot("run")
}

// TestServeBrowserStartPage: /start over the shipped pipelines lists each
// pipeline with its description, and no cassette or test file; a click
// on one shows its description and its graph beside the form that
// starts it, every box's text inside its box (arc_evolve's map label was
// not).
func TestServeBrowserStartPage(t *testing.T) {
	newTab := browser(t)
	base, _ := serve(t, "../../pipelines")
	b := newTab(t)
	b.do("open /start", chromedp.Navigate(base+"start"), chromedp.WaitVisible(chromedp.CSS("#pipelines")))
	files := b.value(`Array.from(document.querySelectorAll("#pipelines tbody tr")).map(r => r.cells[1].innerText).join("\n")`)
	for _, want := range []string{"triage.yaml", "arc_evolve.yaml", "tools/ocr.yaml"} {
		if !strings.Contains(files, want) {
			t.Errorf("/start does not list %s:\n%s", want, files)
		}
	}
	if strings.Contains(files, "cassette") || strings.Contains(files, ".test.yaml") {
		t.Errorf("/start lists what is not a pipeline:\n%s", files)
	}
	if !b.eval(`Array.from(document.querySelectorAll("#pipelines tbody tr")).every(r => r.cells[2].innerText.trim() !== "")`) {
		t.Errorf("a pipeline is listed without what it does:\n%s", b.text("#pipelines"))
	}
	b.docShot("start")
	b.do("choose triage", chromedp.Click(chromedp.CSS(`#pipelines a[href="/start?pipeline=triage.yaml"]`)), chromedp.WaitVisible(chromedp.CSS("#launch")))
	if !b.eval(`document.querySelectorAll("svg.graph g.gnode").length > 3 && document.getElementById("description").innerText.length > 20`) {
		t.Error("the chosen pipeline's page does not show its graph and description")
	}
	b.docShot("start-pipeline")
	b.do("choose arc_evolve", chromedp.Navigate(base+"start?pipeline=arc_evolve.yaml"), chromedp.WaitVisible(chromedp.CSS("svg.graph")))
	if out := b.value(`Array.from(document.querySelectorAll("svg.graph g.gnode")).filter(g => {
		const r = g.querySelector("rect").getBoundingClientRect();
		return Array.from(g.querySelectorAll("text")).some(x => x.getBoundingClientRect().right > r.right)
	}).map(g => Array.from(g.querySelectorAll("text")).map(x => x.textContent + " (" + Math.round(x.getBoundingClientRect().right - g.querySelector("rect").getBoundingClientRect().right) + " px)").join(" / ")).join("\n")`); out != "" {
		t.Errorf("text leaves its box in Chromium:\n%s", out)
	}
}
