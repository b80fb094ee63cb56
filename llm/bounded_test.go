package llm

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"runtime"
	"runtime/metrics"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/flowrun/flowrun/errclass"
	"github.com/flowrun/flowrun/llm/llmtest"
	"github.com/flowrun/flowrun/llmconf"
)

// hostile is a model endpoint whose replies are far longer than any
// limit: each is written as it is generated, so that the server holds
// none of it and what the client holds is what the client kept.
type hostile struct {
	srv      *httptest.Server
	requests atomic.Int32
	mu       sync.Mutex
	paths    []string
}

func newHostile(t *testing.T, handle func(w http.ResponseWriter, r *http.Request)) *hostile {
	h := &hostile{}
	h.srv = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		h.requests.Add(1)
		h.mu.Lock()
		h.paths = append(h.paths, r.Method+" "+r.URL.Path)
		h.mu.Unlock()
		handle(w, r)
	}))
	t.Cleanup(h.srv.Close)
	return h
}

func (h *hostile) sent() string {
	h.mu.Lock()
	defer h.mu.Unlock()
	return strings.Join(h.paths, ", ")
}

const (
	responsePrefix  = `{"id":"resp_1","object":"response","status":"completed","model":"m","output":[{"type":"message","id":"msg_1","role":"assistant","status":"completed","content":[{"type":"output_text","text":"`
	chatDeltaPrefix = "data: {\"id\":\"x\",\"object\":\"chat.completion.chunk\",\"choices\":[{\"index\":0,\"delta\":{\"content\":\""
	eventStream     = "text/event-stream"
	jsonType        = "application/json"
)

var (
	fill4K        = strings.Repeat("a", 4096)
	chatDelta     = chatDeltaPrefix + fill4K + "\"}}]}\n\n"
	responseDelta = "event: response.output_text.delta\ndata: {\"type\":\"response.output_text.delta\",\"sequence_number\":1,\"delta\":\"" + fill4K + "\"}\n\n"
)

// peakHeapGrowth runs f and returns how far the heap grew above where it
// was before, at its highest, sampled every millisecond.
func peakHeapGrowth(f func()) uint64 {
	sample := []metrics.Sample{{Name: "/memory/classes/heap/objects:bytes"}}
	read := func() uint64 {
		metrics.Read(sample)
		return sample[0].Value.Uint64()
	}
	runtime.GC()
	base := read()
	var peak atomic.Uint64
	done := make(chan struct{})
	var wg sync.WaitGroup
	wg.Go(func() {
		tick := time.NewTicker(time.Millisecond)
		defer tick.Stop()
		for {
			if v := read(); v > peak.Load() {
				peak.Store(v)
			}
			select {
			case <-done:
				return
			case <-tick.C:
			}
		}
	})
	f()
	close(done)
	wg.Wait()
	if v := read(); v > peak.Load() {
		peak.Store(v)
	}
	return max(peak.Load(), base) - base
}

// hostileModel is a model on h whose replies may bring limit bytes (0:
// the default).
func hostileModel(h *hostile, api string, limit int) *llmconf.Model {
	return &llmconf.Model{Name: "hostile", Model: "m", API: api, BaseURL: h.srv.URL + "/v1", MaxReplyBytes: limit}
}

// hostileClient is a client that sleeps no backoff and sends no key.
func hostileClient() *Client {
	s := &sleeps{}
	return New(Options{Env: func(string) (string, bool) { return "", false }, Sleep: s.sleep})
}

// assertCut checks err is the error of a reply cut at its limit: class
// server, not sent again, not run again by the node, and saying what.
func assertCut(t *testing.T, err error, says ...string) {
	t.Helper()
	var e *Error
	if !errors.As(err, &e) {
		t.Fatalf("error %v (%T), want an *Error", err, err)
	}
	if e.Class() != errclass.Server || !e.final || !e.RetriesSpent() {
		t.Errorf("class %s, final %v, retries spent %v: want server, final, spent (the node must not run again)", e.Class(), e.final, e.RetriesSpent())
	}
	for _, want := range append([]string{`model "hostile"`, "max_reply_bytes", "not retried"}, says...) {
		if !strings.Contains(e.Error(), want) {
			t.Errorf("error %q does not say %q", e.Error(), want)
		}
	}
}

// The tests' limit is 1 MiB and their bodies 64 MiB: a client that read
// a body whole would hold at least that.
const (
	testLimit = 1 << 20
	testBody  = 64 << 20
	// heapRoom is what a call may add to the heap besides the body:
	// buffers, the decoded reply, the test's own goroutines.
	heapRoom = 16 << 20
)

