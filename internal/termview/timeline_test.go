package termview

import (
	"strings"
	"testing"

	"github.com/flowrun/flowrun/redact"
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

// TestTimelineStreamsUnderItsNode: streamed text is shown only when the
// view streams, on a line of its own under its node's path, redacted, and
// an event's line ends it first.
func TestTimelineStreamsUnderItsNode(t *testing.T) {
	if (&Timeline{W: &strings.Builder{}}).OnDelta() != nil {
		t.Fatal("a view that does not stream receives text")
	}
	const key = "sk-timeline-test-abcdefghijklmnop"
	redact.Add(key)
	var b strings.Builder
	tl := &Timeline{W: &b, Stream: true}
	delta := tl.OnDelta()
	delta("write", "Hello, ")
	delta("write", "the key is "+key)
	tl.Event(runtime.Event{Type: runtime.EventNodeFinished, Run: "r1", Path: "write"})
	got := b.String()
	if !strings.HasPrefix(got, "\n  ... write: Hello, the key is ") || strings.Contains(got, key) {
		t.Fatalf("streamed text shown as %q", got)
	}
	lines := strings.Split(strings.TrimSuffix(got, "\n"), "\n")
	if last := lines[len(lines)-1]; !strings.Contains(last, "write") || strings.Contains(last, "Hello") {
		t.Errorf("the event's line %q shares the streamed text's line:\n%s", last, got)
	}
}
