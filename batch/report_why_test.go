package batch

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/chromedp/chromedp"
	"github.com/flowrun/flowrun/batch/batchtest"
	"github.com/flowrun/flowrun/store"
)

// gridFixture records two batches of six ARC items whose outputs are
// grids: B fixes task-03 and task-04 and breaks task-02 and task-05. A
// failing item's grid has one wrong cell, its judge says which and
// task-05 is rated by a person. It returns B's report against A.
func gridFixture(t *testing.T) (st *store.Store, a, b *store.Batch, page string) {
	t.Helper()
	st = batchtest.OpenStore(t)
	keys := batchtest.Keys("task-", 6)
	a = batchtest.RecordWith(t, st, "b20261122T100000-aaaa", keys, "PPFFPF", 1, "", batchtest.ARC("A"))
	b = batchtest.RecordWith(t, st, "b20261122T110000-bbbb", keys, "PFPPFF", 1, "", batchtest.ARC("B"))
	if err := st.Rate(context.Background(), &store.Rating{Batch: b.ID, Key: "task-05", Pass: false, Note: "centre cell wrong, as the judge says"}); err != nil {
		t.Fatal(err)
	}
	for _, x := range []*store.Batch{a, b} {
		x.Settings = []byte(`{"metrics": ["solved", "exact", "steps"], "primary": "solved", "expected": ["expected"]}`)
	}
	var buf bytes.Buffer
	if err := WriteReport(context.Background(), st, &buf, b, a); err != nil {
		t.Fatal(err)
	}
	return st, a, b, buf.String()
}

// TestReportShowsWhy checks that the report alone says why an item
// failed: its outputs (long ones folded), the expected grid and the
// output grid drawn with the wrong cell outlined, the judge's reasoning,
// the human note and kappa, and, for fixed and broken items, A's and B's
// outputs side by side with a text diff and a cell diff.
func TestReportShowsWhy(t *testing.T) {
	_, _, b, page := gridFixture(t)
	for _, want := range []string{
		`<tbody class="item" id="item-1" data-fail="1" data-outcome="broken"`,
		`data-fails="exact solved"`,
		`<details class="fold"><summary><code>Rule: shift each colour by one. …</code></summary>`,
		`1 cell differs from the expected`,
		`judge's reason</b> the centre cell of task-02 is wrong`,
		`human note</b> centre cell wrong, as the judge says`,
		`Human ratings against the metrics`,
		`<details id="pair-task-02">`,
		`<del>Side A of task-02</del><ins>Side B of task-02</ins>`,
		`<option value="fixed">fixed</option>`,
	} {
		if !strings.Contains(page, want) {
			t.Errorf("the report lacks %s", want)
		}
	}
	if strings.Contains(page, `<option value="flaky">`) {
		t.Error("the flaky filter shows for a batch that ran each item once")
	}
	// The broken item's side by side: its input and expected grid, then
	// B's grid against A's with the one changed cell outlined.
	pair := page[strings.Index(page, `<details id="pair-task-02">`):]
	pair = pair[:strings.Index(pair, "</table>")]
	if strings.Count(pair, "<svg") != 4 || !strings.Contains(pair, "1 cell differs from the expected") ||
		!strings.Contains(pair, `<td class="fname">input task</td><td colspan="3"><code>task-02</code>`) || !strings.Contains(pair, `<td class="fname">expected</td>`) {
		t.Errorf("the side by side of task-02 draws %d grids:\n%s", strings.Count(pair, "<svg"), pair)
	}
	_ = b
}

// TestReportFiltersInBrowser opens the report in headless Chromium and
// uses its filters: failures only, broken, a failing metric, an error
// class and text search each leave the items they should, and the grids
// are drawn.
func TestReportFiltersInBrowser(t *testing.T) {
	ctx := batchtest.Browser(t)
	_, _, _, page := gridFixture(t)
	dir := t.TempDir()
	file := filepath.Join(dir, "report.html")
	if err := os.WriteFile(file, []byte(page), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := chromedp.Do(ctx, chromedp.Navigate("file://"+file), chromedp.WaitVisible(chromedp.CSS("#item-table"))); err != nil {
		t.Fatal(err)
	}
	visible := func() string {
		t.Helper()
		js := `Array.from(document.querySelectorAll("tbody.item")).filter(b => !b.hidden).map(b => b.querySelector("td.key").textContent.trim()).join(",")`
		keys, err := chromedp.Run(ctx, chromedp.Evaluate[string](js))
		if err != nil {
			t.Fatal(err)
		}
		return keys
	}
	set := func(sel, value string) {
		t.Helper()
		js := `(function(){var el=document.querySelector(` + "`" + sel + "`" + `); el.value=` + "`" + value + "`" +
			`; el.dispatchEvent(new Event(el.tagName==="INPUT"?"input":"change")); return true})()`
		if _, err := chromedp.Run(ctx, chromedp.Evaluate[bool](js)); err != nil {
			t.Fatal(err)
		}
	}
	if got := visible(); got != "task-01,task-02,task-03,task-04,task-05,task-06" {
		t.Fatalf("before filtering: %s", got)
	}
	for _, c := range []struct{ sel, value, want string }{
		{"#f-show", "fail", "task-02,task-05,task-06"},
		{"#f-show", "broken", "task-02,task-05"},
		{"#f-show", "fixed", "task-03,task-04"},
		{"#f-show", "", "task-01,task-02,task-03,task-04,task-05,task-06"},
		{"#f-metric", "exact", "task-02,task-04,task-06"},
		{"#f-metric", "", "task-01,task-02,task-03,task-04,task-05,task-06"},
		{"#f-text", "centre cell of task-06", "task-06"},
		{"#f-text", "", "task-01,task-02,task-03,task-04,task-05,task-06"},
	} {
		set(c.sel, c.value)
		if got := visible(); got != c.want {
			t.Errorf("%s = %q: items %s, want %s", c.sel, c.value, got, c.want)
		}
	}
	count, err := chromedp.Run(ctx, chromedp.Evaluate[string](`document.getElementById("f-count").textContent`))
	if err != nil {
		t.Fatal(err)
	}
	grids, err := chromedp.Run(ctx, chromedp.Evaluate[int](`document.querySelectorAll("tbody.item svg.arc-grid").length`))
	if err != nil {
		t.Fatal(err)
	}
	if count != "6 of 6 items" || grids != 12 {
		t.Errorf("count %q, %d grids drawn in the items (want 6 expected + 6 outputs)", count, grids)
	}
	set("#f-show", "fail")
	shot, err := chromedp.Run(ctx, chromedp.FullScreenshot(90))
	if err != nil {
		t.Fatal(err)
	}
	if os.Getenv("FLOWRUN_REPORT_SCREENSHOT") != "" {
		out := filepath.Join("testdata", "out")
		os.MkdirAll(out, 0o755)
		os.WriteFile(filepath.Join(out, "report-why.jpg"), shot, 0o644)
	}
}
