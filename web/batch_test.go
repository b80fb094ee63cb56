package web

import (
	"bufio"
	"context"
	"html"
	"net/http"
	"net/url"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/chromedp/chromedp"

	"github.com/flowrun/flowrun/batch/batchtest"
	"github.com/flowrun/flowrun/internal/testwait"
	"github.com/flowrun/flowrun/store"
)

// arcBatches records two batches of six ARC items in the harness's store,
// B fixing task-03 and task-04 and breaking task-02 and task-05.
func arcBatches(h *harness) (a, b *store.Batch) {
	keys := batchtest.Keys("task-", 6)
	a = batchtest.RecordWith(h.t, h.st, "b20261122T100000-aaaa", keys, "PPFFPF", 1, "", batchtest.ARC("A"))
	b = batchtest.RecordWith(h.t, h.st, "b20261122T110000-bbbb", keys, "PFPPFF", 1, "", batchtest.ARC("B"))
	return a, b
}

// TestBatchItemWhy checks the batch page shows each item's inputs,
// expected grid, output grid with the wrong cell outlined and the
// judge's reasoning, that its filters keep the items they should, and
// that the compare page puts A's and B's outputs side by side with a
// text diff and a cell diff.
func TestBatchItemWhy(t *testing.T) {
	h := newHarness(t, "")
	a, b := arcBatches(h)
	_, page := h.get("/batches/" + b.ID)
	// The row is the dataset's, counted from 1 as people count rows.
	for _, want := range []string{`id="item-1"><tr><td>2</td><td>task-02</td>`, "1 cell differs from the expected", "judge's reason", "the centre cell of task-02 is wrong",
		`<svg class="arc-grid"`, `action="/batches/` + b.ID + `/rate"`, `name="csrf" value="` + h.srv.csrf + `"`} {
		if !strings.Contains(page, want) {
			t.Errorf("the batch page lacks %s", want)
		}
	}
	for query, want := range map[string]string{
		"show=failures":            "task-02 task-05 task-06",
		"metric=exact":             "task-02 task-04 task-06",
		"q=centre+cell+of+task-05": "task-05",
		"q=task-06&show=failures":  "task-06",
	} {
		_, page := h.get("/batches/" + b.ID + "?" + query)
		var got []string
		for _, k := range batchtest.Keys("task-", 6) {
			if strings.Contains(page, "<td>"+k+"</td>") {
				got = append(got, k)
			}
		}
		if strings.Join(got, " ") != want {
			t.Errorf("?%s: items %v, want %s", query, got, want)
		}
		if !regexp.MustCompile(`data-live="/batches/` + b.ID + `/live\?shown=[0-9a-f]{24}&` + regexp.QuoteMeta(query) + `"`).MatchString(html.UnescapeString(page)) {
			t.Errorf("?%s: the live part does not keep the filters", query)
		}
	}
	_, cmp := h.get("/compare?a=" + a.ID + "&b=" + b.ID + "&show=broken")
	if strings.Contains(cmp, "<td>task-03</td>") || !strings.Contains(cmp, "<td>task-02</td>") ||
		!strings.Contains(cmp, "<del>Side A of task-02</del><ins>Side B of task-02</ins>") || !strings.Contains(cmp, "1 cell differs from the expected") {
		t.Errorf("compare, broken only:\n%s", cmp)
	}
}

