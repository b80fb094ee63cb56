package store_test

import (
	"context"
	"encoding/json"
	"path/filepath"
	"testing"

	"github.com/flowrun/flowrun/runtime"
	"github.com/flowrun/flowrun/store"
)

// An in-flight record comes back from ListCheckpoints, with its value,
// both from the journal and once moved into the database.
func TestListCheckpointsShowsInFlight(t *testing.T) {
	ctx := context.Background()
	s, rec := recordRun(t)
	value := json.RawMessage(`{"id":"resp_1","status":"queued"}`)
	for _, cp := range []*runtime.Checkpoint{
		{Path: "a"},
		{Path: "b" + runtime.InFlightSuffix, InFlight: &runtime.InFlight{Key: "b#call 1", Value: value}},
	} {
		if err := rec.Save(ctx, cp); err != nil {
			t.Fatal(err)
		}
	}
	check := func(when string) {
		t.Helper()
		cps, err := s.ListCheckpoints(ctx, "r")
		if err != nil {
			t.Fatal(err)
		}
		if len(cps) != 2 || cps[0].InFlight != nil || cps[1].InFlight == nil || string(cps[1].InFlight.Value) != string(value) {
			t.Fatalf("%s: %+v", when, cps)
		}
	}
	check("journaled")
	if err := rec.Flush(ctx); err != nil {
		t.Fatal(err)
	}
	check("in the database")
}

// ListCheckpointsWithData lists what ListCheckpoints lists, journaled
// checkpoints included, each with its data.
func TestListCheckpointsWithData(t *testing.T) {
	ctx := context.Background()
	s, rec := recordRun(t)
	for i, path := range []string{"a", "b", "c"} {
		if err := rec.Save(ctx, &runtime.Checkpoint{Path: path, State: map[string]any{path: i}}); err != nil {
			t.Fatal(err)
		}
		if path == "b" {
			if err := rec.Flush(ctx); err != nil {
				t.Fatal(err)
			}
		}
	}
	listed, err := s.ListCheckpoints(ctx, "r")
	if err != nil {
		t.Fatal(err)
	}
	infos, points, err := s.ListCheckpointsWithData(ctx, "r")
	if err != nil {
		t.Fatal(err)
	}
	if len(infos) != 3 || len(points) != 3 || len(listed) != 3 {
		t.Fatalf("%d infos, %d points, %d listed: want 3 of each", len(infos), len(points), len(listed))
	}
	for i, p := range points {
		if infos[i] != listed[i] || p.Seq != infos[i].Seq || p.Path != infos[i].Path || p.State[p.Path] != i {
			t.Errorf("checkpoint %d: info %+v, listed %+v, data %+v", i, infos[i], listed[i], p)
		}
	}
}

// recordRun is a store with run "r" and its recorder.
func recordRun(t *testing.T) (*store.Store, *store.Recorder) {
	t.Helper()
	s, err := store.Open(filepath.Join(t.TempDir(), "runs.db"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	newRun(t, s, "r")
	rec, err := s.Recorder(context.Background(), "r")
	if err != nil {
		t.Fatal(err)
	}
	return s, rec
}
