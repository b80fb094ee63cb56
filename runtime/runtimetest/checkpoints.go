// Package runtimetest holds what tests of the runtime, of node kinds and
// of the packages that run pipelines share: checkpoints kept as the store
// keeps them, to kill and resume runs without a store, and a sink that
// keeps a run's events for a test to look at.
package runtimetest

import (
	"context"
	"encoding/json"
	"fmt"
	"maps"
	"sync"

	"github.com/flowrun/flowrun/jsonvalue"
	"github.com/flowrun/flowrun/runtime"
)

// Checkpoints is a runtime.Checkpointer that keeps checkpoints as the
// store does, encoded as JSON, so that a resume from them sees values as
// a resume from the store would.
type Checkpoints struct {
	mu   sync.Mutex
	raw  [][]byte
	pure map[string]bool
}

// Save keeps cp.
func (c *Checkpoints) Save(_ context.Context, cp *runtime.Checkpoint) error {
	b, err := json.Marshal(cp)
	if err != nil {
		return err
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	c.raw = append(c.raw, b)
	if c.pure == nil {
		c.pure = map[string]bool{}
	}
	c.pure[cp.Path] = cp.Pure
	return nil
}

// Pure says, by node path, whether the last checkpoint saved for it was
// Pure (which the JSON form does not keep).
func (c *Checkpoints) Pure() map[string]bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	return maps.Clone(c.pure)
}

// Len is the number of checkpoints saved.
func (c *Checkpoints) Len() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return len(c.raw)
}

// Prefix decodes the first k checkpoints, as a run killed after its k-th
// checkpoint left them: JSON numbers come back as int where integral, as
// the store returns them.
func (c *Checkpoints) Prefix(k int) ([]*runtime.Checkpoint, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	out := make([]*runtime.Checkpoint, 0, k)
	for i, b := range c.raw[:k] {
		var cp runtime.Checkpoint
		if err := json.Unmarshal(b, &cp); err != nil {
			return nil, fmt.Errorf("checkpoint %d: %w", i+1, err)
		}
		v, err := jsonvalue.Decode(b)
		if err != nil {
			return nil, fmt.Errorf("checkpoint %d: %w", i+1, err)
		}
		raw := v.(map[string]any)
		cp.Output = raw["output"]
		if s, ok := raw["state"].(map[string]any); ok {
			cp.State = s
		}
		if n, ok := raw["nodes"].(map[string]any); ok {
			cp.Nodes = n
		}
		out = append(out, &cp)
	}
	return out, nil
}