// TestBatchRateForm rates an item from the batch page's form: the rating
// becomes the human metric with its kappa, a second one replaces it, an
// unknown item or no verdict is refused with a message, and a post
// without the CSRF token or from another origin changes nothing.
func TestBatchRateForm(t *testing.T) {
	h := newHarness(t, "")
	_, b := arcBatches(h)
	code, loc := h.post("/batches/"+b.ID+"/rate", url.Values{"key": {"task-02"}, "verdict": {"pass"}, "note": {"close enough"}, "query": {"show=failures"}})
	if code != http.StatusSeeOther || loc != "/batches/"+b.ID+"?show=failures" {
		t.Fatalf("rate: %d %s", code, loc)
	}
	h.post("/batches/"+b.ID+"/rate", url.Values{"key": {"task-02"}, "verdict": {"fail"}, "note": {"the centre cell is wrong"}})
	h.post("/batches/"+b.ID+"/rate", url.Values{"key": {"task-01"}, "verdict": {"pass"}})
	ratings, err := h.st.Ratings(context.Background(), b.ID)
	if err != nil || len(ratings) != 2 || ratings["task-02"].Pass || ratings["task-02"].Note != "the centre cell is wrong" {
		t.Fatalf("ratings %v, %v", ratings, err)
	}
	_, page := h.get("/batches/" + b.ID)
	for _, want := range []string{"Human ratings against the metrics", "<td>solved</td><td>2</td><td>2</td><td>1.00</td>", "human note</b> the centre cell is wrong"} {
		if !strings.Contains(page, want) {
			t.Errorf("the batch page lacks %s", want)
		}
	}
	for form, want := range map[string]url.Values{
		"has no item":         {"key": {"task-99"}, "verdict": {"pass"}},
		"choose pass or fail": {"key": {"task-01"}},
	} {
		code, loc := h.post("/batches/"+b.ID+"/rate", want)
		if code != http.StatusSeeOther || !strings.Contains(h.shown(loc), form) {
			t.Errorf("%v: %d, shown %q", want, code, h.shown(loc))
		}
	}
	// Without the token, and from another origin: refused.
	for _, origin := range []string{h.ts.URL, "http://evil.example"} {
		req, _ := http.NewRequest(http.MethodPost, h.ts.URL+"/batches/"+b.ID+"/rate", strings.NewReader("key=task-03&verdict=fail"))
		req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
		req.Header.Set("Origin", origin)
		resp, err := h.c.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != http.StatusForbidden {
			t.Errorf("a post from %s without the token: %d", origin, resp.StatusCode)
		}
	}
	if ratings, _ := h.st.Ratings(context.Background(), b.ID); ratings["task-03"] != nil {
		t.Error("a refused post rated an item")
	}
}

// TestBatchPageInBrowser opens the batch page in headless Chromium,
// filters it to the failures, opens an item and rates it with its form.
func TestBatchPageInBrowser(t *testing.T) {
	h := newHarness(t, "")
	_, b := arcBatches(h)
	ctx := batchtest.Browser(t)
	do := func(what string, steps ...chromedp.Action[chromedp.Void]) {
		t.Helper()
		if err := chromedp.Do(ctx, steps...); err != nil {
			t.Fatalf("%s: %v", what, err)
		}
	}
	eval := func(js string) string {
		t.Helper()
		s, err := chromedp.Run(ctx, chromedp.Evaluate[string](js))
		if err != nil {
			t.Fatalf("%s: %v", js, err)
		}
		return s
	}
	// A step that navigates (a form's button) runs through RunResponse,
	// which returns once the new page has loaded. chromedp learns of the
	// new document apart from that (its DOM.documentUpdated is handled on
	// another goroutine), so until then a query still finds the old
	// page's nodes, and an action on one fails in the new document
	// ("Could not find node with given id"; both pages have task-05's
	// row): each navigation is followed by a wait for something only the
	// new page has, or lacks. (The page's live stream once replaced the
	// whole item list with itself right after loading, which failed an
	// action the same way: TestLiveBatchSendsOnlyWhatChanged.)
	navigate := func(what string, steps ...chromedp.Action[chromedp.Void]) {
		t.Helper()
		if _, err := chromedp.RunResponse(ctx, steps...); err != nil {
			t.Fatalf("%s: %v", what, err)
		}
	}
	do("open the batch page", chromedp.Navigate(h.ts.URL+"/batches/"+b.ID), chromedp.WaitVisible(chromedp.CSS("#item-filters")))
	navigate("filter to the failures", chromedp.SetValue(chromedp.CSS(`#item-filters select[name="show"]`), "failures"),
		chromedp.Click(chromedp.CSS("#item-filters button")))
	do("see the filtered page", chromedp.WaitNotPresent(chromedp.CSS("#item-0")))
	if got := eval(`Array.from(document.querySelectorAll("tbody.item")).map(b => b.id).join(" ")`); got != "item-1 item-4 item-5" {
		t.Fatalf("failures shown: %s", got)
	}
	// Failures are drawn apart and open, as in the report.
	if got := eval(`Array.from(document.querySelectorAll("tbody.item.failing")).filter(b => b.querySelector("details").open).map(b => b.id).join(" ")`); got != "item-1 item-4 item-5" {
		t.Errorf("failures drawn apart and open: %q, want every one shown", got)
	}
	do("fill in task-05's rating", chromedp.WaitVisible(chromedp.CSS("#item-4 svg.arc-grid")),
		chromedp.Click(chromedp.CSS(`#item-4 input[value="fail"]`)),
		chromedp.SendKeys(chromedp.CSS(`#item-4 input[name="note"]`), "wrong centre"))
	navigate("rate task-05", chromedp.Click(chromedp.CSS("#item-4 form.rate button")))
	do("see the agreement table", chromedp.WaitVisible(chromedp.CSS("table.agreement")))
	if got := eval(`location.search`); got != "?show=failures" {
		t.Errorf("after rating, the page is %s: want the filters kept", got)
	}
	ratings, err := h.st.Ratings(context.Background(), b.ID)
	if err != nil || ratings["task-05"] == nil || ratings["task-05"].Pass || ratings["task-05"].Note != "wrong centre" {
		t.Fatalf("ratings %v, %v", ratings, err)
	}
}

