package eventview

import (
	"reflect"
	"testing"
	"time"

	"github.com/flowrun/flowrun/runtime"
	"github.com/flowrun/flowrun/store"
)

// TestInFlight: a background call recorded in flight reads as in
// progress for as long as it has run, with the polls the events count;
// one whose node finished or that the server completed is not listed.
func TestInFlight(t *testing.T) {
	now := time.Date(2026, 11, 26, 12, 4, 0, 0, time.UTC)
	record := func(path, id, status string) store.CheckpointInfo {
		return store.CheckpointInfo{Path: path + runtime.InFlightSuffix, Created: now.Add(-4 * time.Minute),
			InFlight: &runtime.InFlight{Key: "response", Value: []byte(`{"id":"` + id + `","status":"` + status + `"}`)}}
	}
	cps := []store.CheckpointInfo{record("plan", "resp_1", "queued"), record("write", "resp_2", "queued"), {Path: "write"},
		record("check", "resp_3", "queued")}
	var events []runtime.Event
	for range 12 {
		events = append(events, runtime.Event{Type: runtime.EventRemoteWork, Path: "plan", Remote: &runtime.RemoteWork{What: "polled", ID: "resp_1", Status: "in_progress"}})
	}
	events = append(events, runtime.Event{Type: runtime.EventRemoteWork, Path: "check", Remote: &runtime.RemoteWork{What: "completed", ID: "resp_3", Status: "completed"}})
	want := []string{"plan: response resp_1 in progress, 4m0s, polled 12 times"}
	if got := InFlight(events, cps, now); !reflect.DeepEqual(got, want) {
		t.Fatalf("in flight %q, want %q", got, want)
	}
	// A live run, whose journal a reader leaves alone: its events alone.
	live := append([]runtime.Event{{Type: runtime.EventRemoteWork, Path: "plan", Time: now.Add(-time.Minute),
		Remote: &runtime.RemoteWork{What: "created", ID: "resp_1", Status: "queued"}}}, events[:1]...)
	want = []string{"plan: response resp_1 in progress, 1m0s, polled once"}
	if got := InFlight(live, nil, now); !reflect.DeepEqual(got, want) {
		t.Fatalf("in flight from events %q, want %q", got, want)
	}
	live = append(live, runtime.Event{Type: runtime.EventNodeFinished, Path: "plan"})
	if got := InFlight(live, nil, now); len(got) != 0 {
		t.Fatalf("a finished node's call is still in flight: %q", got)
	}
}
