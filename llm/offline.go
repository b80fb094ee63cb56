package llm

import (
	"fmt"
	"strings"

	"github.com/flowrun/flowrun/errclass"
	"github.com/flowrun/flowrun/llmconf"
	"github.com/flowrun/flowrun/redact"
)

// offlineScheme starts an offline model's endpoint URL.
const offlineScheme = "offline:"

// offlineEndpoint is where an offline model's requests go: nowhere. Its
// URL names the provider (and mock file), for messages, traces and the
// rate limiters' and cache's keys.
func offlineEndpoint(m *llmconf.Model) Endpoint {
	url := offlineScheme + m.Provider
	if m.Provider == llmconf.ProviderMock {
		url += ":" + m.MockFile
	}
	return Endpoint{URL: url, URLFrom: offlineURLFrom, HasKey: true}
}

// AnsweredOffline says whether a recorded turn's endpoint (runtime.Turn's
// Endpoint) is an offline model's: what it answered, the same model
// answers again, with no key and no network.
func AnsweredOffline(endpoint string) bool { return strings.HasPrefix(endpoint, offlineScheme) }

// offlineURLFrom is an offline model's Endpoint.URLFrom: its provider.
const offlineURLFrom = "provider"

// offlineReply answers cl as an offline model does: echo with the last
// user message, mock with the first reply of its file that matches. It
// stands where a server's answer would, so that everything around an
// exchange (the cost ledger, the rate limiters, tracing, cassettes, the
// cache) holds for it as for a server's.
func offlineReply(ep *endpoint, cl *call, m *llmconf.Model) (*reply, *Error) {
	prompt, input := "", make([]string, 0, len(cl.Messages))
	for _, msg := range cl.Messages {
		if msg.Role == RoleUser {
			prompt = msg.Text
		}
		input = append(input, msg.Text)
	}
	if m.Provider == llmconf.ProviderEcho {
		return &reply{Model: cl.Model, Text: prompt, FinishReason: "stop"}, nil
	}
	if m.Mock == nil {
		return nil, &Error{class: errclass.Critical, Endpoint: ep.display, msg: fmt.Sprintf("model %q: provider mock with no mock file: name one with mock: FILE", m.Name)}
	}
	r, ok := m.Mock.Reply(prompt, strings.Join(input, "\n"))
	if !ok {
		return nil, &Error{class: errclass.Critical, Endpoint: ep.display,
			msg: fmt.Sprintf("model %q: no reply of the mock file %s matches the prompt %s; add one (a reply with no prompt: or input: answers any request)", m.Name, m.MockFile, showText(redact.Line(prompt, 200)))}
	}
	return &reply{Model: cl.Model, Text: r.Text, FinishReason: "stop"}, nil
}
