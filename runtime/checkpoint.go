package runtime

import (
	"context"
	"encoding/json"
	"sync"
	"sync/atomic"

	"github.com/flowrun/flowrun/dsl"
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
	// Steps is the number of steps the nodes checkpointed so far (this one
	// included) took, where a resume starts counting: nodes that were
	// still running (an enclosing loop, map items in flight) run again on
	// resume and count then, so a resumed run counts each step once.
	// CostUSD and Tokens are the run's totals when the node finished.
	Steps   int64   `json:"steps"`
	CostUSD float64 `json:"cost_usd,omitempty"`
	Tokens  int64   `json:"tokens,omitempty"`
	// Pure says the node acted on the run's own state only: a set or
	// branch node, or the bookkeeping of a loop, map, parallel or call
	// node (their nested nodes have checkpoints of their own). Running it
	// again from the checkpoints before it has no effect outside the run.
	// A checkpoint that is not pure follows an external effect (a model
	// call, a tool, code, a question, a confirmation) that a resume must
	// never repeat. It is not stored: it only tells the Checkpointer how
	// urgent the checkpoint is.
	Pure bool `json:"-"`
	// InFlight, when set, makes this the record of an effect a node has
	// started and not finished (see Scope.RecordInFlight), not a finished
	// node's checkpoint: its Path is the node's path with
	// InFlightSuffix, and a resume gives it back to the node instead of
	// restoring the node.
	InFlight *InFlight `json:"in_flight,omitempty"`
}

// InFlight is what a node recorded about an effect under way, under a key
// of its own: a model call running on a server, by the id that re-attaches
// to it.
type InFlight struct {
	Key   string          `json:"key"`
	Value json.RawMessage `json:"value"`
}

// InFlightSuffix ends the Path of an in-flight record, so that nothing
// takes it for a finished node.
const InFlightSuffix = "#in-flight"

// Checkpointer stores checkpoints. Save is called once per finished node,
// from the goroutine that ran it, never concurrently, in sequence order.
//
// When Save returns for a checkpoint that is not Pure, that checkpoint and
// every one before it must be stored durably. A Pure checkpoint may be kept
// back and stored later, so that pure nodes' checkpoints can be grouped
// into one write, provided checkpoints are stored in sequence order (the
// stored ones are always a prefix of the run's history, which a resume
// can continue from) and all are stored when the run ends. Losing pure
// checkpoints to a crash only makes a resume run those nodes again.
type Checkpointer interface {
	Save(ctx context.Context, cp *Checkpoint) error
}

// GroupCheckpointer is a Checkpointer that can store the checkpoints of
// nodes that finish at about the same time (map items, parallel branches)
// with one write. The runtime calls Add where it would call Save, in
// sequence order and never concurrently, and then, holding no lock, the
// function Add returned, which returns once the checkpoint is stored as
// Save would have stored it. Checkpoints that arrive while one write is
// under way can then go together in the next.
type GroupCheckpointer interface {
	Checkpointer
	Add(ctx context.Context, cp *Checkpoint) (wait func() error, err error)
}

// PureExecutor is implemented by executors whose node n, once finished,
// has had no effect outside the run (see Checkpoint.Pure). Executors that
// do not implement it are taken to have external effects.
type PureExecutor interface {
	Pure(n *dsl.Node) bool
}

// journal is a run's checkpoint history: what earlier attempts finished,
// and where new checkpoints go.
type journal struct {
	mu       sync.Mutex
	done     map[string]*Checkpoint
	inFlight map[string]json.RawMessage // by node path and the node's key
	seq      int64
	steps    int64 // the steps that the checkpoints so far account for
	save     Checkpointer
}

func newJournal(save Checkpointer, restore []*Checkpoint) *journal {
	if save == nil && len(restore) == 0 {
		return nil
	}
	j := &journal{done: make(map[string]*Checkpoint, len(restore)), save: save}
	for _, cp := range restore {
		j.seq = max(j.seq, cp.Seq)
		if f := cp.InFlight; f != nil {
			j.keepInFlight(f)
			continue
		}
		j.done[cp.Path] = cp
	}
	j.steps = latest(restore).Steps
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

func (j *journal) keepInFlight(f *InFlight) {
	if j.inFlight == nil {
		j.inFlight = map[string]json.RawMessage{}
	}
	j.inFlight[f.Key] = f.Value
}

// inFlightRecord returns what was last recorded in flight under key.
func (j *journal) inFlightRecord(key string) (json.RawMessage, bool) {
	if j == nil {
		return nil, false
	}
	j.mu.Lock()
	defer j.mu.Unlock()
	v, ok := j.inFlight[key]
	return v, ok
}

// commit numbers and saves a checkpoint. own is the steps its node took:
// its own and those of nested nodes that have no checkpoints (a tool
// pipeline's); nested nodes that do have checkpoints count in theirs.
func (j *journal) commit(ctx context.Context, cp *Checkpoint, own int64) error {
	j.mu.Lock()
	j.seq++
	cp.Seq = j.seq
	j.steps += own
	cp.Steps = j.steps
	if f := cp.InFlight; f != nil {
		j.keepInFlight(f)
	}
	if g, ok := j.save.(GroupCheckpointer); ok {
		wait, err := g.Add(ctx, cp)
		j.mu.Unlock()
		if err != nil {
			return err
		}
		return wait()
	}
	defer j.mu.Unlock()
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

// stepCounter is the context of a node that keeps checkpoints while it
// runs: it counts the steps the node takes, its own and those of nested
// nodes that have no checkpoints of their own (a tool pipeline's), which
// its checkpoint accounts for (see Checkpoint.Steps). One allocation.
type stepCounter struct {
	context.Context
	steps atomic.Int64
}

type stepCounterKey struct{}

func (c *stepCounter) Value(key any) any {
	if key == (stepCounterKey{}) {
		return c
	}
	return c.Context.Value(key)
}

// countStep charges a step to the innermost node with a stepCounter.
func countStep(ctx context.Context) {
	if c, ok := ctx.Value(stepCounterKey{}).(*stepCounter); ok {
		c.steps.Add(1)
	}
}
