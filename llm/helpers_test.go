package llm

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/flowrun/flowrun/llm/llmtest"
	"github.com/flowrun/flowrun/llmconf"
)

// fakeKey is recognisable so tests can assert it never leaks.
const fakeKey = "sk-test-FAKEKEY-7f3a9c1e5b2d4f60"

// sleeps records the waits a client asked for and returns at once.
type sleeps struct {
	mu sync.Mutex
	d  []time.Duration
}

func (s *sleeps) sleep(ctx context.Context, d time.Duration) error {
	s.mu.Lock()
	s.d = append(s.d, d)
	s.mu.Unlock()
	return ctx.Err()
}

func (s *sleeps) waits() []time.Duration {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]time.Duration(nil), s.d...)
}

// testClient is a client for srv with the fake key and instant sleeps.
func testClient(t *testing.T, srv *llmtest.Server, tweak ...func(*Options)) (*Client, *sleeps) {
	t.Helper()
	s := &sleeps{}
	opts := Options{Env: srv.Env(fakeKey), Sleep: s.sleep, BaseBackoff: time.Millisecond, MaxBackoff: 8 * time.Millisecond}
	for _, f := range tweak {
		f(&opts)
	}
	return New(opts), s
}

func model(name string) *llmconf.Model {
	return &llmconf.Model{Name: "default", Model: name}
}

func userSays(text string) []Message {
	return []Message{{Role: RoleUser, Text: text}}
}

func ptr[T any](v T) *T { return &v }

// observed collects the exchanges of a request.
type observed struct {
	mu sync.Mutex
	x  []Exchange
}

func (o *observed) observe(x Exchange) {
	o.mu.Lock()
	defer o.mu.Unlock()
	o.x = append(o.x, x)
}

func (o *observed) all() []Exchange {
	o.mu.Lock()
	defer o.mu.Unlock()
	return append([]Exchange(nil), o.x...)
}
