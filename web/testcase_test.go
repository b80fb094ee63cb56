package web

import (
	"context"
	"net/url"
	"strings"
	"testing"

	"github.com/flowrun/flowrun/store"
)

// TestMakeThisATestOfAFailingBatchItem: the case made from a batch item's
// run expects what the item's dataset row expected of the output the
// batch compared with it, not what the run gave, and says so in the file.
func TestMakeThisATestOfAFailingBatchItem(t *testing.T) {
	h := newHarness(t, "")
	id := h.start(url.Values{"pipeline": {"counter.yaml"}, "auto": {"on"}, "max_loops": {"2"}})
	run := h.await(id, "completed")
	ctx := context.Background()
	b := &store.Batch{ID: "b20261203T100000-aaaa", Pipeline: run.PipelineAbs, PipelineName: "counter", Dataset: "counts.jsonl",
		Settings: []byte(`{"metrics": ["exact"], "primary": "exact", "expected": ["want"], "expects": {"exact": [{"output": "n", "item": "want"}]}}`)}
	if err := h.st.CreateBatch(ctx, b, []*store.BatchItem{{Index: 0, Key: "row 1", Item: map[string]any{"want": 7}}}); err != nil {
		t.Fatal(err)
	}
	if err := h.st.StartItem(ctx, b.ID, 0, 0, id); err != nil {
		t.Fatal(err)
	}
	code, body := h.get("/runs/" + id + "/test.yaml")
	if code != 200 {
		t.Fatalf("%d\n%s", code, body)
	}
	for _, want := range []string{"# outputs.n: what batch b20261203T100000-aaaa, item row 1 expected; the run gave ",
		"    expect:\n      outputs:\n        \"n\": 7\n"} {
		if !strings.Contains(body, want) {
			t.Errorf("no %q in the case:\n%s", want, body)
		}
	}

	// A metric that compares no output with a field as outputs.X == item.Y:
	// the case keeps what the run gave and says what the row expected.
	other := h.start(url.Values{"pipeline": {"counter.yaml"}, "auto": {"on"}, "max_loops": {"2"}})
	h.await(other, "completed")
	b = &store.Batch{ID: "b20261203T110000-bbbb", Pipeline: run.PipelineAbs, PipelineName: "counter", Dataset: "counts.jsonl",
		Settings: []byte(`{"metrics": ["close"], "primary": "close", "expected": ["want"]}`)}
	if err := h.st.CreateBatch(ctx, b, []*store.BatchItem{{Index: 0, Key: "row 1", Item: map[string]any{"want": 7}}}); err != nil {
		t.Fatal(err)
	}
	if err := h.st.StartItem(ctx, b.ID, 0, 0, other); err != nil {
		t.Fatal(err)
	}
	_, body = h.get("/runs/" + other + "/test.yaml")
	for _, want := range []string{"# batch b20261203T110000-bbbb, item row 1 expected:\n    #   want: 7\n",
		"# its metrics compare no output with a dataset field as outputs.X == item.Y, so the outputs below are what the run gave",
		"    expect:\n      outputs:\n        \"n\": 2\n"} {
		if !strings.Contains(body, want) {
			t.Errorf("no %q in the case:\n%s", want, body)
		}
	}
}
