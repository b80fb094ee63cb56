// Package eventview describes each runtime event type once, as people
// read it: its tag, what acted, how it went, what went in and came out,
// the state it puts its node in and its part in a trace. The CLI's live
// timeline and flowrun show, the web run page, the batch report and the
// OpenTelemetry exporter all read events through Describe, so one event
// reads the same everywhere and a new event type is described in one
// place (a test fails while runtime.EventTypes has one without a
// description). An event type it does not know still gets a line of its
// own, never nothing.
package eventview

import (
	"encoding/json"
	"fmt"
	"strings"

	"github.com/flowrun/flowrun/errclass"
	"github.com/flowrun/flowrun/figures"
	"github.com/flowrun/flowrun/jsonvalue"
	"github.com/flowrun/flowrun/runtime"
)

// View is one event as people read it.
type View struct {
	Type string
	// Tag is the event's word in a timeline: run, start, ok, done, skip,
	// FAIL, retry, note, turn, tool, ..., code or ask (an unknown type's
	// tag is the type).
	Tag  string
	Run  string
	Path string
	// What names what acted: the node's kind, the model, the tool or the
	// code's language; "" for events with no such column.
	What string
	// Outcome is how it went, in a few words: "ok 1.2s", "120 tokens
	// $0.0010 0.8s", "timeout: ...".
	Outcome string
	// Why is the error or message behind a run's end, or the run a fork
	// started from, which Outcome leaves out.
	Why string
	// Error is the event's error as recorded, whole.
	Error string
	// Exchange is what went in and came out, for a reader who wants it
	// all: a model's reply, a tool's arguments and result, code's stdout.
	Exchange string
	// Failed: the event is a failure (of a node, a turn, a tool, code or
	// the run). Waiting: a question waits for an answer.
	Failed, Waiting bool
	// NodeState is the state the event puts its node in, "" for none.
	NodeState NodeState
	// Verbose: a step the CLI's line-per-event view leaves out, because
	// the event that ends it says as much (a node's start).
	Verbose    bool
	DurationMS float64
	CostUSD    float64
	Tokens     int
	Class      errclass.Class
	// Trace is the event's part in a trace, Span the name of the node's,
	// model turn's, tool call's or sandbox run's span.
	Trace Trace
	Span  string

	// whatColumn: the CLI line has a column for What, even when empty.
	whatColumn bool
}

// NodeState is where a node stands after an event, as a run's graph
// shows it.
type NodeState string

// Node states.
const (
	// NodePending: no event has touched the node yet (or a stop cut it
	// short: it runs again on resume).
	NodePending NodeState = "pending"
	NodeRunning NodeState = "running"
	NodeDone    NodeState = "done"
	NodeFailed  NodeState = "failed"
	NodeSkipped NodeState = "skipped"
	NodeWaiting NodeState = "waiting"
)

// Trace is an event's part in a trace.
type Trace int

// Trace parts.
const (
	TraceNone      Trace = iota // no span: a note on the run
	TraceRunStart               // starts the run's span
	TraceRunEnd                 // ends the run's span and any node's still open
	TraceNodeStart              // starts a node's span
	TraceNodeEnd                // ends a node's span
	TraceNodeMark               // an event on the node's span (a retry)
	TraceChild                  // a span of its own inside its node's, ending at the event
)

// describe fills in what is particular to one event type.
type describe func(e runtime.Event, v *View)

