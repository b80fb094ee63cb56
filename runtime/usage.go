package runtime

import (
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync/atomic"

	"github.com/flowrun/flowrun/budget"
	"github.com/flowrun/flowrun/dsl"
	"github.com/flowrun/flowrun/errclass"
	"github.com/flowrun/flowrun/figures"
	"github.com/flowrun/flowrun/tokens"
)

// usage is what a run has spent on model calls, shared by all its
// scopes. Its cost is the run's ledger: limits.max_cost_usd, inside the
// ledger of the batch the run is part of (Options.Ledger).
type usage struct {
	cost   *budget.Cap
	tokens atomic.Int64
}

// maxCostName is what the run's cap is called in its stop reasons.
const maxCostName = "limits.max_cost_usd"

func newUsage(limit, spent float64, tokens int64, parent budget.Ledger) *usage {
	u := &usage{cost: budget.New(fmt.Sprintf("%s (%s)", maxCostName, figures.USD(limit)), limit, spent, parent)}
	u.tokens.Store(tokens)
	return u
}

func (u *usage) totals() (float64, int64) { return u.cost.Spent(), u.tokens.Load() }

// overBudget is the stop a run must make once it has spent its budget.
func (u *usage) overBudget() error {
	if limit := u.cost.Limit(); limit > 0 && u.cost.Spent() >= limit-budget.Slack {
		return &StopError{Reason: u.spentReason(), Limit: maxCostName}
	}
	return nil
}

func (u *usage) spentReason() string {
	return fmt.Sprintf("%s reached: the run has spent %s", u.cost.Name(), figures.USD(u.cost.Spent()))
}

// stopReason is a cost stop's reason as the run ends, with what the run
// spent in the end (calls in flight when it was refused settle later):
// the figure the store keeps.
func (u *usage) stopReason(stop *StopError) string {
	var refused *budget.ExceededError
	switch {
	case errors.As(stop.cause, &refused) && refused.Cap == u.cost.Name():
		return fmt.Sprintf("%s, and its next model call may cost up to %s", u.spentReason(), figures.USD(refused.Need))
	case stop.Limit == maxCostName:
		return u.spentReason()
	}
	return stop.Reason
}

// AddTokens counts a model call's tokens against the run.
func (s *Scope) AddTokens(tokens int) { s.run.usage.tokens.Add(int64(tokens)) }

// AddCost counts what a model call made without a ledger (Ledger
// returned nil) cost.
func (s *Scope) AddCost(usd float64) { s.run.usage.cost.Add(usd) }

// Ledger is what a model call reserves its cost from, nil when no cap
// applies to the run: neither limits.max_cost_usd nor a batch's.
func (s *Scope) Ledger() budget.Ledger {
	if !s.run.usage.cost.Limited() {
		return nil
	}
	return s.run.usage.cost
}

// Spent is the run's cost and tokens so far.
func (s *Scope) Spent() (float64, int64) { return s.run.usage.totals() }

// CheckBudget returns the StopError a node must return, before making a
// model call, once the run has spent limits.max_cost_usd.
func (s *Scope) CheckBudget() error { return s.run.usage.overBudget() }

// CostCapStop is the StopError for a model call its ledger refused (a
// *budget.ExceededError in err), nil for any other error.
func CostCapStop(err error) error {
	var refused *budget.ExceededError
	if !errors.As(err, &refused) {
		return nil
	}
	stop := &StopError{Reason: refused.Error(), cause: refused}
	if strings.HasPrefix(refused.Cap, maxCostName) {
		stop.Limit = maxCostName
	}
	return stop
}

// Memories are named conversations. A scope holds each memory's messages
// (JSON, in the shape package llm writes them); a node appends its turns
// when it succeeds. Map items and parallel branches start from the
// memories as they were and, like state, parallel branches' appends join in
// declaration order while map items' are discarded.
type memories struct {
	msgs map[string][]json.RawMessage
	base map[string]int // lengths when this scope was forked from its parent
}

func (m *memories) clone() memories {
	if len(m.msgs) == 0 {
		return memories{} // AppendMemory makes the map when needed
	}
	c := memories{msgs: make(map[string][]json.RawMessage, len(m.msgs)), base: make(map[string]int, len(m.msgs))}
	for k, v := range m.msgs {
		// Clip so that an append in the child never writes into the parent's array.
		c.msgs[k] = slices.Clip(v)
		c.base[k] = len(v)
	}
	return c
}

// Memory returns a memory's messages.
func (s *Scope) Memory(name string) []json.RawMessage { return s.mem.msgs[name] }

// AppendMemory adds messages to a memory.
func (s *Scope) AppendMemory(name string, msgs ...json.RawMessage) {
	if s.mem.msgs == nil {
		s.mem.msgs = map[string][]json.RawMessage{}
	}
	s.mem.msgs[name] = append(s.mem.msgs[name], msgs...)
	if s.effects != nil {
		for range msgs {
			s.effects.memory = append(s.effects.memory, name)
		}
	}
}

// joinMemories appends what a branch added to its memories.
func (s *Scope) joinMemories(c *Scope) {
	names := make([]string, 0, len(c.mem.msgs))
	for k := range c.mem.msgs {
		names = append(names, k)
	}
	slices.Sort(names)
	for _, k := range names {
		if added := c.mem.msgs[k][c.mem.base[k]:]; len(added) > 0 {
			s.AppendMemory(k, added...)
		}
	}
}

// Turn is one model exchange, recorded as an event.
type Turn struct {
	Model     string         `json:"model"`
	Endpoint  string         `json:"endpoint,omitempty"`
	Attempt   int            `json:"attempt"` // the node's attempt
	Try       int            `json:"try"`     // the HTTP try within it
	Messages  any            `json:"messages,omitempty"`
	Reply     any            `json:"reply,omitempty"`
	Usage     *tokens.Usage  `json:"usage,omitempty"`
	CostUSD   float64        `json:"cost_usd,omitempty"`
	LatencyMS float64        `json:"latency_ms"`
	Class     errclass.Class `json:"class,omitempty"`
	Error     string         `json:"error,omitempty"`
	// WaitMS is the pause before the next try when Error is retried.
	WaitMS float64 `json:"wait_ms,omitempty"`
	// Cached: answered from the response cache, with no network and $0.
	Cached bool `json:"cached,omitempty"`
}

// Tokens is what the turn spent: none when it failed before an answer.
func (t *Turn) Tokens() tokens.Usage {
	if t.Usage == nil {
		return tokens.Usage{}
	}
	return *t.Usage
}

// ToolCall is one tool an agent called, recorded as an event.
type ToolCall struct {
	Name   string `json:"name"`
	Args   any    `json:"args,omitempty"`
	Result any    `json:"result,omitempty"`
	Error  string `json:"error,omitempty"`
}

// Attempt is the node's current attempt, from 1.
func (s *Scope) Attempt() int { return s.attempt }

// Pipeline is the pipeline this scope runs (a called one, inside a call).
func (s *Scope) Pipeline() *dsl.Pipeline { return s.pipeline }

// UserFile reports whether path is text the local user gave as an input
// of the pipeline that was run (not a declared default, nor inputs from a
// remote caller, Options.RemoteInputs): a file named there is the user's
// choice, which an image may be read from where it is rather than inside
// the pipeline directory.
func (s *Scope) UserFile(path string) bool { return slices.Contains(s.run.userFiles, path) }

// RunID is the run's id.
func (s *Scope) RunID() string { return s.run.id }
