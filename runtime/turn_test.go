package runtime_test

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/flowrun/flowrun/runtime"
	"github.com/flowrun/flowrun/tokens"
)

// TestTurnUsageStoredJSON checks that a model turn's usage reads back
// typed from an event as the store holds it (written when Usage was
// untyped) and writes the same JSON again, and that a turn that failed
// before an answer has no usage in JSON and zero Tokens.
func TestTurnUsageStoredJSON(t *testing.T) {
	const usage = `"usage":{"prompt":3,"completion":4,"reasoning":1,"total":7,"estimated":true}`
	stored := `{"type":"model_turn","run":"r1","time":"2026-11-26T12:00:00Z","path":"ask","turn":{"model":"m","attempt":1,"try":1,` + usage + `,"cost_usd":0.001,"latency_ms":5}}`
	var e runtime.Event
	if err := json.Unmarshal([]byte(stored), &e); err != nil {
		t.Fatal(err)
	}
	want := tokens.Usage{Prompt: 3, Completion: 4, Reasoning: 1, Total: 7, Estimated: true}
	if got := e.Turn.Tokens(); got != want {
		t.Fatalf("usage %+v, want %+v", got, want)
	}
	b, err := json.Marshal(e)
	if err != nil || !strings.Contains(string(b), usage) {
		t.Fatalf("written again: %s, %v", b, err)
	}
	failed := runtime.Turn{Model: "m", Error: "connection reset"}
	if b, _ := json.Marshal(failed); strings.Contains(string(b), "usage") || failed.Tokens() != (tokens.Usage{}) {
		t.Fatalf("a failed turn: %s, tokens %+v", b, failed.Tokens())
	}
}
