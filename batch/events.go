package batch

import (
	"github.com/flowrun/flowrun/runtime"
	"github.com/flowrun/flowrun/store"
)

// The events flowrun batch --json prints, one JSON object a line. Their
// fields are declared in the order of their JSON names, so that the bytes
// are those of the same fields marshalled as a map (sorted keys), as they
// were first written.

// ItemEvent says that one item finished ("type": "item_finished"), with
// how far the batch has got.
type ItemEvent struct {
	Batch      string         `json:"batch"`
	Class      string         `json:"class"`
	CostUSD    float64        `json:"cost_usd"`
	Done       int            `json:"done"`
	DurationMS float64        `json:"duration_ms"`
	Error      string         `json:"error"`
	Index      int            `json:"index"`
	Key        string         `json:"key"`
	Repeat     int            `json:"repeat,omitempty"` // which of the item's runs (--repeat), from 0
	Run        string         `json:"run"`
	Scores     map[string]any `json:"scores"`
	Status     runtime.Status `json:"status"`
	Tokens     int            `json:"tokens"`
	Total      int            `json:"total"`
	Type       string         `json:"type"`
}

// NewItemEvent is the event for the item p reports, in batch id.
func NewItemEvent(id string, p Progress) ItemEvent {
	it := p.Item
	return ItemEvent{Type: "item_finished", Batch: id, Index: it.Index, Key: it.Key, Repeat: it.Repeat, Run: it.Run, Status: it.Status,
		Scores: it.Scores, Error: it.Error, Class: it.Class, CostUSD: it.CostUSD, Tokens: it.Tokens,
		DurationMS: it.DurationMS, Done: p.Done, Total: p.Total}
}

// FinishedEvent is a batch's totals once its run ended ("type":
// "batch_finished"): the figures of its Summary. Passed and PassRate are
// there only when a pass/fail metric was scored.
type FinishedEvent struct {
	Batch     string         `json:"batch"`
	Completed int            `json:"completed"`
	CostUSD   float64        `json:"cost_usd"`
	Failed    int            `json:"failed"`
	Failures  map[string]int `json:"failures"` // items by failure class
	Items     int            `json:"items"`
	Metrics   []Metric       `json:"metrics"`
	PassRate  *float64       `json:"pass_rate,omitempty"`
	Passed    *int           `json:"passed,omitempty"`
	Pending   int            `json:"pending"` // items without a result
	Primary   string         `json:"primary"`
	Reason    string         `json:"reason"`
	Status    runtime.Status `json:"status"`
	Tokens    int            `json:"tokens"`
	Type      string         `json:"type"`
}

// Ended is the summary of batch b, whose run ended with status and
// reason, from its item records rows.
func Ended(b *store.Batch, status runtime.Status, reason string, rows []*store.BatchItem) *Summary {
	ended := *b
	ended.Status, ended.Reason = status, reason
	return SummarizeItems(&ended, rows)
}

// NewFinishedEvent is the event for a batch that ended as s says.
func NewFinishedEvent(s *Summary) FinishedEvent {
	ev := FinishedEvent{Type: "batch_finished", Batch: s.ID, Status: s.Status, Reason: s.Reason,
		Items: s.Items.Total, Completed: s.Items.Completed, Failed: s.Items.Failed, Pending: s.Items.Unsettled(),
		Primary: s.Primary, Metrics: s.Metrics, CostUSD: s.CostUSD, Tokens: s.Tokens, Failures: map[string]int{}}
	for _, f := range s.Failures {
		ev.Failures[f.Class] = f.Count
	}
	if s.PassRate != nil {
		ev.Passed, ev.PassRate = &s.PassRate.Passed, &s.PassRate.Rate
	}
	return ev
}

// SweepEvent is a sweep's variants and the comparison of each pair
// ("type": "sweep_finished").
type SweepEvent struct {
	Pairs    []SweepPair   `json:"pairs"`
	Type     string        `json:"type"`
	Variants []SweepResult `json:"variants"`
}

// NewSweepEvent is the event for sweep sw.
func NewSweepEvent(sw *Sweep) SweepEvent {
	return SweepEvent{Type: "sweep_finished", Variants: sw.Variants, Pairs: sw.Pairs}
}
