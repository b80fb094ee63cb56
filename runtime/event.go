package runtime

import (
	"sync"
	"time"

	"github.com/flowrun/flowrun/errclass"
)

// Event types.
const (
	EventRunStarted     = "run_started"
	EventNodeStarted    = "node_started"
	EventNodeFinished   = "node_finished"
	EventNodeSkipped    = "node_skipped"
	EventNodeRestored   = "node_restored" // finished in an earlier attempt; restored from its checkpoint
	EventNodeFailed     = "node_failed"
	EventNodeRetry      = "node_retry"
	EventLoopExhausted  = "loop_exhausted"
	EventRunFinished    = "run_finished"
	EventMapItemSkipped = "map_item_skipped"
	EventModelTurn      = "model_turn"
	EventToolCall       = "tool_call"
	EventSandboxRun     = "sandbox_run" // code run in the sandbox; Output is its result
	EventQuestion       = "question"    // asked of a person; Output is the answer, or Status is waiting
	// EventToolProgress is a progress or log notification an MCP server
	// sent during a call: Tool names the tool, Message is the text, Output
	// holds progress and total, or the log level.
	EventToolProgress = "tool_progress"
	// EventRemoteWork is the progress of work a node runs elsewhere and
	// waits for (a background model response): Remote says what happened.
	EventRemoteWork = "remote_work"
)

// EventTypes lists every event type a run records, so that whatever
// describes events (package eventview) can be checked to describe each.
func EventTypes() []string {
	return []string{EventRunStarted, EventNodeStarted, EventNodeFinished, EventNodeSkipped, EventNodeRestored,
		EventNodeFailed, EventNodeRetry, EventLoopExhausted, EventRunFinished, EventMapItemSkipped,
		EventModelTurn, EventToolCall, EventSandboxRun, EventQuestion, EventToolProgress, EventRemoteWork}
}

// RemoteWork is the progress of work a node runs elsewhere, such as a
// model response running in the background on the server.
type RemoteWork struct {
	// What is created, attached (a resumed node found it in flight),
	// polled, completed (it ended, whatever its status) or cancelled.
	What   string `json:"what"`
	ID     string `json:"id"`
	Status string `json:"status,omitempty"`
	Polls  int    `json:"polls,omitempty"`
	// Error, on cancelled, is why the cancel request failed.
	Error string `json:"error,omitempty"`
}

// Event is one thing that happened in a run. Path addresses the node within
// loops, maps, parallel branches and calls: "refine[2]/route".
type Event struct {
	Type       string         `json:"type"`
	Run        string         `json:"run"`
	Time       time.Time      `json:"time"`
	Pipeline   string         `json:"pipeline,omitempty"`
	Path       string         `json:"path,omitempty"`
	Node       string         `json:"node,omitempty"`
	Kind       string         `json:"kind,omitempty"`
	Attempt    int            `json:"attempt,omitempty"`
	DurationMS float64        `json:"duration_ms,omitempty"`
	Output     any            `json:"output,omitempty"`
	Error      string         `json:"error,omitempty"`
	Class      errclass.Class `json:"class,omitempty"`
	Message    string         `json:"message,omitempty"`
	// Detail, on node_failed, is what only a developer needs: the stack
	// of a panic.
	Detail  string         `json:"detail,omitempty"`
	Status  Status         `json:"status,omitempty"`
	Outputs map[string]any `json:"outputs,omitempty"`
	Turn    *Turn          `json:"turn,omitempty"`
	Tool    *ToolCall      `json:"tool,omitempty"`
	Remote  *RemoteWork    `json:"remote,omitempty"`
	CostUSD float64        `json:"cost_usd,omitempty"`
	Tokens  int64          `json:"tokens,omitempty"`
	// ForkOf, on run_started, is the run this one was forked from.
	ForkOf string `json:"fork_of,omitempty"`
	// Edits, on run_started, are the values a person changed before the
	// run (a fork, or a resume of a run waiting on a question) went on.
	Edits []Edit `json:"edits,omitempty"`
	// Restored, on run_started, is the last checkpoint the run went on
	// from (0: it started from the beginning), so that what ran before
	// can be told from what runs now.
	Restored int64 `json:"restored,omitempty"`
}

// Edit is a value a person set before a fork or a resume: a state
// variable ("state.NAME") at the checkpoint the run continues from, or
// an input ("inputs.NAME") of a fork. Old is the value it replaced.
type Edit struct {
	Key string `json:"key"`
	Old any    `json:"old"`
	New any    `json:"new"`
}

// EventSink receives a run's events in order. The runtime never calls it
// from two goroutines at once.
type EventSink interface {
	Event(Event)
}

// lockedSink serialises events from concurrent map items and branches.
type lockedSink struct {
	mu   sync.Mutex
	sink EventSink
}

func (l *lockedSink) emit(e Event) {
	if l.sink == nil {
		return
	}
	if e.Time.IsZero() {
		e.Time = time.Now()
	}
	l.mu.Lock()
	l.sink.Event(e)
	l.mu.Unlock()
}
