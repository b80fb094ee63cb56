// Package tokens is what a model call spent in tokens, in the one shape
// that llm reports, runtime records on a model turn and every front end
// reads back from the store (the JSON names are those of stored events, so
// old runs read the same). It depends on nothing else in flowrun.
package tokens

// Usage counts tokens. Cached is the part of Prompt served from the prompt
// cache; Reasoning is the part of Completion spent on reasoning (priced
// as output: it is part of Completion).
type Usage struct {
	Prompt     int `json:"prompt" yaml:"prompt"`
	Completion int `json:"completion" yaml:"completion"`
	Reasoning  int `json:"reasoning,omitempty" yaml:"reasoning,omitempty"`
	Cached     int `json:"cached,omitempty" yaml:"cached,omitempty"`
	Total      int `json:"total" yaml:"total"`
	// Estimated: the server reported no usage and the figures were
	// counted locally with the model's tokenizer.
	Estimated bool `json:"estimated,omitempty" yaml:"estimated,omitempty"`
}

// Add returns the sum of two usages.
func (u Usage) Add(v Usage) Usage {
	return Usage{
		Prompt:     u.Prompt + v.Prompt,
		Completion: u.Completion + v.Completion,
		Reasoning:  u.Reasoning + v.Reasoning,
		Cached:     u.Cached + v.Cached,
		Total:      u.Total + v.Total,
		Estimated:  u.Estimated || v.Estimated,
	}
}
