package eventview

import (
	"testing"

	"github.com/flowrun/flowrun/runtime"
	"github.com/flowrun/flowrun/tokens"
)

func TestTokensEstimated(t *testing.T) {
	turn := func(estimated bool) runtime.Event {
		return runtime.Event{Type: runtime.EventModelTurn, Turn: &runtime.Turn{Usage: &tokens.Usage{Total: 10, Estimated: estimated}}}
	}
	started := runtime.Event{Type: runtime.EventNodeStarted}
	if TokensEstimated([]runtime.Event{started, turn(false)}) {
		t.Error("counted by the server, said estimated")
	}
	if !TokensEstimated([]runtime.Event{started, turn(false), turn(true)}) {
		t.Error("one turn counted locally, not said")
	}
}
