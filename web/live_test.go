package web

import (
	"bufio"
	"context"
	"net/http"
	"net/url"
	"path/filepath"
	"runtime"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/flowrun/flowrun/internal/testwait"
	"github.com/flowrun/flowrun/llm/llmtest"
	flowruntime "github.com/flowrun/flowrun/runtime"
	"github.com/flowrun/flowrun/store"
)

// TestLiveStreamsShareOneFeed: many live streams of a running run whose
// input and one node output are large cost each a bounded amount of
// memory, whatever the size of the run: the run's events are read and
// rendered once for all of them and no stream holds a copy of the run.
// Each stream still gets every event and the status, and the feed goes
// when its last stream does.
func TestLiveStreamsShareOneFeed(t *testing.T) {
	const streams, big = 40, 4 << 20
	const perStream = 256 << 10 // bytes of heap a stream may hold; the run is 16 times that
	h := newHarness(t, "")
	ctx := context.Background()
	blob := strings.Repeat("x", big)
	id := "run-big"
	if err := h.st.CreateRun(ctx, &store.Run{ID: id, Pipeline: "chat.yaml", PipelineAbs: filepath.Join(h.dir, "chat.yaml"), PipelineName: "chat",
		Inputs: map[string]any{"blob": blob}}); err != nil {
		t.Fatal(err)
	}
	rec, err := h.st.Recorder(ctx, id)
	if err != nil {
		t.Fatal(err)
	}
	t0 := time.Now()
	rec.Event(flowruntime.Event{Type: flowruntime.EventRunStarted, Run: id, Pipeline: "chat", Time: t0})
	rec.Event(flowruntime.Event{Type: flowruntime.EventNodeStarted, Run: id, Path: "echo", Node: "echo", Kind: "set", Time: t0})
	rec.Event(flowruntime.Event{Type: flowruntime.EventNodeFinished, Run: id, Path: "echo", Node: "echo", Kind: "set", Time: t0,
		Output: map[string]any{"blob": blob}})
	const events = 3

	runtime.GC()
	var before, after runtime.MemStats
	runtime.ReadMemStats(&before)
	var open []*http.Response
	defer func() {
		for _, resp := range open {
			resp.Body.Close()
		}
	}()
	streamCtx := testwait.HangContext(t)
	for i := range streams {
		req, _ := http.NewRequestWithContext(streamCtx, http.MethodGet, h.ts.URL+"/runs/"+id+"/live?after=0", nil)
		resp, err := h.c.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		open = append(open, resp)
		got, status := 0, ""
		lines := bufio.NewScanner(resp.Body)
		// The status may come before the recorder has written the events,
		// which then follow.
		for (got < events || status == "") && lines.Scan() {
			switch line := lines.Text(); {
			case line == "event: event":
				got++
			case strings.HasPrefix(line, "data: \""):
				status = line
			}
		}
		if streamCtx.Err() != nil {
			t.Fatalf("stream %d: %d events and status %q after %s, want %d and running", i, got, status, testwait.Hang(), events)
		}
		if got != events || status != `data: "running"` {
			t.Fatalf("stream %d: %d events and status %q, want %d and running", i, got, status, events)
		}
	}
	runtime.GC()
	runtime.ReadMemStats(&after)
	grown := int64(after.HeapAlloc) - int64(before.HeapAlloc)
	t.Logf("%d streams of a run with a %d MiB input: heap grew %d KiB, %d KiB a stream", streams, big>>20, grown>>10, grown/streams>>10)
	if grown > streams*perStream {
		t.Errorf("the heap grew by %d KiB for %d streams: more than %d KiB a stream", grown>>10, streams, perStream>>10)
	}
	runtime.KeepAlive(blob)

	for _, resp := range open {
		resp.Body.Close()
	}
	open = nil
	left := 0
	if !testwait.Until(func() bool {
		h.srv.mu.Lock()
		left = len(h.srv.feeds)
		h.srv.mu.Unlock()
		return left == 0
	}) {
		t.Fatalf("%d feeds left %s after their streams closed", left, testwait.Hang())
	}
}

