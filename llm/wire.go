package llm

import (
	"encoding/json"
	"fmt"
	"regexp"

	"github.com/flowrun/flowrun/jsonvalue"
)

// APIs a model config may choose.
const (
	APIChat      = "chat"
	APIResponses = "responses"
)

// call is one model turn as it goes on the wire, with the model config
// and per-node overrides already applied. It is what a cassette stores as
// the request and what the request hash covers: no endpoint, no key, no
// callbacks.
type call struct {
	API             string         `yaml:"api" json:"api"`
	Model           string         `yaml:"model" json:"model"`
	Temperature     *float64       `yaml:"temperature,omitempty" json:"temperature,omitempty"`
	TopP            *float64       `yaml:"top_p,omitempty" json:"top_p,omitempty"`
	MaxTokens       int            `yaml:"max_tokens,omitempty" json:"max_tokens,omitempty"`
	Seed            *int           `yaml:"seed,omitempty" json:"seed,omitempty"`
	ReasoningEffort string         `yaml:"reasoning_effort,omitempty" json:"reasoning_effort,omitempty"`
	Verbosity       string         `yaml:"verbosity,omitempty" json:"verbosity,omitempty"`
	Messages        []Message      `yaml:"messages" json:"messages"`
	Tools           []ToolSpec     `yaml:"tools,omitempty" json:"tools,omitempty"`
	ToolChoice      *ToolChoice    `yaml:"tool_choice,omitempty" json:"tool_choice,omitempty"`
	SchemaName      string         `yaml:"schema_name,omitempty" json:"schema_name,omitempty"`
	OutputSchema    map[string]any `yaml:"output_schema,omitempty" json:"output_schema,omitempty"`
}

// reply is one model answer before validation and pricing: what a
// cassette stores as the response.
type reply struct {
	Model        string     `yaml:"model,omitempty" json:"model,omitempty"`
	Text         string     `yaml:"text" json:"text"`
	ToolCalls    []ToolCall `yaml:"tool_calls,omitempty" json:"tool_calls,omitempty"`
	FinishReason string     `yaml:"finish_reason" json:"finish_reason"`
	Usage        Usage      `yaml:"usage" json:"usage"`
	// cached: answered from the response cache, with no usage.
	cached bool
}

var schemaNameRE = regexp.MustCompile(`^[A-Za-z0-9_-]{1,64}$`)

// newCall applies the model config and the request's overrides.
func newCall(req *Request, messages []Message, schema map[string]any) (*call, error) {
	m := req.Model
	if m == nil {
		return nil, criticalf("node %q: no model config", req.Key.Node)
	}
	if m.Model == "" {
		return nil, criticalf("model %q: no model name", m.Name)
	}
	c := &call{
		API:             m.API,
		Model:           m.Model,
		Temperature:     m.Temperature,
		TopP:            m.TopP,
		MaxTokens:       m.MaxTokens,
		Seed:            m.Seed,
		ReasoningEffort: m.ReasoningEffort,
		Verbosity:       m.Verbosity,
		Messages:        canonicalMessages(messages),
		Tools:           req.Tools,
		OutputSchema:    schema,
	}
	switch c.API {
	case "":
		c.API = APIChat
	case APIChat, APIResponses:
	default:
		return nil, criticalf("model %q: api %q is not chat or responses", m.Name, m.API)
	}
	if req.Temperature != nil {
		c.Temperature = req.Temperature
	}
	if req.MaxTokens > 0 {
		c.MaxTokens = req.MaxTokens
	}
	if req.ToolChoice.Mode != "" || len(req.ToolChoice.Tools) > 0 {
		tc := req.ToolChoice
		c.ToolChoice = &tc
	}
	if schema != nil {
		c.SchemaName = req.SchemaName
		if c.SchemaName == "" {
			c.SchemaName = "output"
		}
		if !schemaNameRE.MatchString(c.SchemaName) {
			return nil, criticalf("node %q: schema name %q must be 1-64 letters, digits, _ or -", req.Key.Node, c.SchemaName)
		}
	}
	for i, msg := range c.Messages {
		switch msg.Role {
		case RoleSystem, RoleUser, RoleAssistant:
		case RoleTool:
			if msg.ToolCallID == "" {
				return nil, criticalf("node %q: message %d: a tool message needs tool_call_id", req.Key.Node, i)
			}
		default:
			return nil, criticalf("node %q: message %d: unknown role %q", req.Key.Node, i, msg.Role)
		}
	}
	return c, nil
}

// canonicalMessages drops the parsed tool-call arguments, which are
// derived from Arguments and would make equal requests hash apart after a
// checkpoint round trip.
func canonicalMessages(ms []Message) []Message {
	out := make([]Message, len(ms))
	for i, m := range ms {
		out[i] = m
		if len(m.ToolCalls) > 0 {
			out[i].ToolCalls = make([]ToolCall, len(m.ToolCalls))
			for j, tc := range m.ToolCalls {
				out[i].ToolCalls[j] = ToolCall{ID: tc.ID, Name: tc.Name, Arguments: tc.Arguments}
			}
		}
	}
	return out
}

// parseToolCalls fills Args (or ArgsError) from Arguments.
func parseToolCalls(tcs []ToolCall) []ToolCall {
	if len(tcs) == 0 {
		return nil
	}
	out := make([]ToolCall, len(tcs))
	for i, tc := range tcs {
		out[i] = ToolCall{ID: tc.ID, Name: tc.Name, Arguments: tc.Arguments}
		args := tc.Arguments
		if args == "" {
			args = "{}"
		}
		v, err := jsonvalue.Decode([]byte(args))
		if err != nil {
			out[i].ArgsError = fmt.Sprintf("arguments of %s are not valid JSON: %v", tc.Name, err)
			continue
		}
		out[i].Args = v
	}
	return out
}

// estimateTokens is a rough count of a call's tokens for the tpm limiter:
// four bytes a token for what is sent, plus the completion budget.
func (c *call) estimateTokens() int {
	n := 0
	for _, m := range c.Messages {
		n += len(m.Text)/4 + 4
		n += 800 * len(m.Images)
		for _, tc := range m.ToolCalls {
			n += (len(tc.Name) + len(tc.Arguments)) / 4
		}
	}
	if len(c.Tools) > 0 {
		b, _ := json.Marshal(c.Tools)
		n += len(b) / 4
	}
	if c.OutputSchema != nil {
		b, _ := json.Marshal(c.OutputSchema)
		n += len(b) / 4
	}
	if c.MaxTokens > 0 {
		n += c.MaxTokens
	} else {
		n += 256
	}
	return n
}
