package store_test

import (
	"context"
	"encoding/json"
	"testing"
	"time"

	"github.com/flowrun/flowrun/internal/procstat"
	"github.com/flowrun/flowrun/runtime"
)

// BenchmarkRecorder measures the recorder's cost per node: a checkpoint and
// the node's two events (started, finished), committed at once (a node
// with external effects) or grouped (a pure node).
func BenchmarkRecorder(b *testing.B) {
	ctx := context.Background()
	output := map[string]any{"text": "fixed answer"}
	for _, c := range []struct {
		name   string
		pure   bool
		events int
	}{{"external", false, 2}, {"external-no-events", false, 0}, {"pure", true, 2}, {"pure-no-events", true, 0}} {
		b.Run(c.name, func(b *testing.B) {
			s := open(b)
			newRun(b, s, "20261122T000000-abcd1234")
			rec, err := s.Recorder(ctx, "20261122T000000-abcd1234")
			if err != nil {
				b.Fatal(err)
			}
			i := 0
			cpu0 := procstat.CPUTime()
			for b.Loop() {
				i++
				path := "steps[" + string(rune('a'+i%26)) + "]/llm"
				for range c.events {
					rec.Event(runtime.Event{Type: runtime.EventNodeFinished, Run: "20261122T000000-abcd1234", Time: time.Now(),
						Path: path, Node: "llm", Kind: "llm", DurationMS: 0.012, Output: output})
				}
				cp := &runtime.Checkpoint{Path: path, Output: output, State: map[string]any{"counter": i, "out": "fixed answer"}, Steps: int64(i), Pure: c.pure}
				if err := rec.Save(ctx, cp); err != nil {
					b.Fatal(err)
				}
			}
			if err := rec.Flush(ctx); err != nil {
				b.Fatal(err)
			}
			b.ReportMetric(float64((procstat.CPUTime()-cpu0).Microseconds())/float64(b.N), "cpu-us/op")
		})
	}
}

// BenchmarkEncodeEvent is the cost of encoding one node_finished event.
func BenchmarkEncodeEvent(b *testing.B) {
	e := runtime.Event{Type: runtime.EventNodeFinished, Run: "20261122T000000-abcd1234", Time: time.Now(),
		Path: "steps[12]/llm", Node: "llm", Kind: "llm", DurationMS: 0.012, Output: map[string]any{"text": "fixed answer"}}
	b.ReportAllocs()
	for b.Loop() {
		if _, err := json.Marshal(e); err != nil {
			b.Fatal(err)
		}
	}
}
