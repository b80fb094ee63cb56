package llmconf

import (
	"encoding/json"
	"fmt"
	"regexp"

	"gopkg.in/yaml.v3"
)

// The offline providers, which answer without a network or a key:
// ProviderEcho replies with the prompt, ProviderMock with the replies of
// a mock file.
const (
	ProviderEcho = "echo"
	ProviderMock = "mock"
)

// Providers are the values of a model's provider: besides "" (an
// OpenAI-compatible server).
var Providers = []string{ProviderEcho, ProviderMock}

// Offline says whether m answers without a server.
func (m *Model) Offline() bool { return m.Provider != "" }

// Mock is a mock file's replies, in order: a request gets the first
// whose patterns all match it.
type Mock struct {
	Replies []MockReply
}

// MockReply is one reply of a mock file. Prompt is matched against the
// request's last user message, Input against the whole request (every
// message, the system's included, one per line); a reply with neither
// answers any request. Text is the reply; a JSON reply is written as
// JSON text, for an output schema or a judge.
type MockReply struct {
	Prompt, Input *regexp.Regexp
	Text          string
	Line          int // where the reply is written in the mock file
}

// Reply is the reply to a request whose last user message is prompt and
// whose messages, one per line, are input; ok is false when none matches.
func (m *Mock) Reply(prompt, input string) (MockReply, bool) {
	for _, r := range m.Replies {
		if (r.Prompt == nil || r.Prompt.MatchString(prompt)) && (r.Input == nil || r.Input.MatchString(input)) {
			return r, true
		}
	}
	return MockReply{}, false
}

// MockError is a problem with a mock file, at a line of it.
type MockError struct {
	Line int
	Msg  string
}

func (e *MockError) Error() string { return fmt.Sprintf("line %d: %s", e.Line, e.Msg) }

// ParseMock reads a mock file:
//
//	replies:
//	  - prompt: capital of France    # a regular expression
//	    text: Paris
//	  - input: (?s)rubric.*polite
//	    json: {reasoning: It says please., verdict: true}
//	  - text: I do not know          # any other request
func ParseMock(src []byte) (*Mock, error) {
	var doc yaml.Node
	if err := yaml.Unmarshal(src, &doc); err != nil {
		return nil, fmt.Errorf("not YAML: %w", err)
	}
	if len(doc.Content) == 0 || doc.Content[0].Kind != yaml.MappingNode {
		return nil, &MockError{Line: 1, Msg: "a mock file is a mapping with replies: (a list of {prompt, input, text or json})"}
	}
	root := doc.Content[0]
	var replies *yaml.Node
	for i := 0; i+1 < len(root.Content); i += 2 {
		if k := root.Content[i]; k.Value == "replies" {
			replies = root.Content[i+1]
		} else {
			return nil, &MockError{Line: k.Line, Msg: fmt.Sprintf("unknown key %q: a mock file holds replies:", k.Value)}
		}
	}
	if replies == nil || replies.Kind != yaml.SequenceNode || len(replies.Content) == 0 {
		return nil, &MockError{Line: root.Line, Msg: "replies: a list of at least one {prompt, input, text or json}"}
	}
	m := &Mock{}
	for _, n := range replies.Content {
		r, err := mockReply(n)
		if err != nil {
			return nil, err
		}
		m.Replies = append(m.Replies, r)
	}
	return m, nil
}

func mockReply(n *yaml.Node) (MockReply, error) {
	r := MockReply{Line: n.Line}
	if n.Kind != yaml.MappingNode {
		return r, &MockError{Line: n.Line, Msg: "a reply is {prompt, input, text or json}"}
	}
	answered := false
	for i := 0; i+1 < len(n.Content); i += 2 {
		k, v := n.Content[i], n.Content[i+1]
		switch k.Value {
		case "prompt", "input":
			re, err := regexp.Compile(v.Value)
			if err != nil || v.Kind != yaml.ScalarNode {
				return r, &MockError{Line: v.Line, Msg: fmt.Sprintf("%s: not a regular expression: %v", k.Value, err)}
			}
			if k.Value == "prompt" {
				r.Prompt = re
			} else {
				r.Input = re
			}
		case "text":
			if v.Kind != yaml.ScalarNode {
				return r, &MockError{Line: v.Line, Msg: "text: a reply's text (json: for a structured reply)"}
			}
			r.Text, answered = v.Value, true
		case "json":
			var x any
			if err := v.Decode(&x); err != nil {
				return r, &MockError{Line: v.Line, Msg: fmt.Sprintf("json: %v", err)}
			}
			b, err := json.Marshal(x)
			if err != nil {
				return r, &MockError{Line: v.Line, Msg: fmt.Sprintf("json: %v", err)}
			}
			r.Text, answered = string(b), true
		default:
			return r, &MockError{Line: k.Line, Msg: fmt.Sprintf("unknown key %q: a reply is {prompt, input, text or json}", k.Value)}
		}
	}
	if !answered {
		return r, &MockError{Line: n.Line, Msg: "a reply needs text: or json:"}
	}
	return r, nil
}
