package llm

import (
	"time"

	"github.com/flowrun/flowrun/budget"
	"github.com/flowrun/flowrun/errclass"
	"github.com/flowrun/flowrun/llmconf"
	"github.com/flowrun/flowrun/tokens"
)

// Roles of a Message.
const (
	RoleSystem    = "system"
	RoleUser      = "user"
	RoleAssistant = "assistant"
	RoleTool      = "tool"
)

// Message is one turn of a conversation. Memories are lists of Messages,
// so the type is plain data that survives a JSON round trip (checkpoints).
type Message struct {
	Role string `json:"role" yaml:"role"`
	Text string `json:"text,omitempty" yaml:"text,omitempty"`
	// Images are http(s) URLs or data URLs (see ImageURL), sent after Text.
	// Only user messages carry images.
	Images []string `json:"images,omitempty" yaml:"images,omitempty"`
	// ToolCalls are the calls an assistant turn made.
	ToolCalls []ToolCall `json:"tool_calls,omitempty" yaml:"tool_calls,omitempty"`
	// ToolCallID is the call a tool message answers.
	ToolCallID string `json:"tool_call_id,omitempty" yaml:"tool_call_id,omitempty"`
}

// ToolCall is a function call the model asked for.
type ToolCall struct {
	ID   string `json:"id" yaml:"id"`
	Name string `json:"name" yaml:"name"`
	// Arguments is the JSON text the model wrote, verbatim.
	Arguments string `json:"arguments" yaml:"arguments"`
	// Args is Arguments parsed (numbers normalised as in jsonvalue.Decode), or
	// nil when ArgsError is set: the text was truncated or not JSON.
	Args      any    `json:"args,omitempty" yaml:"-"`
	ArgsError string `json:"args_error,omitempty" yaml:"-"`
}

// ToolSpec is a function tool offered to the model.
type ToolSpec struct {
	Name        string         `json:"name" yaml:"name"`
	Description string         `json:"description,omitempty" yaml:"description,omitempty"`
	Parameters  map[string]any `json:"parameters,omitempty" yaml:"parameters,omitempty"`
	// Strict asks the server to enforce Parameters exactly (OpenAI strict
	// function calling); the schema must then meet OpenAI's strict rules.
	Strict bool `json:"strict,omitempty" yaml:"strict,omitempty"`
}

// ToolChoice constrains the model's use of tools. The zero value lets the
// model decide.
type ToolChoice struct {
	// Mode is "" or "auto", "none" or "required".
	Mode string `json:"mode,omitempty" yaml:"mode,omitempty"`
	// Tools, when set, is the set the model must call one of (an agent's
	// finish tools on its last step). One name is sent as a named function
	// choice; several as allowed_tools with mode required.
	Tools []string `json:"tools,omitempty" yaml:"tools,omitempty"`
}

// Key addresses a model call for cassettes: the node path (unique among
// calls that run at the same time, e.g. including a map item's index),
// the innermost loop iteration and the node attempt, both 1-based.
type Key struct {
	Node      string `json:"node" yaml:"node"`
	Iteration int    `json:"iteration" yaml:"iteration"`
	Attempt   int    `json:"attempt" yaml:"attempt"`
}

