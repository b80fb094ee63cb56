package web

import (
	"bufio"
	"context"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/flowrun/flowrun/internal/testwait"
	"github.com/flowrun/flowrun/runtime"
	"github.com/flowrun/flowrun/store"
	"github.com/flowrun/flowrun/store/storetest"
)

// listedIDs are the runs and batches a runs list page shows, in order.
var listedIDs = regexp.MustCompile(`data-(?:run|batch)="([^"]+)"`)

func listed(page string) []string {
	var ids []string
	for _, m := range listedIDs.FindAllStringSubmatch(page, -1) {
		ids = append(ids, m[1])
	}
	return ids
}

// TestRunsListPagesFiltersFolds: with 500 runs (400, and 5 batches of
// 20 items) the list shows 50 lines a page, each batch folded into one
// line with its items counted and a link that unfolds it; filters by
// pipeline, status, id prefix, input text and start time combine; a time
// it cannot read is said, not ignored.
func TestRunsListPagesFiltersFolds(t *testing.T) {
	h := newHarness(t, "")
	if err := storetest.Fill(context.Background(), h.st, 400, 5, 20); err != nil {
		t.Fatal(err)
	}
	_, page := h.get("/")
	ids := listed(page)
	if len(ids) != 50 || ids[0] != storetest.BatchID(4) || !strings.Contains(page, "1–50 of 405") {
		t.Fatalf("first page: %d lines from %v", len(ids), ids[:min(3, len(ids))])
	}
	if !strings.Contains(page, `<span class="status completed">10 completed</span>`) || !strings.Contains(page, `<span class="status failed">10 failed</span>`) ||
		!strings.Contains(page, `href="/?batch=`+storetest.BatchID(4)+`&amp;sort=start" class="expand">20 items`) {
		t.Fatal("a batch line lacks its counts or the link that unfolds it")
	}
	_, page = h.get("/?page=9")
	if ids := listed(page); len(ids) != 5 || ids[4] != storetest.RunID(0) || !strings.Contains(page, "401–405 of 405") {
		t.Fatalf("last page: %v", ids)
	}
	for query, want := range map[string]int{
		"batch=" + storetest.BatchID(2):                       20,
		"batch=" + storetest.BatchID(2) + "&status=failed":    10,
		"pipeline=beta&status=stopped":                        33,
		"id=20260101T000000-run0039":                          10,
		"text=topic+39":                                       11,
		"text=item+3.1":                                       1,
		"pipeline=gamma&text=topic+1&id=20260101T000000-run0": 36,
		"after=2000-01-01T00:00&before=2999-01-01T00:00":      405,
		"after=2999-01-01T00:00":                              0,
	} {
		_, page := h.get("/?" + query)
		total := regexp.MustCompile(`(\d+) of (\d+)</span>`).FindStringSubmatch(page)
		if total == nil || total[2] != strconv.Itoa(want) {
			t.Errorf("%s: %v lines, want %d", query, total, want)
		}
	}
	_, page = h.get("/?after=yesterday")
	if !strings.Contains(page, `started after: &#34;yesterday&#34; is not a date and time`) {
		t.Fatal("an unreadable time is not said")
	}
	_, page = h.get("/?text=%3Cscript%3E")
	if strings.Contains(page, "<script>") || !strings.Contains(page, `value="&lt;script&gt;"`) {
		t.Fatal("the search text is not escaped")
	}
}

// TestLiveListReadsOnlyOnChange: a live list whose run is in progress is
// rendered again every second (its duration grows: each rendering
// differs, and is sent) without reading the store; a change of the store
// reads it once more.
func TestLiveListReadsOnlyOnChange(t *testing.T) {
	h := newHarness(t, "")
	ctx := context.Background()
	if err := h.st.CreateRun(ctx, &store.Run{ID: "20260101T000000-running", Pipeline: "chat.yaml", PipelineAbs: h.dir + "/chat.yaml", PipelineName: "chat"}); err != nil {
		t.Fatal(err)
	}
	var reads atomic.Int32
	ts := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		h.srv.liveRows(w, r, "runs", "runrows", func(ctx context.Context) (any, error) {
			reads.Add(1)
			return h.srv.rows(ctx, readListQuery(r))
		})
	}))
	defer ts.Close()
	streamCtx := testwait.HangContext(t)
	req, _ := http.NewRequestWithContext(streamCtx, http.MethodGet, ts.URL, nil)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	lines := bufio.NewScanner(resp.Body)
	lines.Buffer(make([]byte, 1<<20), 1<<24)
	next := func() string {
		for lines.Scan() {
			if strings.HasPrefix(lines.Text(), "data: ") {
				return lines.Text()
			}
		}
		if streamCtx.Err() != nil {
			t.Fatalf("no next rendering on the stream within %s", testwait.Hang())
		}
		t.Fatal("the stream ended")
		return ""
	}
	// The server's first look at the store may count as a change.
	for range 4 {
		next()
	}
	if n := reads.Load(); n > 2 {
		t.Fatalf("4 renderings read the store %d times, want 1 (2 with the server's first look)", n)
	}
	recordRun(t, h, "20260101T000001-new", nil)
	for !strings.Contains(next(), "20260101T000001-new") {
	}
	if n := reads.Load(); n < 2 {
		t.Fatalf("a change of the store was not read (%d reads)", n)
	}
}

// A judge's run is listed under the item's run it judged, links back to
// it, and is not on the runs page on its own.
func TestChildRunsListedUnderTheirRun(t *testing.T) {
	h := newHarness(t, "")
	ctx := context.Background()
	src, err := os.ReadFile(filepath.Join(h.dir, "chat.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	for _, r := range []*store.Run{{ID: "r-item"}, {ID: "r-judge", ChildOf: "r-item"}} {
		r.Pipeline, r.PipelineAbs, r.PipelineName, r.PipelineSrc = "chat.yaml", filepath.Join(h.dir, "chat.yaml"), "chat", string(src)
		if err := h.st.CreateRun(ctx, r); err != nil {
			t.Fatal(err)
		}
		if err := h.st.Finish(ctx, r.ID, store.Ending{Status: runtime.StatusCompleted}); err != nil {
			t.Fatal(err)
		}
	}
	if _, page := h.get("/runs/r-item"); !strings.Contains(page, `Judged by: <a href="/runs/r-judge">r-judge</a>`) {
		t.Errorf("the item's run does not list its judge:\n%s", page)
	}
	if _, page := h.get("/runs/r-judge"); !strings.Contains(page, `A child run of <a href="/runs/r-item">r-item</a>`) {
		t.Errorf("the judge's run does not link to the run it judged:\n%s", page)
	}
	if _, page := h.get("/"); strings.Contains(page, "r-judge") || !strings.Contains(page, "r-item") {
		t.Errorf("the runs page lists the judge's run on its own:\n%s", page)
	}
}
