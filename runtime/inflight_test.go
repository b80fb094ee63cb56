package runtime

import (
	"context"
	"encoding/json"
	"testing"
)

type savedCheckpoints []*Checkpoint

func (s *savedCheckpoints) Save(_ context.Context, cp *Checkpoint) error {
	*s = append(*s, cp)
	return nil
}

// An in-flight record is saved durably with the run's totals, is given
// back after a restore, and never passes for its node's checkpoint.
func TestInFlightRecordsRestore(t *testing.T) {
	var saved savedCheckpoints
	j := newJournal(&saved, []*Checkpoint{{Seq: 1, Path: "a", Steps: 1, CostUSD: 0.5}})
	rec := &Checkpoint{Path: "b" + InFlightSuffix, InFlight: &InFlight{Key: "b#call 1", Value: json.RawMessage(`{"id":"resp_1"}`)}, CostUSD: 0.5}
	if err := j.commit(context.Background(), rec, 0); err != nil {
		t.Fatal(err)
	}
	if len(saved) != 1 || saved[0].Seq != 2 || saved[0].Steps != 1 || saved[0].Pure {
		t.Fatalf("saved %+v, want seq 2 with the run's step count, not pure", saved)
	}
	if v, ok := j.inFlightRecord("b#call 1"); !ok || string(v) != `{"id":"resp_1"}` {
		t.Errorf("in the same run: %s %v", v, ok)
	}

	restored := newJournal(nil, []*Checkpoint{{Seq: 1, Path: "a", Steps: 1}, saved[0]})
	if v, ok := restored.inFlightRecord("b#call 1"); !ok || string(v) != `{"id":"resp_1"}` {
		t.Errorf("after a restore: %s %v", v, ok)
	}
	if restored.lookup("b") != nil || restored.lookup("b"+InFlightSuffix) != nil {
		t.Error("an in-flight record restored as a finished node")
	}
	if restored.seq != 2 {
		t.Errorf("seq %d, want 2", restored.seq)
	}
}
