package main

import (
	"context"
	"os"
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

// shippedRunPage records a run of the shipped pipeline name and opens
// its page in Chromium, served over the shipped pipelines, once sel shows.
func shippedRunPage(t *testing.T, name, sel string) (b *tab, base, id string) {
	newTab := browser(t)
	db := filepath.Join(t.TempDir(), "runs.db")
	id = shippedRun(t, db, name)
	base, _ = serve(t, "../../pipelines", "--store", db)
	b = newTab(t)
	b.do("open the run of "+name, chromedp.Navigate(base+"runs/"+id), chromedp.WaitVisible(chromedp.CSS(sel)))
	return b, base, id
}

// TestServeBrowserRunPageFits: an ARC run's page is no wider than a
// 1,400 px window, as it opens, with each node in the inspector and at
// each step's state, every fold open: long values (code, grids, JSON
// with no space to break at) wrap or fold. The inspector opens beside
// the graph, which draws the path the run took.
func TestServeBrowserRunPageFits(t *testing.T) {
	b, base, id := shippedRunPage(t, "single_pair", "svg.graph")
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
	b.shot("run-state")
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

// TestServeBrowserRunGrids: a shipped ARC pipeline's run page draws its
// attempts per test input as the batch report does, each grid captioned
// and against the task's expected test output ("as expected" in its
// title when it matches), in the outputs and in the inspector of the
// node that made them.
func TestServeBrowserRunGrids(t *testing.T) {
	needPython(t)
	b, base, id := shippedRunPage(t, "arc_evolve", ".outputs figure.arc-fig")
	captions := b.value(`Array.from(document.querySelectorAll(".outputs figure.arc-fig figcaption")).map(c => c.textContent).join(", ")`)
	if !strings.Contains(captions, "test 1 attempt_1") || !strings.Contains(captions, "test 1 attempt_2") {
		t.Fatalf("the outputs' grids are captioned %q, want each test input's attempts", captions)
	}
	compared := b.value(`Array.from(document.querySelectorAll(".outputs figure.arc-fig svg title")).map(c => c.textContent).join("; ")`)
	if !strings.Contains(compared, "expected") {
		t.Errorf("the attempts are not drawn against the expected grid: %q", compared)
	}
	b.eval(`document.querySelector(".outputs").scrollIntoView(), true`)
	b.docView("run-grids")
	b.do("inspect the answer", chromedp.Navigate(base+"runs/"+id+"?path=answer"), chromedp.WaitVisible(chromedp.CSS("#inspector")))
	if got := b.value(`Array.from(document.querySelectorAll("#inspector figure.arc-fig figcaption")).map(c => c.textContent).join(", ")`); !strings.Contains(got, "test 1 attempt_1") {
		t.Errorf("the inspector's output grids are captioned %q", got)
	}
}

// docView saves what the window shows of the page as docs/img/NAME.png
// when FLOWRUN_DOCS_SCREENSHOT=1 (and as an artifact always): a long
// page's part, where docShot takes the whole.
func (b *tab) docView(name string) {
	png, err := chromedp.Run(b.ctx, chromedp.CaptureScreenshot())
	if err == nil {
		err = os.WriteFile(filepath.Join(b.dir, name+".png"), png, 0o644)
	}
	if err == nil && os.Getenv("FLOWRUN_DOCS_SCREENSHOT") == "1" {
		err = os.WriteFile("../../docs/img/"+name+".png", png, 0o644)
	}
	if err != nil {
		b.t.Fatal(err)
	}
}