// TestBatchPageBoundsItems: a large batch's page shows the first
// maxItemRows items with their details and says how many more the
// filters can reach.
func TestBatchPageBoundsItems(t *testing.T) {
	h := newHarness(t, "")
	n := maxItemRows + 5
	b := batchtest.Record(t, h.st, "b20261122T100000-aaaa", batchtest.Keys("t", n), strings.Repeat("P", n-1)+"F", 1, "")
	_, page := h.get("/batches/" + b.ID)
	if got := strings.Count(page, `<tbody class="item`); got != maxItemRows || !strings.Contains(page, "5 more items match") {
		t.Errorf("%d items shown, want %d and a note of 5 more", got, maxItemRows)
	}
	_, page = h.get("/batches/" + b.ID + "?show=failures")
	if got := strings.Count(page, `<tbody class="item failing"`); got != 1 || !strings.Contains(page, "The answer is t305") {
		t.Errorf("the failures filter shows %d items, want the last one with its outputs", got)
	}
}

// TestLiveBatchSendsOnlyWhatChanged: a batch page's live stream does not
// send the body the page was rendered with (the page would replace its
// items with themselves right after loading, dropping the row a person
// is clicking); its first message is the body after a change.
func TestLiveBatchSendsOnlyWhatChanged(t *testing.T) {
	h := newHarness(t, "")
	_, b := arcBatches(h)
	_, page := h.get("/batches/" + b.ID)
	m := regexp.MustCompile(`data-live="([^"]+)"`).FindStringSubmatch(page)
	if m == nil {
		t.Fatalf("the batch page has no live part:\n%s", page)
	}
	ctx := testwait.HangContext(t)
	req, _ := http.NewRequestWithContext(ctx, http.MethodGet, h.ts.URL+html.UnescapeString(m[1]), nil)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	if err := h.st.Rate(context.Background(), &store.Rating{Batch: b.ID, Key: "task-03", Pass: false, Note: "rated while watching"}); err != nil {
		t.Fatal(err)
	}
	lines := bufio.NewScanner(resp.Body)
	lines.Buffer(make([]byte, 1<<20), 1<<24)
	for lines.Scan() {
		if data, ok := strings.CutPrefix(lines.Text(), "data: "); ok {
			if !strings.Contains(data, "rated while watching") {
				t.Fatalf("the stream's first message is the body the page already shows")
			}
			return
		}
	}
	t.Fatalf("no message on the stream within %s", testwait.Hang())
}