// TestRunsBeyondMaxRunsQueue: with MaxRuns 1, a second run started while
// the first runs is queued, not started: the runs page lists it as
// queued and the model sees one request at a time. It starts when the
// first run ends, and both complete. A queued resume shows as queued on
// its run's page, and Stop takes it out of the queue.
func TestRunsBeyondMaxRunsQueue(t *testing.T) {
	h := newHarness(t, "", func(o *Options) { o.MaxRuns = 1 })
	release := make(chan struct{})
	var releaseOnce sync.Once
	releaseAll := func() { releaseOnce.Do(func() { close(release) }) }
	defer releaseAll() // a failure must not leave model calls hanging
	h.fake.Handle(func(llmtest.Request) llmtest.Reply {
		<-release
		return llmtest.Text("hello")
	})
	first := h.start(url.Values{"pipeline": {"chat.yaml"}})
	code, loc := h.post("/start", url.Values{"pipeline": {"chat.yaml"}})
	if code != http.StatusSeeOther || loc != "/" {
		t.Fatalf("second start: %d, Location %q; want the runs page, where it waits", code, loc)
	}
	if _, page := h.get("/"); !strings.Contains(page, `<span class="status queued">queued</span>`) || !strings.Contains(page, "chat.yaml") {
		t.Fatalf("the runs page does not list the queued run:\n%s", page)
	}
	if runs, _ := h.st.Runs(context.Background()); len(runs) != 1 {
		t.Fatalf("%d runs in the store with one slot, want 1", len(runs))
	}

	// A launch that cannot start once its turn comes says why on the runs
	// page: nobody waits on its request any more.
	if code, loc := h.post("/start", url.Values{"pipeline": {"chat.yaml"}, "in.count": {"many"}}); code != http.StatusSeeOther || loc != "/" {
		t.Fatalf("third start: %d, Location %q", code, loc)
	}

	// A resume of a stopped run queues too, and Stop takes it out.
	stopped := "run-stopped"
	if err := h.st.CreateRun(context.Background(), &store.Run{ID: stopped, Pipeline: "chat.yaml", PipelineAbs: filepath.Join(h.dir, "chat.yaml"), PipelineName: "chat"}); err != nil {
		t.Fatal(err)
	}
	if err := h.st.Finish(context.Background(), stopped, store.Ending{Status: "stopped", Reason: "test"}); err != nil {
		t.Fatal(err)
	}
	if code, _ := h.post("/runs/"+stopped+"/resume", url.Values{}); code != http.StatusSeeOther {
		t.Fatalf("resume: %d", code)
	}
	if _, page := h.get("/runs/" + stopped); !strings.Contains(page, `id="queued"`) {
		t.Fatalf("the run page does not show the queued resume:\n%s", page)
	}
	if code, _ := h.post("/runs/"+stopped+"/stop", url.Values{}); code != http.StatusSeeOther {
		t.Fatalf("stop: %d", code)
	}
	if !testwait.Until(func() bool { return len(h.srv.queued()) == 2 }) {
		t.Fatalf("queue %+v %s after the stop, want the two starts only", h.srv.queued(), testwait.Hang())
	}

	releaseAll()
	h.await(first, "completed")
	done := 0
	if !testwait.Until(func() bool {
		runs, _ := h.st.Runs(context.Background())
		done = 0
		for _, r := range runs {
			if r.Status == "completed" {
				done++
			}
		}
		return done == 2
	}) {
		t.Fatalf("runs %d completed %s after the first ended, want 2", done, testwait.Hang())
	}
	if n := h.fake.MaxInFlight(); n != 1 {
		t.Fatalf("%d model requests at once with MaxRuns 1", n)
	}
	// The third start's turn comes when the second run ends.
	if !testwait.Until(func() bool { return len(h.srv.queued()) == 0 && len(h.srv.launchFailures()) == 1 }) {
		t.Fatalf("queue %+v and failures %+v %s after both runs ended", h.srv.queued(), h.srv.launchFailures(), testwait.Hang())
	}
	if _, page := h.get("/"); !strings.Contains(page, "queued, then could not start: ") || !strings.Contains(page, "count") {
		t.Fatalf("the runs page does not say why the third start failed:\n%s", page)
	}
	if s, _, _ := h.st.Status(context.Background(), stopped); s != "stopped" {
		t.Fatalf("the resume taken out of the queue left the run %s", s)
	}
}