// descriptions holds one description per event type.
var descriptions = map[string]describe{
	runtime.EventRunStarted: func(e runtime.Event, v *View) {
		v.Tag, v.What, v.Outcome = "run", "started", e.Pipeline
		var why []string
		if e.ForkOf != "" {
			why = append(why, "forked from "+e.ForkOf)
		}
		for _, ed := range e.Edits {
			why = append(why, "edited "+EditString(ed))
		}
		v.Why = strings.Join(why, "; ")
		v.Trace = TraceRunStart
	},
	runtime.EventRunFinished: func(e runtime.Event, v *View) {
		v.Tag, v.Outcome, v.Failed = "run", string(e.Status), e.Status == runtime.StatusFailed
		v.Why = e.Error
		if v.Why == "" {
			v.Why = e.Message
		}
		v.Trace = TraceRunEnd
	},
	runtime.EventNodeStarted: func(e runtime.Event, v *View) {
		v.Tag, v.What, v.Verbose, v.NodeState = "start", e.Kind, true, NodeRunning
		v.Trace, v.Span = TraceNodeStart, "node "+e.Path
	},
	runtime.EventNodeFinished: func(e runtime.Event, v *View) {
		v.Tag, v.What, v.Outcome, v.NodeState, v.whatColumn = "ok", e.Kind, figures.Duration(e.DurationMS), NodeDone, true
		v.Trace, v.Span = TraceNodeEnd, "node "+e.Path
	},
	runtime.EventNodeRestored: func(e runtime.Event, v *View) {
		v.Tag, v.What, v.Outcome, v.NodeState, v.whatColumn = "done", e.Kind, "restored from its checkpoint", NodeDone, true
		v.Trace, v.Span = TraceNodeEnd, "node "+e.Path
	},
	runtime.EventNodeSkipped: func(e runtime.Event, v *View) {
		v.Tag, v.What, v.Outcome, v.NodeState, v.whatColumn = "skip", e.Kind, "when was false", NodeSkipped, true
		v.Trace, v.Span = TraceNodeEnd, "node "+e.Path
	},
	runtime.EventNodeFailed: func(e runtime.Event, v *View) {
		v.Tag, v.What, v.Failed, v.NodeState, v.whatColumn = "FAIL", e.Kind, true, NodeFailed, true
		v.Outcome = fmt.Sprintf("%s: %s %s", e.Class, e.Error, e.Message)
		v.Trace, v.Span = TraceNodeEnd, "node "+e.Path
	},
	runtime.EventNodeRetry: func(e runtime.Event, v *View) {
		v.Tag, v.NodeState, v.Trace = "retry", NodeRunning, TraceNodeMark
		v.Outcome = fmt.Sprintf("attempt %d in %s after %s: %s", e.Attempt, figures.Duration(e.DurationMS), e.Class, e.Error)
		// The pause before the attempt, not work done.
		v.DurationMS = 0
	},
	runtime.EventLoopExhausted:  note,
	runtime.EventMapItemSkipped: note,
	runtime.EventModelTurn: func(e runtime.Event, v *View) {
		v.Tag, v.NodeState, v.whatColumn = "turn", NodeRunning, true
		tu := e.Turn
		if tu == nil {
			return
		}
		v.What, v.DurationMS, v.CostUSD, v.Tokens, v.Class, v.Error = tu.Model, tu.LatencyMS, tu.CostUSD, tu.Tokens().Total, tu.Class, tu.Error
		v.Trace, v.Span = TraceChild, "chat "+tu.Model
		switch {
		case tu.Error != "":
			retry := ""
			if tu.WaitMS > 0 {
				retry = fmt.Sprintf(" (retry in %s)", figures.Duration(tu.WaitMS))
			}
			v.Outcome, v.Failed = fmt.Sprintf("try %d: %s: %s%s", tu.Try, tu.Class, tu.Error, retry), true
		case tu.Cached:
			v.Outcome = "cached $0"
		default:
			v.Outcome = fmt.Sprintf("%s %s %s", tokenText(tu), figures.USD(tu.CostUSD), figures.Duration(tu.LatencyMS))
		}
		v.Exchange = replyText(tu.Reply)
	},
	runtime.EventToolCall: func(e runtime.Event, v *View) {
		v.Tag, v.NodeState, v.whatColumn = "tool", NodeRunning, true
		if e.Tool == nil {
			return
		}
		v.What, v.Outcome, v.Error = e.Tool.Name, "ok", e.Tool.Error
		v.Trace, v.Span = TraceChild, "execute_tool "+e.Tool.Name
		if e.Tool.Error != "" {
			v.Outcome, v.Failed = "error: "+e.Tool.Error, true
		}
		args, _ := jsonvalue.Marshal(e.Tool.Args)
		result, _ := jsonvalue.Marshal(e.Tool.Result)
		v.Exchange = "args: " + string(args) + "\nresult: " + string(result)
	},
	runtime.EventToolProgress: func(e runtime.Event, v *View) {
		v.Tag, v.Outcome, v.whatColumn = "...", firstLine(e.Message), true
		if e.Tool != nil {
			v.What = e.Tool.Name
		}
	},
	runtime.EventRemoteWork: func(e runtime.Event, v *View) {
		v.Tag, v.whatColumn = "bg", true
		r := e.Remote
		if r == nil {
			return
		}
		// Polls are counted, not shown: a long call polls hundreds of times.
		v.What, v.Verbose = r.ID, r.What == "polled"
		if !v.Verbose {
			v.Trace = TraceNodeMark
		}
		v.Outcome = strings.TrimSpace(r.What + " " + r.Status)
		switch {
		case r.Error != "":
			v.Outcome += " (the cancel request failed: " + firstLine(r.Error) + ")"
		case r.Polls > 0:
			v.Outcome += fmt.Sprintf(" after %d polls", r.Polls)
		}
	},
	runtime.EventSandboxRun: func(e runtime.Event, v *View) {
		v.Tag, v.What, v.NodeState, v.whatColumn = "code", e.Kind, NodeRunning, true
		v.Trace, v.Span = TraceChild, "sandbox "+e.Kind
		status := "ok"
		if e.Class != "" {
			status, v.Failed = string(e.Class)+": "+firstLine(e.Error), true
		}
		v.Outcome = status + " " + figures.Duration(e.DurationMS)
		if out, ok := e.Output.(map[string]any); ok {
			v.Exchange = fmt.Sprint(out["stdout"])
		}
	},
	runtime.EventQuestion: func(e runtime.Event, v *View) {
		v.Tag, v.NodeState = "ask", NodeRunning
		answer := "waiting for an answer"
		if e.Status != "" {
			v.Waiting, v.NodeState = true, NodeWaiting
		} else {
			b, _ := jsonvalue.Marshal(e.Output)
			answer = "answered " + string(b)
		}
		v.Outcome = fmt.Sprintf("%q: %s", e.Message, answer)
	},
}

