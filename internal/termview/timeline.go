package termview

import (
	"fmt"
	"io"
	"strings"
	"sync"

	"github.com/flowrun/flowrun/eventview"
	"github.com/flowrun/flowrun/jsonvalue"
	"github.com/flowrun/flowrun/redact"
	"github.com/flowrun/flowrun/runtime"
)

// Timeline is a runtime.EventSink that prints one plain line per event,
// for people, as eventview.Describe words it. Concurrent nodes may call
// it from their goroutines: an event's line first ends the line of
// streamed text being shown, so that the two never share a line.
type Timeline struct {
	W        io.Writer
	Stream   bool // show streamed model text (a terminal)
	Exchange bool // show each turn's reply and each tool's result (flowrun show)

	mu        sync.Mutex
	streaming string        // path whose text is being shown
	redacted  redact.Stream // of that text
}

// OnDelta is what receives streamed model text: nil when the view does
// not show it, so that stream: auto sends plain requests.
func (t *Timeline) OnDelta() func(path, text string) {
	if !t.Stream {
		return nil
	}
	return t.delta
}

// delta shows streamed model text under the node it belongs to.
func (t *Timeline) delta(path, text string) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.streaming != path {
		t.endStream()
		fmt.Fprintf(t.W, "\n  ... %s: ", path)
		t.streaming = path
	}
	fmt.Fprint(t.W, t.redacted.Next(text))
}

// endStream ends the line of streamed text, if one is being shown.
func (t *Timeline) endStream() {
	if t.streaming != "" {
		fmt.Fprintln(t.W, t.redacted.End())
		t.streaming = ""
	}
}

// Event prints e's line, and with Exchange what the model or tool said.
func (t *Timeline) Event(e runtime.Event) {
	t.mu.Lock()
	t.endStream()
	t.mu.Unlock()
	v := eventview.Describe(e)
	if line := v.Line(); line != "" {
		fmt.Fprintln(t.W, line)
	}
	if t.Exchange {
		t.indent(v.Exchange)
	}
}

// indent prints text under an event line, indented.
func (t *Timeline) indent(text string) {
	if strings.TrimSpace(text) == "" {
		return
	}
	for _, line := range strings.Split(strings.TrimRight(text, "\n"), "\n") {
		fmt.Fprintf(t.W, "        | %s\n", line)
	}
}

// JSONEvents is a runtime.EventSink that prints one JSON event per line,
// for programs (see JSON).
type JSONEvents struct{ W io.Writer }

// Event prints e as one line of JSON; an event that does not encode is
// left out rather than printed half.
func (j JSONEvents) Event(e runtime.Event) {
	b, err := jsonvalue.Marshal(e)
	if err != nil {
		return
	}
	_, _ = j.W.Write(append(JSON(b), '\n'))
}
