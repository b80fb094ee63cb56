package nodes_test

import (
	"context"
	"reflect"
	"sync"
	"testing"

	"github.com/flowrun/flowrun/runtime"
)

// pureCheckpoints records, by path, whether each checkpoint was Pure.
type pureCheckpoints struct {
	mu   sync.Mutex
	pure map[string]bool
}

func (c *pureCheckpoints) Save(_ context.Context, cp *runtime.Checkpoint) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.pure == nil {
		c.pure = map[string]bool{}
	}
	c.pure[cp.Path] = cp.Pure
	return nil
}

// answerAll answers every question with true.
type answerAll struct{}

func (answerAll) Answer(context.Context, runtime.Question) (any, bool, error) { return true, true, nil }

// TestPureCheckpoints pins down which nodes' checkpoints may be grouped
// (Pure): those that acted on the run's state only. A node with an effect
// outside the run (a tool, a question, a confirmation, a map whose skipped
// items' failures have no checkpoint of their own) must be stored at once.
func TestPureCheckpoints(t *testing.T) {
	p := load(t, `
version: 1
name: pure
state: {n: 0, m: {default: 0, merge: replace}}
nodes:
  - id: rounds
    loop:
      max_iterations: 1
      body:
        - id: work
          tool: {name: read_file, args: {value: 1}}
        - id: count
          set: {n: state.n + 1}
        - id: route
          branch:
            - when: state.n > 5
              next: break
  - id: fan
    map:
      over: '[1]'
      body:
        - id: item
          set: {m: item}
  - id: skipping
    map:
      over: '[1]'
      on_item_error: skip
      body:
        - id: inner
          set: {m: item}
  - id: both
    parallel:
      branches:
        a:
          - id: pa
            set: {n: 2}
  - id: sub
    call: {pipeline: sub.yaml, inputs: {x: 1}}
  - id: careful
    set: {n: 3}
    confirm: true
  - id: question
    ask: {question: "ok?", schema: {type: boolean}}
outputs: {n: state.n}
`, map[string]string{"sub.yaml": `
version: 1
name: sub
inputs: {x: {type: integer}}
nodes:
  - id: twice
    set: {}
outputs: {x: inputs.x}
`})
	cps := &pureCheckpoints{}
	res := runtime.Run(context.Background(), kindsWith(echo{}), p, nil, runtime.Options{Checkpointer: cps, Human: answerAll{}})
	mustComplete(t, res)
	want := map[string]bool{
		"rounds[1]/work": false, "rounds[1]/count": true, "rounds[1]/route": true, "rounds": true,
		"fan[0]/item": true, "fan": true,
		"skipping[0]/inner": true, "skipping": false,
		"both[a]/pa": true, "both": true,
		"sub/twice": true, "sub": true,
		"careful":  false,
		"question": false,
	}
	if !reflect.DeepEqual(cps.pure, want) {
		t.Fatalf("pure by path:\n got %v\nwant %v", cps.pure, want)
	}
}
