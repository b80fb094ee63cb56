package termview

import (
	"strings"
	"testing"

	"github.com/flowrun/flowrun/runtime"
)

// TestTimelineShowsUnknownEventType checks that the timeline gives
// an event of a type it has no description for a line of its own (its
// type, path and message) instead of dropping it.
func TestTimelineShowsUnknownEventType(t *testing.T) {
	var b strings.Builder
	sink := &Timeline{W: &b, Exchange: true}
	sink.Event(runtime.Event{Type: "budget_warning", Run: "r1", Path: "ask_model", Message: "80% of max_cost_usd spent"})
	if got := b.String(); !strings.Contains(got, "budget_warning") || !strings.Contains(got, "ask_model") || !strings.Contains(got, "80% of max_cost_usd spent") {
		t.Fatalf("timeline %q", got)
	}
}