// Request is one model call.
type Request struct {
	Key   Key
	Model *llmconf.Model
	// Per-node overrides of the model config; nil / 0 keep the model's.
	Temperature *float64
	MaxTokens   int

	Messages   []Message
	Tools      []ToolSpec
	ToolChoice ToolChoice

	// OutputSchema, when set, is sent as a strict JSON-schema response
	// format and a reply without tool calls is validated against it. Object
	// schemas that do not say otherwise get additionalProperties: false,
	// as strict mode requires; the rest of OpenAI's strict rules (every
	// property required) are the schema author's to meet.
	OutputSchema map[string]any
	// SchemaName names the schema on the wire ([A-Za-z0-9_-], at most 64);
	// default "output".
	SchemaName string
	// Retry, when set, replaces the model's retry policy for this call: the
	// calling node's retry: block. The client is the only layer that
	// retries a model call's recoverable errors; the errors it returns say
	// so (RetriesSpent), so that the node is not run again for them.
	Retry *NodeRetry

	// Cache is the node's cache: setting (CacheOff, CacheOn, CacheAlways),
	// "" to keep the model's; see Options.Cache.
	Cache string

	// RepairRetries is how many times an invalid structured reply is sent
	// back with its validation errors before failing with invalid_output.
	RepairRetries int

	// Timeout is the calling node's timeout, 0 for none; with the model's
	// stream: auto a timeout shorter than ExpectedReply streams the call.
	Timeout time.Duration

	// OnDelta, when set, receives the reply's text as it streams (on
	// replay or a plain request, the whole text at once). The Response is
	// the same as without it. A stream that fails and is retried starts its deltas over, and
	// each repair turn streams its own.
	OnDelta func(text string)
	// InFlight, for a model with background: true, keeps the response
	// ids the call creates, so that a call made again re-attaches to them;
	// nil keeps none. OnBackground, when set, is told what happens to
	// each background response.
	InFlight     InFlight
	OnBackground func(BackgroundEvent)
	// Observe, when set, is told about every HTTP exchange the call makes:
	// each retry and each repair turn.
	Observe func(Exchange)

	// Ledger, when set, is the cost cap the call is made under: each try
	// reserves its worst case (WorstCase) before it is sent and settles at
	// its cost, so that the call is refused rather than passing the cap.
	// A call without max_tokens is sent with what the cap has left as its
	// bound. nil: no cap, and nothing is counted or reserved.
	Ledger budget.Ledger
}

// NodeRetry is a node's retry: block as it applies to its model calls.
type NodeRetry struct {
	MaxAttempts int
	Backoff     time.Duration
	RetryOn     []errclass.Class // nil: every recoverable class
}

// Response is the outcome of a Request.
type Response struct {
	Text string `json:"text"`
	// JSON is the parsed, validated reply when the Request had an
	// OutputSchema; nil otherwise.
	JSON         any        `json:"json"`
	FinishReason string     `json:"finish_reason"`
	ToolCalls    []ToolCall `json:"tool_calls,omitempty"`
	// Usage and CostUSD cover every turn the call made, repairs included.
	Usage   Usage   `json:"usage"`
	CostUSD float64 `json:"cost_usd"`
	// Model is the model that answered, as the server reported it.
	Model string `json:"model"`
	// Turns is how many model replies the call took (1 + repair turns).
	Turns int `json:"turns"`
	// Cached: every turn was answered from the response cache, so the
	// call cost nothing and used no tokens.
	Cached bool `json:"cached,omitempty"`
}

// Message is the assistant turn to append to a memory.
func (r *Response) Message() Message {
	return Message{Role: RoleAssistant, Text: r.Text, ToolCalls: r.ToolCalls}
}

// Usage counts tokens; it is tokens.Usage, so that runtime can record it
// on a model turn without importing llm.
type Usage = tokens.Usage

// Exchange reports one HTTP exchange (or one cassette answer) of a call.
type Exchange struct {
	Key Key
	// Turn is 1 for the first reply and n+1 for the n-th repair turn.
	Turn int
	// Try is 1 for the first send of a turn and n+1 for its n-th retry.
	Try      int
	Endpoint string // URL of the call, credentials removed; "cassette" on replay
	Latency  time.Duration
	// Exactly one of Reply and Err is set. Reply is this exchange alone
	// (its usage and cost, before validation).
	Reply *Response
	Err   error
	Class errclass.Class // Err's class
	// Wait is the pause before the next try when Err will be retried.
	Wait time.Duration
	// Cached: Reply came from the response cache, with no network.
	Cached bool
	// Charged is what an exchange without a reply counts at against the
	// cost cap: its reservation when it was sent and may have been
	// billed (cancelled, cut off, timed out), else 0.
	Charged float64
}
