// Package llmconf is what a pipeline configures for model calls: each model
// it declares under models: (which model, API and endpoint, its sampling
// settings, client limits and price) and how an images: entry is read. dsl
// decodes it from the file; llm calls models with it. It depends on nothing
// else in flowrun.
package llmconf

import (
	"fmt"
	"strings"
	"time"
)

// Model is a named model configuration.
type Model struct {
	Name            string
	Model           string
	API             string // chat (default) or responses
	Temperature     *float64
	TopP            *float64
	MaxTokens       int
	Seed            *int
	ReasoningEffort string
	Verbosity       string
	BaseURL         string
	APIKeyEnv       string
	RPM, TPM        int
	MaxConcurrency  int
	Timeout         time.Duration
	Price           *Price
	// Retry is the model's retry policy; nil keeps the client's defaults.
	Retry *Retry
	// Stream is "auto" (or ""), "true" or "false".
	Stream string
	// Cache is "" (unset), "true", "false" or "always": whether identical
	// requests are answered from the run store's response cache.
	Cache string
	// Background creates each call as a background response (Responses
	// API only) and polls it until it ends, every Poll (0: DefaultPoll),
	// the wait growing by half after each poll up to MaxPoll (or Poll, if
	// that is longer).
	Background bool
	Poll       time.Duration
	// MaxReplyBytes is the most bytes one body from the model's endpoint
	// may bring (a reply, a stream in all, one poll); 0:
	// DefaultMaxReplyBytes.
	MaxReplyBytes int
	// Provider is "" for an OpenAI-compatible server, or an offline
	// provider (Providers): echo, or mock with the replies of MockFile,
	// read when the pipeline loads.
	Provider string
	MockFile string
	Mock     *Mock
}

// DefaultMaxReplyBytes bounds a model's replies unless its
// max_reply_bytes says: 64 MiB. The longest reply a model writes (128k
// output tokens, about 0.5 MB of text) is under 1 MB as one JSON body and
// about 40 MB streamed, each token in an event of some 300 bytes.
const DefaultMaxReplyBytes = 64 << 20

// ReplyLimit is the most bytes one body from m's endpoint may bring.
func (m *Model) ReplyLimit() int {
	if m.MaxReplyBytes > 0 {
		return m.MaxReplyBytes
	}
	return DefaultMaxReplyBytes
}

// Polling of background responses: the first wait unless a model's poll:
// says, and the longest wait the backoff reaches.
const (
	DefaultPoll = 2 * time.Second
	MaxPoll     = 60 * time.Second
)

// Retry is how a model call is retried on a recoverable error. Zero fields
// keep the defaults; Jitter nil keeps the default share.
type Retry struct {
	MaxAttempts int
	Backoff     time.Duration
	MaxBackoff  time.Duration
	// Jitter is the share (0..1) of each wait drawn at random: the wait is
	// between (1-Jitter)·d and d.
	Jitter *float64
}

// Price overrides the built-in price table for a model, in USD per million tokens.
type Price struct {
	InputPerMTok       float64
	OutputPerMTok      float64
	CachedInputPerMTok float64
}

// IsImageURL reports whether an images: entry is an http(s) or data URL,
// sent as it is, rather than a file.
func IsImageURL(ref string) bool {
	lower := strings.ToLower(ref)
	return strings.HasPrefix(lower, "http://") || strings.HasPrefix(lower, "https://") || strings.HasPrefix(lower, "data:")
}

// Override returns m with an override applied: the --model NAME=SPEC of a
// run, where SPEC is a model id optionally followed by options,
// "MODEL[,responses][,background][,poll=DURATION]" (responses: call the
// Responses API), and MODEL may be left empty to keep m's; MODEL echo is
// the offline echo provider, and any other a model of a server. m is not
// changed.
func Override(m *Model, spec string) (*Model, error) {
	id, opts, _ := strings.Cut(spec, ",")
	out := *m
	switch id {
	case "":
	case ProviderEcho:
		// Any pipeline runs offline with --model NAME=echo.
		out.Model, out.Provider = id, ProviderEcho
	default:
		out.Model, out.Provider = id, ""
	}
	for opt := range strings.SplitSeq(opts, ",") {
		name, value, hasValue := strings.Cut(opt, "=")
		switch {
		case opt == "" && opts == "":
		case name == "responses" && !hasValue:
			out.API = "responses"
		case name == "background" && !hasValue:
			out.Background = true
		case name == "poll" && hasValue:
			d, err := time.ParseDuration(value)
			if err != nil || d <= 0 {
				return nil, fmt.Errorf("model %q: poll=%s is not a positive duration such as 5s", m.Name, value)
			}
			out.Poll = d
		default:
			return nil, fmt.Errorf("model %q: unknown option %q (the options are responses, background and poll=DURATION)", m.Name, opt)
		}
	}
	if out.Background && out.API != "responses" {
		return nil, fmt.Errorf("model %q: background needs the Responses API (background responses are a Responses API feature, and this model uses chat completions): add the option responses", m.Name)
	}
	return &out, nil
}
