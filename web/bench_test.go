package web

import (
	"bufio"
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/flowrun/flowrun/dsl"
	"github.com/flowrun/flowrun/runtime"
	"github.com/flowrun/flowrun/store"
	"github.com/flowrun/flowrun/store/storetest"
	"github.com/flowrun/flowrun/tokens"
)

const loopPipeline = `
version: 1
name: looper
nodes:
  - id: rounds
    loop:
      max_iterations: 5000
      until: "false"
      body:
        - id: step
          llm:
            prompt: "next"
models:
  default: {model: gpt-4.1-mini}
`

// benchRun records a run of loopPipeline with n events (model turns with
// their messages, and a checkpoint per finished node, as a real run's) and
// returns the server and the run.
func benchRun(b *testing.B, n int) (*Server, *store.Store, string) {
	dir := b.TempDir()
	path := filepath.Join(dir, "looper.yaml")
	if err := os.WriteFile(path, []byte(loopPipeline), 0o644); err != nil {
		b.Fatal(err)
	}
	st, err := store.Open(filepath.Join(dir, "runs.db"))
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { st.Close() })
	p, ds := dsl.Load(path)
	if p == nil {
		b.Fatal(ds)
	}
	ctx := context.Background()
	id := runtime.NewRunID()
	run := &store.Run{ID: id, Pipeline: path, PipelineAbs: path, PipelineName: p.Name, PipelineHash: p.Hash, PipelineSrc: loopPipeline}
	if err := st.CreateRun(ctx, run); err != nil {
		b.Fatal(err)
	}
	rec, err := st.Recorder(ctx, id)
	if err != nil {
		b.Fatal(err)
	}
	t0 := time.Now()
	rec.Event(runtime.Event{Type: runtime.EventRunStarted, Run: id, Pipeline: p.Name, Time: t0})
	for i := 1; i < n; i++ {
		path := fmt.Sprintf("rounds[%d]/step", i/3+1)
		e := runtime.Event{Run: id, Path: path, Node: "step", Kind: "llm", Time: t0.Add(time.Duration(i) * time.Millisecond)}
		switch i % 3 {
		case 0:
			e.Type = runtime.EventNodeStarted
		case 1:
			e.Type = runtime.EventModelTurn
			e.Turn = &runtime.Turn{Model: "gpt-4.1-mini", Messages: []map[string]any{{"role": "user", "text": "next"}},
				Reply: map[string]any{"text": "ok"}, Usage: &tokens.Usage{Total: 12}, CostUSD: 0.0001, LatencyMS: 3}
		default:
			e.Type, e.DurationMS, e.Output = runtime.EventNodeFinished, 4, map[string]any{"text": "ok"}
			cp := &runtime.Checkpoint{Path: path, Output: e.Output, State: map[string]any{"n": i}, Steps: int64(i), Pure: true}
			if _, err := rec.Add(ctx, cp); err != nil {
				b.Fatal(err)
			}
		}
		rec.Event(e)
	}
	if err := rec.Flush(ctx); err != nil {
		b.Fatal(err)
	}
	if err := st.Finish(ctx, id, store.Ending{Status: runtime.StatusStopped, Reason: "benchmark"}); err != nil {
		b.Fatal(err)
	}
	srv, err := New(Options{Store: st, Dir: dir})
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(srv.Close)
	return srv, st, id
}

// BenchmarkRunPage10kEvents renders the page of a run with 10,000 events:
// it must open in well under a second.
func BenchmarkRunPage10kEvents(b *testing.B) {
	srv, _, id := benchRun(b, 10000)
	size := 0
	b.ResetTimer()
	for b.Loop() {
		w := httptest.NewRecorder()
		r := httptest.NewRequest(http.MethodGet, "http://127.0.0.1/runs/"+id, nil)
		srv.ServeHTTP(w, r)
		if w.Code != http.StatusOK || !strings.Contains(w.Body.String(), `data-seq="10000"`) {
			b.Fatalf("%d, last event missing", w.Code)
		}
		size = w.Body.Len()
	}
	b.ReportMetric(float64(b.Elapsed().Milliseconds())/float64(b.N), "ms/page")
	b.ReportMetric(float64(size)/1e6, "MB/page")
}

// BenchmarkLiveLatency is the time from an event being recorded, by a
// recorder as a run's, to its row arriving on the run page's live stream:
// the recorder's grouping delay plus the store poll.
func BenchmarkLiveLatency(b *testing.B) {
	srv, st, id := benchRun(b, 10)
	ts := httptest.NewServer(srv)
	defer ts.Close()
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	req, _ := http.NewRequestWithContext(ctx, http.MethodGet, ts.URL+"/runs/"+id+"/live?after=9&status=running", nil)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		b.Fatal(err)
	}
	defer resp.Body.Close()
	lines := bufio.NewScanner(resp.Body)
	rec, err := st.Recorder(ctx, id)
	if err != nil {
		b.Fatal(err)
	}
	defer rec.Flush(context.Background())
	seq := 9
	var total time.Duration
	b.ResetTimer()
	for b.Loop() {
		seq++
		start := time.Now()
		rec.Event(runtime.Event{Type: runtime.EventNodeStarted, Run: id, Path: "rounds[9]/step", Node: "step", Kind: "llm", Time: start})
		want := fmt.Sprintf(`"seq":%d`, seq)
		for lines.Scan() {
			if strings.Contains(lines.Text(), want) {
				break
			}
		}
		total += time.Since(start)
	}
	b.ReportMetric(float64(total.Microseconds())/1000/float64(b.N), "ms/event")
}

// BenchmarkRunsList500 reads and renders the runs list of a store with
// 500 runs (400 of their own, and 5 batches of 20 items), unfiltered and
// filtered by status: what the list's live stream does at each change of
// the store.
func BenchmarkRunsList500(b *testing.B) {
	dir := b.TempDir()
	st, err := store.Open(filepath.Join(dir, "runs.db"))
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { st.Close() })
	if err := storetest.Fill(context.Background(), st, 400, 5, 20); err != nil {
		b.Fatal(err)
	}
	srv, err := New(Options{Store: st, Dir: dir})
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(srv.Close)
	size := 0
	b.ResetTimer()
	for b.Loop() {
		for _, q := range []string{"/", "/?status=failed"} {
			w := httptest.NewRecorder()
			srv.ServeHTTP(w, httptest.NewRequest(http.MethodGet, "http://127.0.0.1"+q, nil))
			if w.Code != http.StatusOK || !strings.Contains(w.Body.String(), `class="run"`) {
				b.Fatalf("%s: %d", q, w.Code)
			}
			size += w.Body.Len()
		}
	}
	b.ReportMetric(float64(b.Elapsed().Microseconds())/1000/float64(b.N)/2, "ms/list")
	b.ReportMetric(float64(size)/float64(b.N)/2/1000, "kB/list")
}
