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
// with no space to break at) wrap or fold.
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
}
