// Package llmconf is what a pipeline configures for model calls: each model
// it declares under models: (which model, API and endpoint, its sampling
// settings, client limits and price) and how an images: entry is read. dsl
// decodes it from the file; llm calls models with it. It depends on nothing
// else in flowrun.
package llmconf

import (
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
}

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
