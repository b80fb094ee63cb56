package llm

import (
	"encoding/json"
	"fmt"
	"strings"
	"sync"

	"github.com/tiktoken-go/tokenizer"
)

// codecs are loaded on first use: each holds a vocabulary of 100k-200k
// tokens.
var codecs = map[tokenizer.Encoding]func() (tokenizer.Codec, error){
	tokenizer.O200kBase:  sync.OnceValues(func() (tokenizer.Codec, error) { return tokenizer.Get(tokenizer.O200kBase) }),
	tokenizer.Cl100kBase: sync.OnceValues(func() (tokenizer.Codec, error) { return tokenizer.Get(tokenizer.Cl100kBase) }),
}

// encodingFor is o200k_base for the gpt-4o, gpt-4.1, gpt-5 and o-series
// families, cl100k_base for every other model (older OpenAI models and
// most open models served as OpenAI-compatible, for which it is an
// approximation).
func encodingFor(model string) tokenizer.Encoding {
	m := strings.ToLower(model)
	if i := strings.LastIndexByte(m, '/'); i >= 0 {
		m = m[i+1:] // openai/gpt-4o on a router
	}
	for _, p := range []string{"gpt-4o", "gpt-4.1", "gpt-4.5", "gpt-5", "chatgpt-4o", "o1", "o3", "o4", "gpt-oss"} {
		if strings.HasPrefix(m, p) {
			return tokenizer.O200kBase
		}
	}
	return tokenizer.Cl100kBase
}

// Chat framing, as OpenAI counts it: each message costs 3 tokens beyond
// its content and every reply is primed with 3 more.
const (
	tokensPerMessage = 3
	tokensReplyPrime = 3
)

// estimateUsage counts a call's tokens locally, for a server that reported
// no usage: the prompt as the messages, tools and schema sent; the
// completion as the reply's text and tool calls. Reasoning and cached
// tokens cannot be seen and count 0. The result is marked Estimated.
func estimateUsage(cl *call, rep *reply) (Usage, error) {
	codec, err := codecs[encodingFor(cl.Model)]()
	if err != nil {
		return Usage{}, err
	}
	count := func(s string) int {
		n, _ := codec.Count(s) // invalid UTF-8 is counted byte-wise, which is what an estimate needs
		return n
	}
	u := Usage{Estimated: true, Prompt: tokensReplyPrime}
	for _, m := range cl.Messages {
		u.Prompt += tokensPerMessage + count(m.Role) + count(m.Text)
		for _, tc := range m.ToolCalls {
			u.Prompt += count(tc.Name) + count(tc.Arguments)
		}
		u.Prompt += 800 * len(m.Images) // a high-detail image tile, roughly
	}
	u.Prompt += toolTokens(cl.Tools, encodingFor(cl.Model), count)
	if cl.OutputSchema != nil {
		b, _ := json.Marshal(cl.OutputSchema)
		u.Prompt += count(string(b))
	}
	u.Completion = count(rep.Text)
	for _, tc := range rep.ToolCalls {
		u.Completion += tokensPerMessage + count(tc.Name) + count(tc.Arguments)
	}
	u.Total = u.Prompt + u.Completion
	return u, nil
}

// toolTokens counts tool definitions as OpenAI's cookbook does ("How to
// count tokens with tiktoken", num_tokens_for_tools), which matches what
// the API reported for its example: the server renders each function as
// "name:description" and each top-level parameter as
// "name:type:description", with fixed overheads. Nested parameters
// (objects, arrays) have no published rule and are counted as their JSON.
func toolTokens(tools []ToolSpec, enc tokenizer.Encoding, count func(string) int) int {
	if len(tools) == 0 {
		return 0
	}
	funcInit := 7
	if enc == tokenizer.Cl100kBase {
		funcInit = 10
	}
	const propInit, propKey, enumInit, enumItem, funcEnd = 3, 3, -3, 3, 12
	n := funcEnd
	for _, t := range tools {
		n += funcInit + count(t.Name+":"+strings.TrimSuffix(t.Description, "."))
		props, _ := t.Parameters["properties"].(map[string]any)
		if len(props) > 0 {
			n += propInit
		}
		for name, v := range props {
			p, _ := v.(map[string]any)
			n += propKey
			if enum, ok := p["enum"].([]any); ok {
				n += enumInit
				for _, item := range enum {
					n += enumItem + count(fmt.Sprint(item))
				}
			}
			typ, ok := p["type"].(string)
			if !ok {
				b, _ := json.Marshal(p["type"])
				typ = string(b)
			}
			desc, _ := p["description"].(string)
			n += count(name + ":" + typ + ":" + strings.TrimSuffix(desc, "."))
			for _, nested := range []string{"properties", "items", "anyOf", "oneOf"} {
				if sub, ok := p[nested]; ok {
					b, _ := json.Marshal(sub)
					n += count(string(b))
				}
			}
		}
	}
	return n
}