// TestBatchPageShowsChecksInBrowser opens in headless Chromium an item
// whose primary metric is a list of checks: each check shows with its
// mark and reason, the failed one marked as failing, and an item with no
// check left says it is unscored.
func TestBatchPageShowsChecksInBrowser(t *testing.T) {
	h := newHarness(t, "")
	yes, no := true, false
	b := batchtest.RecordWith(t, h.st, "b20261202T100000-chks", batchtest.Keys("test-", 2), "FF", 1, "", &batchtest.Dress{
		Result: func(i int, it *store.BatchItem, _ map[string]any) {
			if i == 1 {
				it.Scores, it.Class, it.Error = map[string]any{"exact": true, "steps": 2}, "unscored", "metric solved: unscored: it has no checks"
				return
			}
			it.Checks = map[string]store.Checks{"solved": {Score: 0.5, List: []store.Check{
				{Name: "contains: Paris", Pass: &yes, Score: 1, Weight: 1},
				{Name: "llm-rubric: names the river", Pass: &no, Weight: 1, Reason: "The answer never names the Seine."},
				{Name: "javascript: output.length < 200", Weight: 1, Reason: "not converted"},
			}}}
		}})
	ctx := batchtest.Browser(t)
	if err := chromedp.Do(ctx, chromedp.Navigate(h.ts.URL+"/batches/"+b.ID), chromedp.WaitVisible(chromedp.CSS("#item-filters")),
		chromedp.WaitVisible(chromedp.CSS("#item-0 table.checks")), chromedp.WaitVisible(chromedp.CSS("#item-1 .err"))); err != nil {
		t.Fatalf("open the batch page's items: %v", err)
	}
	rows, err := chromedp.Run(ctx, chromedp.Evaluate[string](`Array.from(document.querySelectorAll("#item-0 table.checks tr")).map(r => r.className + ": " + r.innerText.replace(/\s+/g, " ").trim()).join("\n")`))
	if err != nil {
		t.Fatal(err)
	}
	want := "check pass: ✓ contains: Paris\ncheck fail: ✗ llm-rubric: names the river The answer never names the Seine.\ncheck none: – javascript: output.length < 200 not converted"
	if rows != want {
		t.Errorf("the checks shown:\n%s\nwant:\n%s", rows, want)
	}
	caption, err := chromedp.Run(ctx, chromedp.Evaluate[string](`document.querySelector("#item-0 table.checks caption").innerText`))
	if err != nil || caption != "checks of solved: 1 of 2 passed, 1 not checked, score 0.50" {
		t.Errorf("caption %q, %v", caption, err)
	}
	unscored, err := chromedp.Run(ctx, chromedp.Evaluate[string](`document.querySelector("#item-1 .err").innerText`))
	if err != nil || !strings.Contains(unscored, "unscored: metric solved: unscored: it has no checks") {
		t.Errorf("the unscored item says %q, %v", unscored, err)
	}
}

// TestBatchLabelsShow: a labelled batch is listed by its label with its
// id beneath, its page shows the label and description, and Compare with
// names the other batches by label and start time and preselects the
// batch before this one of its pipeline and dataset.
func TestBatchLabelsShow(t *testing.T) {
	h := newHarness(t, "")
	a, b := arcBatches(h)
	ctx := context.Background()
	if err := h.st.LabelBatch(ctx, a.ID, "baseline", ""); err != nil {
		t.Fatal(err)
	}
	if err := h.st.LabelBatch(ctx, b.ID, "centre rule", "tells the model <where> the centre is"); err != nil {
		t.Fatal(err)
	}
	_, list := h.get("/batches")
	if !strings.Contains(list, `<a href="/batches/`+b.ID+`">centre rule</a><div class="mono sub">`+b.ID+`</div>`) {
		t.Errorf("the batches list does not name B by its label:\n%s", list)
	}
	_, page := h.get("/batches/" + b.ID)
	for _, want := range []string{`<span class="label">centre rule</span>`, `<p class="description">tells the model &lt;where&gt; the centre is</p>`,
		`<option value="` + a.ID + `" selected>baseline · `} {
		if !strings.Contains(page, want) {
			t.Errorf("B's page lacks %s", want)
		}
	}
	if _, page := h.get("/batches/" + a.ID); strings.Contains(page, `" selected>`) || strings.Contains(page, "(previous)") ||
		!strings.Contains(page, `<option value="" disabled selected>choose a batch`) {
		t.Error("the first batch preselects a batch that ran after it")
	}
}

// A batch started elsewhere (flowrun batch ../served/p.yaml from another
// directory) names its pipeline as the run pages do, relative to the
// served directory, on its page; one outside the
// served directory by its file name. (The batches list names pipelines
// by their name.)
func TestBatchNamesItsPipelineAsServed(t *testing.T) {
	h := newHarness(t, "")
	ctx := context.Background()
	for id, abs := range map[string]string{"b-inside": filepath.Join(h.dir, "evals", "qa.yaml"), "b-outside": "/elsewhere/secret/qa.yaml"} {
		b := &store.Batch{ID: id, Pipeline: "../../typed/from/elsewhere/qa.yaml", PipelineAbs: abs, PipelineName: "qa", Dataset: "qa.jsonl", Settings: []byte(`{}`)}
		if err := h.st.CreateBatch(ctx, b, []*store.BatchItem{{Index: 0, Key: "q1", Item: map[string]any{"id": "q1"}}}); err != nil {
			t.Fatal(err)
		}
	}
	for id, want := range map[string]string{"b-inside": `<span class="mono">evals/qa.yaml</span>`, "b-outside": `<span class="mono">qa.yaml</span>`} {
		if _, page := h.get("/batches/" + id); !strings.Contains(page, want) || strings.Contains(page, "typed/from") || strings.Contains(page, "secret") {
			t.Errorf("%s's page does not name its pipeline %s", id, want)
		}
	}
}
