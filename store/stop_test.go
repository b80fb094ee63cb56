package store_test

import (
	"context"
	"strings"
	"testing"

	"github.com/flowrun/flowrun/runtime"
	"github.com/flowrun/flowrun/store"
)

// A stop asked for a running run is seen by whoever polls it, is cleared
// when the run is resumed, and is refused for a run that is not running.
func TestRequestStop(t *testing.T) {
	ctx := context.Background()
	s := open(t)
	newRun(t, s, "r")
	if reason, err := s.StopRequested(ctx, "r"); err != nil || reason != "" {
		t.Fatalf("a new run has a stop request %q (%v)", reason, err)
	}
	if err := s.RequestStop(ctx, "r", "stopped from the web UI"); err != nil {
		t.Fatal(err)
	}
	if reason, err := s.StopRequested(ctx, "r"); err != nil || reason != "stopped from the web UI" {
		t.Fatalf("stop request %q (%v), want the reason asked", reason, err)
	}
	if err := s.Finish(ctx, "r", store.Ending{Status: runtime.StatusStopped, Reason: "stopped from the web UI"}); err != nil {
		t.Fatal(err)
	}
	if err := s.RequestStop(ctx, "r", "again"); err == nil || !strings.Contains(err.Error(), "run r is stopped, not running") {
		t.Fatalf("a stop of a stopped run: %v", err)
	}
	if _, err := s.Claim(ctx, "r"); err != nil {
		t.Fatal(err)
	}
	if reason, err := s.StopRequested(ctx, "r"); err != nil || reason != "" {
		t.Fatalf("the resumed run still has the stop request %q (%v)", reason, err)
	}
	if err := s.RequestStop(ctx, "nope", "x"); err == nil || !strings.Contains(err.Error(), "no such run") {
		t.Fatalf("a stop of an unknown run: %v", err)
	}
}

// A request made while a run is running but not yet seen by its holder is
// gone once the run is claimed again: the resume is not stopped by it.
func TestRequestStopClearedByClaim(t *testing.T) {
	ctx := context.Background()
	s := open(t)
	newRun(t, s, "r")
	if err := s.RequestStop(ctx, "r", "stop"); err != nil {
		t.Fatal(err)
	}
	if _, err := s.Claim(ctx, "r"); err != nil {
		t.Fatal(err)
	}
	if reason, _ := s.StopRequested(ctx, "r"); reason != "" {
		t.Fatalf("claimed run still asked to stop: %q", reason)
	}
}