func note(e runtime.Event, v *View) {
	v.Tag, v.Outcome = "note", e.Message+" "+e.Error
}

// Described reports whether an event type has a description of its own.
func Described(eventType string) bool { return descriptions[eventType] != nil }

// Describe is how event e reads. An event of a type with no description
// is shown by its type, message and error.
func Describe(e runtime.Event) View {
	v := View{Type: e.Type, Run: e.Run, Path: e.Path, DurationMS: e.DurationMS, CostUSD: e.CostUSD,
		Tokens: int(e.Tokens), Class: e.Class, Error: e.Error}
	d := descriptions[e.Type]
	if d == nil {
		v.Tag, v.Outcome, v.Failed = e.Type, strings.TrimSpace(e.Message+" "+e.Error), e.Error != ""
		return v
	}
	d(e, &v)
	return v
}

// Line is the event's line of text in the CLI's timeline (flowrun run on
// stderr, flowrun show); "" for a verbose event.
func (v View) Line() string {
	switch {
	case v.Verbose:
		return ""
	case v.Tag == "run":
		return fmt.Sprintf("run %s: %s", v.Run, v.Outcome)
	case v.whatColumn:
		return fmt.Sprintf("  %-5s %-40s %-8s %s", v.Tag, v.Path, v.What, v.Outcome)
	}
	return fmt.Sprintf("  %-5s %-40s %s", v.Tag, v.Path, v.Outcome)
}

// Text is the event in one line without its tag and path, as the web
// timeline shows it: what acted, how it went, and why.
func (v View) Text() string {
	text := strings.TrimSpace(v.What + " " + v.Outcome)
	switch {
	case v.Why == "":
	case strings.HasPrefix(v.Why, text):
		// "waiting for an answer to ...": said once, not "waiting: waiting".
		text = v.Why
	default:
		text += ": " + v.Why
	}
	return text
}

func firstLine(s string) string {
	line, _, _ := strings.Cut(s, "\n")
	return line
}

func tokenText(tu *runtime.Turn) string {
	u := tu.Tokens()
	if u.Estimated {
		return fmt.Sprintf("~%d tokens (estimated)", u.Total)
	}
	return fmt.Sprintf("%d tokens", u.Total)
}

// replyText is what a model answered: its text and any tool calls.
func replyText(reply any) string {
	var r struct {
		Text      string `json:"text"`
		ToolCalls []struct {
			Name      string `json:"name"`
			Arguments string `json:"arguments"`
		} `json:"tool_calls"`
	}
	if b, err := jsonvalue.Marshal(reply); err == nil {
		_ = json.Unmarshal(b, &r)
	}
	out := r.Text
	for _, c := range r.ToolCalls {
		out += fmt.Sprintf("\n-> %s(%s)", c.Name, c.Arguments)
	}
	return strings.TrimLeft(out, "\n")
}
