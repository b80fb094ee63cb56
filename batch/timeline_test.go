package batch

import (
	"strings"
	"testing"

	"github.com/flowrun/flowrun/runtime"
)

// TestReportTimelineKeepsUnknownEventType checks that a run's timeline in
// the report lists an event of a type it has no description for, by its
// type and message, instead of dropping it.
func TestReportTimelineKeepsUnknownEventType(t *testing.T) {
	en := timelineEntry(runtime.Event{Type: "budget_warning", Run: "r1", Path: "ask_model", Message: "80% of max_cost_usd spent"})
	if en.Kind != "budget_warning" || en.Path != "ask_model" || !strings.Contains(en.Outcome, "80% of max_cost_usd spent") {
		t.Fatalf("entry %+v", en)
	}
}