func TestRepliesAreBounded(t *testing.T) {
	for _, tc := range []struct {
		name, api, stream string
		background        bool
		handle            func(w http.ResponseWriter, r *http.Request)
		want              string // the requests that reached the server
	}{
		{name: "chat plain", api: APIChat, stream: "false", want: "POST /v1/chat/completions",
			handle: func(w http.ResponseWriter, r *http.Request) {
				llmtest.Flood(w, jsonType, llmtest.ChatPrefix, "a", testBody)
			}},
		{name: "chat stream of endless deltas", api: APIChat, stream: "true", want: "POST /v1/chat/completions",
			handle: func(w http.ResponseWriter, r *http.Request) { llmtest.Flood(w, eventStream, "", chatDelta, testBody) }},
		{name: "chat stream of one endless line", api: APIChat, stream: "true", want: "POST /v1/chat/completions",
			handle: func(w http.ResponseWriter, r *http.Request) {
				llmtest.Flood(w, eventStream, chatDeltaPrefix, "a", testBody)
			}},
		{name: "chat error body", api: APIChat, stream: "false", want: "POST /v1/chat/completions",
			handle: func(w http.ResponseWriter, r *http.Request) {
				w.WriteHeader(http.StatusInternalServerError)
				chunk := []byte(fill4K)
				for sent := 0; sent < testBody; sent += len(chunk) {
					if _, err := w.Write(chunk); err != nil {
						return
					}
				}
			}},
		{name: "responses plain", api: APIResponses, stream: "false", want: "POST /v1/responses",
			handle: func(w http.ResponseWriter, r *http.Request) {
				llmtest.Flood(w, jsonType, responsePrefix, "a", testBody)
			}},
		{name: "responses stream", api: APIResponses, stream: "true", want: "POST /v1/responses",
			handle: func(w http.ResponseWriter, r *http.Request) {
				llmtest.Flood(w, eventStream, "", responseDelta, testBody)
			}},
		{name: "background create", api: APIResponses, stream: "false", background: true, want: "POST /v1/responses",
			handle: func(w http.ResponseWriter, r *http.Request) {
				llmtest.Flood(w, jsonType, responsePrefix, "a", testBody)
			}},
		{name: "background poll", api: APIResponses, stream: "false", background: true, want: "POST /v1/responses, GET /v1/responses/resp_1",
			handle: func(w http.ResponseWriter, r *http.Request) {
				if r.Method == http.MethodPost {
					w.Header().Set("Content-Type", jsonType)
					fmt.Fprint(w, `{"id":"resp_1","object":"response","status":"queued","model":"m","output":[]}`)
					return
				}
				llmtest.Flood(w, jsonType, responsePrefix, "a", testBody)
			}},
		{name: "background stream resumed", api: APIResponses, stream: "true", background: true, want: "POST /v1/responses, GET /v1/responses/resp_1",
			handle: func(w http.ResponseWriter, r *http.Request) {
				if r.Method == http.MethodPost {
					// Created, then the stream breaks off: the client resumes it.
					w.Header().Set("Content-Type", eventStream)
					fmt.Fprint(w, "event: response.created\ndata: {\"type\":\"response.created\",\"sequence_number\":0,\"response\":{\"id\":\"resp_1\",\"object\":\"response\",\"status\":\"in_progress\",\"model\":\"m\",\"output\":[]}}\n\n")
					return
				}
				llmtest.Flood(w, eventStream, "", responseDelta, testBody)
			}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			h := newHostile(t, tc.handle)
			c := hostileClient()
			m := hostileModel(h, tc.api, testLimit)
			m.Stream, m.Background, m.Poll = tc.stream, tc.background, time.Millisecond
			var err error
			grew := peakHeapGrowth(func() {
				_, err = c.Complete(context.Background(), Request{Model: m, Messages: userSays("hi")})
			})
			assertCut(t, err, "longer than 1 MiB", "raise max_reply_bytes")
			if got := h.sent(); got != tc.want {
				t.Errorf("requests %q, want %q: a cut reply is not sent again", got, tc.want)
			}
			if grew > heapRoom {
				t.Errorf("the heap grew by %d MiB reading a %d MiB reply cut at 1 MiB", grew>>20, testBody>>20)
			}
		})
	}
}

