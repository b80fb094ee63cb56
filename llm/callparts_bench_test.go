package llm

import (
	"bytes"
	"context"
	"io"
	"net/http"
	"sync"
	"testing"
	"time"

	"github.com/openai/openai-go/v3"

	"github.com/flowrun/flowrun/llmconf"
)

// BenchmarkModelCallParts splits one plain chat call to the in-process
// fake server, made one at a time, into the steps it takes: building the
// request (flowrun's call, its hash, openai-go's params and their JSON),
// the HTTP round trip (the fake server's own work included: it shares the
// process), decoding the reply with openai-go, and the whole call through
// Client.Complete; and the call answered from the response cache (kept in
// memory here, so the figure is the client's own cost).
//
//	go test ./llm -run '^$' -bench ModelCallParts -benchtime 2000x -count 5
func BenchmarkModelCallParts(b *testing.B) {
	srv := benchServer(b)
	m := &llmconf.Model{Name: "default", Model: "gpt-4.1-mini", Temperature: ptr(0.0), Stream: "false"}
	req := Request{Key: Key{Node: "loop[1]/llm"}, Model: m, Messages: []Message{{Role: RoleSystem, Text: "Be brief."}, {Role: RoleUser, Text: "Say ok."}}}
	c := New(Options{Env: srv.Env(fakeKey)})
	ep, err := c.endpointFor(m)
	if err != nil {
		b.Fatal(err)
	}
	build := func() []byte {
		cl, err := newCall(&req, req.Messages, nil)
		if err != nil {
			b.Fatal(err)
		}
		_ = cl.hash()
		body, err := chatParams(cl, ep).MarshalJSON()
		if err != nil {
			b.Fatal(err)
		}
		return body
	}
	body := build()
	hc := defaultHTTPClient()
	roundTrip := func() []byte {
		hreq, err := http.NewRequest(http.MethodPost, srv.URL+chatPath, bytes.NewReader(body))
		if err != nil {
			b.Fatal(err)
		}
		hreq.Header.Set("Content-Type", "application/json")
		hreq.Header.Set("Authorization", "Bearer "+fakeKey)
		res, err := hc.Do(hreq)
		if err != nil {
			b.Fatal(err)
		}
		defer res.Body.Close()
		out, err := io.ReadAll(res.Body)
		if err != nil || res.StatusCode != http.StatusOK {
			b.Fatalf("status %d: %v", res.StatusCode, err)
		}
		return out
	}
	replyJSON := roundTrip()

	b.Run("build", func(b *testing.B) {
		for range b.N {
			build()
		}
		usPerCall(b)
	})
	b.Run("roundtrip", func(b *testing.B) {
		for range b.N {
			roundTrip()
		}
		usPerCall(b)
	})
	b.Run("decode", func(b *testing.B) {
		for range b.N {
			var out openai.ChatCompletion
			if err := out.UnmarshalJSON(replyJSON); err != nil || out.Choices[0].Message.Content != "ok" {
				b.Fatalf("decoding %s: %v", replyJSON, err)
			}
			_ = chatUsage(out.Usage)
		}
		usPerCall(b)
	})
	b.Run("complete", func(b *testing.B) {
		for range b.N {
			if _, err := c.Complete(context.Background(), req); err != nil {
				b.Fatal(err)
			}
		}
		usPerCall(b)
	})
	b.Run("complete_cache_hit", func(b *testing.B) {
		cached := New(Options{Env: srv.Env(fakeKey), CacheDefault: CacheOn, Cache: &memoryReplyCache{}})
		if _, err := cached.Complete(context.Background(), req); err != nil {
			b.Fatal(err)
		}
		before := srv.Calls()
		b.ResetTimer()
		for range b.N {
			resp, err := cached.Complete(context.Background(), req)
			if err != nil || !resp.Cached {
				b.Fatalf("not a cache hit: %+v %v", resp, err)
			}
		}
		usPerCall(b)
		if srv.Calls() != before {
			b.Fatalf("%d requests reached the server", srv.Calls()-before)
		}
	})
}

func usPerCall(b *testing.B) {
	b.ReportMetric(float64(b.Elapsed().Nanoseconds())/1e3/float64(b.N), "us/call")
}

// memoryReplyCache is a ReplyCache in a map.
type memoryReplyCache struct {
	mu      sync.Mutex
	replies map[string][]byte
}

func (m *memoryReplyCache) CachedReply(_ context.Context, endpoint, hash string, _ time.Duration) ([]byte, bool, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	r, ok := m.replies[endpoint+" "+hash]
	return r, ok, nil
}

func (m *memoryReplyCache) PutCachedReply(_ context.Context, endpoint, hash string, reply []byte) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.replies == nil {
		m.replies = map[string][]byte{}
	}
	m.replies[endpoint+" "+hash] = reply
	return nil
}
