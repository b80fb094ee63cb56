package runtime

import (
	"context"
	"encoding/json"
	"sync"
)

// Checkpoint is saved after every node that finishes: the node's effects,
// enough to restore it on resume without running it again. A run's
// checkpoints in sequence order are its whole history; the state at any
// checkpoint is what replaying the ones before it produces.
type Checkpoint struct {
	Seq  int64  `json:"seq"`
	Path string `json:"path"`
	// Output is the node's output, Next where it went ("" for the next
	// sibling), State the state variables it wrote (nested nodes included,
	// final values) and Nodes the outputs of nested nodes it made visible
	// in its scope (a loop's body, a parallel node's branches).
	Output any            `json:"output,omitempty"`
	Next   string         `json:"next,omitempty"`
	State  map[string]any `json:"state,omitempty"`
	Nodes  map[string]any `json:"nodes,omitempty"`
	// Memories holds the messages the node appended to each memory.
	Memories map[string][]json.RawMessage `json:"memories,omitempty"`
	// Steps, CostUSD and Tokens are the run's totals when the node finished.
	Steps   int64   `json:"steps"`
	CostUSD float64 `json:"cost_usd,omitempty"`
	Tokens  int64   `json:"tokens,omitempty"`
}

// Checkpointer stores checkpoints. Save is called once per finished node,
// from the goroutine that ran it, never concurrently.
type Checkpointer interface {
	Save(ctx context.Context, cp *Checkpoint) error
}

// journal is a run's checkpoint history: what earlier attempts finished,
// and where new checkpoints go.
type journal struct {
	mu   sync.Mutex
	done map[string]*Checkpoint
	seq  int64
	save Checkpointer
}

func newJournal(save Checkpointer, restore []*Checkpoint) *journal {
	if save == nil && len(restore) == 0 {
		return nil
	}
	j := &journal{done: make(map[string]*Checkpoint, len(restore)), save: save}
	for _, cp := range restore {
		j.done[cp.Path] = cp
		j.seq = max(j.seq, cp.Seq)
	}
	return j
}

// lookup returns the checkpoint of a node that finished in an earlier attempt.
func (j *journal) lookup(path string) *Checkpoint {
	if j == nil || len(j.done) == 0 {
		return nil
	}
	j.mu.Lock()
	defer j.mu.Unlock()
	return j.done[path]
}

func (j *journal) commit(ctx context.Context, cp *Checkpoint) error {
	j.mu.Lock()
	defer j.mu.Unlock()
	j.seq++
	cp.Seq = j.seq
	if j.save == nil {
		return nil
	}
	return j.save.Save(ctx, cp)
}

// latest is the restored checkpoint with the highest sequence number: its
// totals are the run's so far.
func latest(restore []*Checkpoint) *Checkpoint {
	last := &Checkpoint{}
	for _, cp := range restore {
		if cp.Seq >= last.Seq {
			last = cp
		}
	}
	return last
}

// effects records, for one scope, which state variables and node outputs
// were written while a node is open, so that the node's checkpoint can hold
// everything its nested nodes did.
type effects struct {
	state  []string
	nodes  []string
	memory []string // one name per message appended
	open   int      // nodes in progress in this scope
}

type mark struct{ state, nodes, memory int }

func (e *effects) begin() mark {
	e.open++
	return mark{len(e.state), len(e.nodes), len(e.memory)}
}

// end closes a node; when none is open the log is cleared, so a long loop
// at the top of a run does not grow it without bound.
func (e *effects) end() {
	e.open--
	if e.open == 0 {
		e.state, e.nodes, e.memory = e.state[:0], e.nodes[:0], e.memory[:0]
	}
}