// At the default limit, a reply sixteen times as long fails the same
// way. What the heap holds meanwhile is a small multiple of the limit
// (measured: 2.5 for a plain reply, 4.5 for a stream), whatever the
// reply's length: a growing buffer (openai-go's for a plain body, the
// scanner's for a line, the reply's text for a stream), the ones it
// outgrew, and the garbage the collector lets pile up to twice what is
// live. Without the limit it is several times the reply.
func TestDefaultReplyLimit(t *testing.T) {
	const body = 16 * llmconf.DefaultMaxReplyBytes
	for _, tc := range []struct {
		name, stream string
		handle       func(w http.ResponseWriter, r *http.Request)
		says         []string
		room         uint64
	}{
		{name: "plain", stream: "false", says: []string{"longer than 64 MiB", "raise max_reply_bytes"}, room: 6 * llmconf.DefaultMaxReplyBytes,
			handle: func(w http.ResponseWriter, r *http.Request) {
				llmtest.Flood(w, jsonType, llmtest.ChatPrefix, "a", body)
			}},
		{name: "stream of one endless line", stream: "true", says: []string{"a line longer than 16 MiB", "does not raise it"}, room: 6 * maxLineBytes,
			handle: func(w http.ResponseWriter, r *http.Request) {
				llmtest.Flood(w, eventStream, chatDeltaPrefix, "a", body)
			}},
		{name: "stream labelled JSON, of one endless line", stream: "true", says: []string{"a line longer than 16 MiB", "does not raise it"}, room: 6 * maxLineBytes,
			handle: func(w http.ResponseWriter, r *http.Request) { llmtest.Flood(w, jsonType, chatDeltaPrefix, "a", body) }},
		{name: "stream of endless deltas", stream: "true", says: []string{"longer than 64 MiB", "raise max_reply_bytes"}, room: 6 * llmconf.DefaultMaxReplyBytes,
			handle: func(w http.ResponseWriter, r *http.Request) { llmtest.Flood(w, eventStream, "", chatDelta, body) }},
	} {
		t.Run(tc.name, func(t *testing.T) {
			h := newHostile(t, tc.handle)
			m := hostileModel(h, APIChat, 0)
			m.Stream = tc.stream
			var err error
			grew := peakHeapGrowth(func() {
				_, err = hostileClient().Complete(context.Background(), Request{Model: m, Messages: userSays("hi")})
			})
			assertCut(t, err, tc.says...)
			if n := h.requests.Load(); n != 1 {
				t.Errorf("%d requests, want 1", n)
			}
			t.Logf("heap grew by %d MiB", grew>>20)
			if grew > tc.room {
				t.Errorf("the heap grew by %d MiB reading a %d MiB reply, want at most %d MiB", grew>>20, body>>20, tc.room>>20)
			}
		})
	}
}

// A reply under the limit is read as ever, plain or streamed.
func TestReplyUnderTheLimitIsRead(t *testing.T) {
	srv := llmtest.New(t)
	c, _ := testClient(t, srv)
	text := strings.Repeat("a", 900<<10)
	for _, stream := range []string{"false", "true"} {
		srv.Push(llmtest.Text(text))
		m := model("gpt-4.1-mini")
		m.Stream, m.MaxReplyBytes = stream, testLimit
		resp, err := c.Complete(context.Background(), Request{Model: m, Messages: userSays("hi")})
		if err != nil {
			t.Fatalf("stream %s: %v", stream, err)
		}
		if resp.Text != text {
			t.Errorf("stream %s: %d bytes of text, want %d", stream, len(resp.Text), len(text))
		}
	}
}

// A background response whose poll is cut stays recorded as it was: the
// call made again with a higher limit collects it, without creating
// another.
func TestCutBackgroundResponseIsCollectedWithAHigherLimit(t *testing.T) {
	text := strings.Repeat("a", 2*testLimit)
	h := newHostile(t, func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", jsonType)
		if r.Method == http.MethodPost {
			fmt.Fprint(w, `{"id":"resp_1","object":"response","status":"queued","model":"m","output":[]}`)
			return
		}
		fmt.Fprint(w, responsePrefix+text+`","annotations":[]}]}],"usage":{"input_tokens":1,"output_tokens":2,"total_tokens":3}}`)
	})
	c := hostileClient()
	m := hostileModel(h, APIResponses, testLimit)
	m.Background, m.Poll = true, time.Millisecond
	in := &memoryInFlight{}
	_, err := c.Complete(context.Background(), Request{Model: m, Messages: userSays("hi"), InFlight: in})
	assertCut(t, err, "longer than 1 MiB")
	if bc, _ := in.Lookup(1); bc.ID != "resp_1" || bc.Status != "queued" {
		t.Fatalf("recorded %+v, want resp_1 still queued", bc)
	}
	m.MaxReplyBytes = 4 * testLimit
	resp, err := c.Complete(context.Background(), Request{Model: m, Messages: userSays("hi"), InFlight: in})
	if err != nil {
		t.Fatal(err)
	}
	if resp.Text != text {
		t.Errorf("%d bytes of text, want %d", len(resp.Text), len(text))
	}
	if got, want := h.sent(), "POST /v1/responses, GET /v1/responses/resp_1, GET /v1/responses/resp_1"; got != want {
		t.Errorf("requests %q, want %q", got, want)
	}
}