// TestRunPageShowsCallsInFlight: a background model call still in
// progress is on the run page with its response id, how long it has run
// and how often it was polled; once its node finishes it is not.
func TestRunPageShowsCallsInFlight(t *testing.T) {
	h := newHarness(t, "")
	ctx := context.Background()
	id := "run-bg"
	if err := h.st.CreateRun(ctx, &store.Run{ID: id, Pipeline: "chat.yaml", PipelineAbs: filepath.Join(h.dir, "chat.yaml"), PipelineName: "chat"}); err != nil {
		t.Fatal(err)
	}
	rec, err := h.st.Recorder(ctx, id)
	if err != nil {
		t.Fatal(err)
	}
	t0 := time.Now().Add(-4 * time.Minute)
	rec.Event(flowruntime.Event{Type: flowruntime.EventRunStarted, Run: id, Pipeline: "chat", Time: t0})
	rec.Event(flowruntime.Event{Type: flowruntime.EventNodeStarted, Run: id, Path: "plan", Node: "plan", Kind: "llm", Time: t0})
	rec.Event(flowruntime.Event{Type: flowruntime.EventRemoteWork, Run: id, Path: "plan", Time: t0,
		Remote: &flowruntime.RemoteWork{What: "created", ID: "resp_9", Status: "queued"}})
	for range 3 {
		rec.Event(flowruntime.Event{Type: flowruntime.EventRemoteWork, Run: id, Path: "plan", Time: t0,
			Remote: &flowruntime.RemoteWork{What: "polled", ID: "resp_9", Status: "in_progress"}})
	}
	if err := rec.Flush(ctx); err != nil {
		t.Fatal(err)
	}
	_, page := h.get("/runs/" + id)
	// 4m and a few seconds: the page is drawn a moment after t0.
	if !strings.Contains(page, "In flight") || !strings.Contains(page, "plan: response resp_9 in progress, 4m") || !strings.Contains(page, "s, polled 3 times") {
		t.Fatalf("the run page does not show the call in flight:\n%s", page)
	}
	rec.Event(flowruntime.Event{Type: flowruntime.EventNodeFinished, Run: id, Path: "plan", Node: "plan", Kind: "llm", Time: time.Now()})
	if err := rec.Flush(ctx); err != nil {
		t.Fatal(err)
	}
	if _, page = h.get("/runs/" + id); strings.Contains(page, "resp_9 in progress") {
		t.Fatal("a finished node's call is still shown in flight")
	}
}

// TestLiveStatusIsNeverOlderThanItsPage: a page opened after the run's
// status changed, while another stream of the run is still open (the
// page it replaced, which the browser closes a moment later), must not
// be told the status the shared feed read before: that made the page
// reload itself once more and lose the click a person was giving it (CI
// saw "Could not find node" on Yes). The stream says only what the store
// says after it joined.
func TestLiveStatusIsNeverOlderThanItsPage(t *testing.T) {
	// The store's mark is never polled: the feed reads again only when
	// a stream joins or the test fires a change.
	h := newHarness(t, "", func(o *Options) { o.Poll = time.Hour })
	ctx := context.Background()
	id := "run-stale"
	if err := h.st.CreateRun(ctx, &store.Run{ID: id, Pipeline: "chat.yaml", PipelineAbs: filepath.Join(h.dir, "chat.yaml"), PipelineName: "chat"}); err != nil {
		t.Fatal(err)
	}
	streamCtx := testwait.HangContext(t)
	open := func(status flowruntime.Status) *bufio.Scanner {
		t.Helper()
		req, _ := http.NewRequestWithContext(streamCtx, http.MethodGet, h.ts.URL+"/runs/"+id+"/live?after=0&status="+string(status), nil)
		resp, err := h.c.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { resp.Body.Close() })
		return bufio.NewScanner(resp.Body)
	}
	open(flowruntime.StatusRunning)
	if !testwait.Until(func() bool {
		h.srv.mu.Lock()
		defer h.srv.mu.Unlock()
		f := h.srv.feeds[id]
		if f == nil {
			return false
		}
		f.mu.Lock()
		defer f.mu.Unlock()
		return f.status == flowruntime.StatusRunning
	}) {
		t.Fatalf("the first stream's feed did not read the run within %s", testwait.Hang())
	}
	if err := h.st.Finish(ctx, id, store.Ending{Status: flowruntime.StatusWaiting}); err != nil {
		t.Fatal(err)
	}
	page := open(flowruntime.StatusWaiting)
	if err := h.st.Finish(ctx, id, store.Ending{Status: flowruntime.StatusCompleted}); err != nil {
		t.Fatal(err)
	}
	h.srv.change.fire()
	for page.Scan() {
		if line := page.Text(); strings.HasPrefix(line, "data: \"") {
			if line != `data: "completed"` {
				t.Fatalf("the page shown waiting was sent %s before completed: it would reload for nothing", line)
			}
			return
		}
	}
	t.Fatalf("the page's stream ended without a status: %v", streamCtx.Err())
}
