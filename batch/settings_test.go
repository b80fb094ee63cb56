package batch

import (
	"context"
	"fmt"
	"strings"
	"testing"

	"github.com/flowrun/flowrun/batch/batchtest"
	"github.com/flowrun/flowrun/store"
)

// TestSettingsRoundTripAndOldRows: settings come back from the store with
// their types, whole numbers included; a row written by a flowrun that
// stored the options as an untyped map (the same keys) reads as the same
// settings; a row that does not decode is an error naming the batch.
func TestSettingsRoundTripAndOldRows(t *testing.T) {
	ctx := context.Background()
	st := batchtest.OpenStore(t)
	want := Settings{Concurrency: 2, MaxCostUSD: 5, MaxLoops: 3, Auto: true, Limit: 10, Sample: 4, Seed: 7, Filter: "item.x > 1",
		Map: map[string]string{"question": "q"}, Metrics: []string{"exact", "chars"}, Primary: "exact", Score: []string{"chars=len(outputs.a)"},
		Model: []string{"default=gpt-4.1"}, Replay: "/c.yaml", DatasetAbs: "/d.jsonl", NATS: "nats://h:4222"}
	b := &store.Batch{ID: "b-new"}
	if err := SetSettings(b, want); err != nil {
		t.Fatal(err)
	}
	old := &store.Batch{ID: "b-old", Settings: []byte(`{"auto":true,"concurrency":2,"dataset_abs":"/d.jsonl","filter":"item.x > 1","limit":10,` +
		`"map":{"question":"q"},"max_cost_usd":5,"max_loops":3,"metrics":["exact","chars"],"model":["default=gpt-4.1"],` +
		`"nats":"nats://h:4222","primary":"exact","replay":"/c.yaml","sample":4,"score":["chars=len(outputs.a)"],"seed":7}`)}
	bad := &store.Batch{ID: "b-bad", Settings: []byte(`{"concurrency": "eight"}`)}
	for _, b := range []*store.Batch{b, old, bad} {
		if err := st.CreateBatch(ctx, b, nil); err != nil {
			t.Fatal(err)
		}
	}
	for _, id := range []string{"b-new", "b-old"} {
		b, err := st.Batch(ctx, id)
		if err != nil {
			t.Fatal(err)
		}
		got, err := SettingsOf(b)
		if err != nil || fmt.Sprintf("%+v", got) != fmt.Sprintf("%+v", want) {
			t.Errorf("%s: settings\n got %+v, %v\nwant %+v", id, got, err, want)
		}
	}
	b, err := st.Batch(ctx, "b-bad")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := SettingsOf(b); err == nil || !strings.Contains(err.Error(), "batch b-bad: reading its settings") {
		t.Fatalf("settings that do not decode: %v", err)
	}
}
