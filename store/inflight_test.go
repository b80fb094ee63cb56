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
	s, err := store.Open(filepath.Join(t.TempDir(), "runs.db"))
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	newRun(t, s, "r")
	rec, err := s.Recorder(ctx, "r")
	if err != nil {
		t.Fatal(err)
	}
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
