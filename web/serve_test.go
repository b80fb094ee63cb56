package web

import (
	"context"
	"net"
	"net/http"
	"testing"
)

// TestServeStopsWithItsContext: Serve answers on its listener until its
// context is done, then returns nil, the listener closed.
func TestServeStopsWithItsContext(t *testing.T) {
	h := newHarness(t, "")
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- h.srv.Serve(ctx, ln) }()
	resp, err := http.Get("http://" + ln.Addr().String() + "/")
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("GET /: %s", resp.Status)
	}
	cancel()
	if err := <-done; err != nil {
		t.Fatalf("Serve after its context was done: %v", err)
	}
	if resp, err := http.Get("http://" + ln.Addr().String() + "/"); err == nil {
		resp.Body.Close()
		t.Fatalf("the listener still answers after Serve returned: %s", resp.Status)
	}
}
