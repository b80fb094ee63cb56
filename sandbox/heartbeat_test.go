package sandbox

import (
	"strings"
	"sync"
	"testing"
	"time"
)

// syncBuffer is a strings.Builder safe for the heartbeat's goroutine.
type syncBuffer struct {
	mu sync.Mutex
	b  strings.Builder
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

func TestHeartbeatNamesTheStepStillRunning(t *testing.T) {
	var out syncBuffer
	h := startHeartbeat(&out, 30*time.Millisecond)
	if _, err := h.Write([]byte("[python-build  33s] native build-python: make -j2 (next: WASI configure)\ncompiler noise ")); err != nil {
		t.Fatal(err)
	}
	want := "still running: native build-python: make -j2 (next: WASI configure) ("
	deadline := time.Now().Add(30 * time.Second)
	for !strings.Contains(out.String(), want) {
		if time.Now().After(deadline) {
			t.Fatalf("no heartbeat naming the step; output:\n%s", out.String())
		}
		time.Sleep(10 * time.Millisecond)
	}
	h.Close()
	got := out.String()
	if !strings.HasPrefix(got, "[python-build  33s] native build-python") || !strings.Contains(got, "compiler noise \n[python-build") {
		t.Errorf("the build's own output must pass through unchanged, got:\n%s", got)
	}
}
