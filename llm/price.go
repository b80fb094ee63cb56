package llm

import (
	"regexp"
	"strings"

	"github.com/flowrun/flowrun/llmconf"
)

// prices are OpenAI's standard-tier list prices in USD per million tokens
// (input, cached input, output), as published at
// https://openai.com/api/pricing/ and checked on 2025-08-20. A model's
// `price:` in the pipeline file overrides them. Reasoning tokens are billed
// as output tokens and are already counted in completion tokens.
var prices = map[string]llmconf.Price{
	"gpt-4.1":      {InputPerMTok: 2.00, CachedInputPerMTok: 0.50, OutputPerMTok: 8.00},
	"gpt-4.1-mini": {InputPerMTok: 0.40, CachedInputPerMTok: 0.10, OutputPerMTok: 1.60},
	"gpt-4.1-nano": {InputPerMTok: 0.10, CachedInputPerMTok: 0.025, OutputPerMTok: 0.40},
	"gpt-4o":       {InputPerMTok: 2.50, CachedInputPerMTok: 1.25, OutputPerMTok: 10.00},
	"gpt-4o-mini":  {InputPerMTok: 0.15, CachedInputPerMTok: 0.075, OutputPerMTok: 0.60},
	"o3":           {InputPerMTok: 2.00, CachedInputPerMTok: 0.50, OutputPerMTok: 8.00},
	"o4-mini":      {InputPerMTok: 1.10, CachedInputPerMTok: 0.275, OutputPerMTok: 4.40},
	"gpt-5":        {InputPerMTok: 1.25, CachedInputPerMTok: 0.125, OutputPerMTok: 10.00},
	"gpt-5-mini":   {InputPerMTok: 0.25, CachedInputPerMTok: 0.025, OutputPerMTok: 2.00},
	"gpt-5-nano":   {InputPerMTok: 0.05, CachedInputPerMTok: 0.005, OutputPerMTok: 0.40},
}

// snapshotRE matches a dated snapshot suffix such as -2025-04-14.
var snapshotRE = regexp.MustCompile(`^-\d{4}-\d{2}-\d{2}$`)

// LookupPrice returns the price of a model: the override when given, else
// the built-in entry for the model or its dated snapshot
// (gpt-4.1-mini-2025-04-14 costs what gpt-4.1-mini does). ok is false for
// a model the table does not know, whose calls then cost 0.
func LookupPrice(model string, override *llmconf.Price) (p llmconf.Price, ok bool) {
	if override != nil {
		return *override, true
	}
	if p, ok := prices[model]; ok {
		return p, true
	}
	best := ""
	for name := range prices {
		if strings.HasPrefix(model, name) && snapshotRE.MatchString(model[len(name):]) && len(name) > len(best) {
			best = name
		}
	}
	if best == "" {
		return llmconf.Price{}, false
	}
	return prices[best], true
}

// Cost prices usage in USD. Cached prompt tokens cost the cached rate when
// the price has one, else the input rate.
func Cost(u Usage, p llmconf.Price) float64 {
	cached := min(max(u.Cached, 0), u.Prompt)
	cachedRate := p.CachedInputPerMTok
	if cachedRate == 0 {
		cachedRate = p.InputPerMTok
	}
	usd := float64(u.Prompt-cached)*p.InputPerMTok +
		float64(cached)*cachedRate +
		float64(u.Completion)*p.OutputPerMTok
	return usd / 1e6
}

// PriceOf is what a call of m, sent as model, is billed at: m's price:,
// else the table's. An offline model (echo, mock) with no price: bills
// nothing, so it is priced at 0, and a cost cap holds for it.
func PriceOf(m *llmconf.Model, model string) (llmconf.Price, bool) {
	if p, ok := LookupPrice(model, m.Price); ok {
		return p, true
	}
	return llmconf.Price{}, m.Offline()
}

// cost prices one reply: by the requested model, else by the model the
// server says answered.
func cost(u Usage, m *llmconf.Model, answered string) float64 {
	p, ok := LookupPrice(m.Model, m.Price)
	if !ok {
		p, ok = LookupPrice(answered, nil)
	}
	if !ok {
		return 0
	}
	return Cost(u, p)
}
