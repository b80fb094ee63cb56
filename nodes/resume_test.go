package nodes_test

import (
	"context"
	"encoding/json"
	"reflect"
	"sort"
	"strings"
	"sync"
	"testing"

	"github.com/flowrun/flowrun/dsl"
	"github.com/flowrun/flowrun/jsonvalue"
	"github.com/flowrun/flowrun/runtime"
)

// memoryCheckpoints keeps checkpoints as the store would: encoded as JSON.
type memoryCheckpoints struct {
	mu  sync.Mutex
	raw [][]byte
}

func (m *memoryCheckpoints) Save(_ context.Context, cp *runtime.Checkpoint) error {
	b, err := json.Marshal(cp)
	if err != nil {
		return err
	}
	m.mu.Lock()
	m.raw = append(m.raw, b)
	m.mu.Unlock()
	return nil
}

func (m *memoryCheckpoints) prefix(t *testing.T, k int) []*runtime.Checkpoint {
	var out []*runtime.Checkpoint
	for _, b := range m.raw[:k] {
		var cp runtime.Checkpoint
		if err := json.Unmarshal(b, &cp); err != nil {
			t.Fatal(err)
		}
		// Values come back as the store returns them: JSON numbers as int
		// where integral.
		v, _ := jsonvalue.Decode(b)
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
	return out
}

// pathProbe records the path of every call.
type pathProbe struct {
	probe
	mu    sync.Mutex
	paths []string
}

func (p *pathProbe) Execute(ctx context.Context, s *runtime.Scope, n *dsl.Node) (runtime.Outcome, error) {
	p.mu.Lock()
	p.paths = append(p.paths, s.Path(n.ID))
	p.mu.Unlock()
	return p.probe.Execute(ctx, s, n)
}

const resumable = `
version: 1
name: resumable
state: {total: 0, log: [], best: null}
nodes:
  - id: rounds
    loop:
      max_iterations: 4
      until: state.total >= 150
      body:
        - id: fan
          map:
            over: '[1, 2, 3]'
            max_concurrency: 2
            result: int(nodes.work)
            body:
              - id: work
                tool: {name: read_file, args: {value: "${{ item * loop_it }}"}}
          set: {total: state.total + sum(nodes.fan)}
        - id: both
          parallel:
            branches:
              a:
                - id: pa
                  tool: {name: read_file, args: {value: '"a"'}}
                  set: {log: 'concat(state.log, ["a"])'}
              b:
                - id: pb
                  tool: {name: read_file, args: {value: '"b"'}}
                  set: {best: state.total}
        - id: route
          branch:
            - when: state.total > 100
              next: break
  - id: sub
    call: {pipeline: sub.yaml, inputs: {x: "${{ state.total }}"}}
  - id: flaky
    set: {best: 'fromJSON("{")'}
    on_error: continue
outputs: {total: state.total, log: state.log, best: state.best, sub: nodes.sub, fan: nodes.fan}
`

const resumableSub = `
version: 1
name: sub
inputs: {x: {type: integer}}
state: {y: 0}
nodes:
  - id: twice
    tool: {name: read_file, args: {value: "${{ inputs.x * 2 }}"}}
    set: {y: int(nodes.twice)}
outputs: {y: state.y}
`

// TestResumeFromEveryCheckpoint kills a run after each of its checkpoints
// in turn (by resuming from that prefix) and checks that the resumed run
// ends exactly like an uninterrupted one and never redoes a finished node.
func TestResumeFromEveryCheckpoint(t *testing.T) {
	src := resumable
	p := load(t, strings.ReplaceAll(src, "item * loop_it", "item * 10"), map[string]string{"sub.yaml": resumableSub})
	full := &memoryCheckpoints{}
	fullProbe := &pathProbe{}
	res := runtime.Run(context.Background(), kindsWith(fullProbe), p, nil, runtime.Options{Checkpointer: full})
	mustComplete(t, res)
	want := res.Outputs
	if len(full.raw) < 15 {
		t.Fatalf("only %d checkpoints", len(full.raw))
	}
	for k := 0; k <= len(full.raw); k++ {
		restore := full.prefix(t, k)
		restored := map[string]bool{}
		for _, cp := range restore {
			restored[cp.Path] = true
		}
		pr := &pathProbe{}
		again := &memoryCheckpoints{}
		res := runtime.Run(context.Background(), kindsWith(pr), p, nil, runtime.Options{Checkpointer: again, Restore: restore})
		mustComplete(t, res)
		if !reflect.DeepEqual(normalize(t, res.Outputs), normalize(t, want)) {
			t.Fatalf("resume after %d checkpoints: outputs %v\nwant %v", k, res.Outputs, want)
		}
		for _, path := range pr.paths {
			if restored[path] {
				t.Fatalf("resume after %d checkpoints ran %s again", k, path)
			}
		}
		all := append(append([]string{}, pr.paths...), restoredProbePaths(restore, fullProbe.paths)...)
		sort.Strings(all)
		wantPaths := append([]string{}, fullProbe.paths...)
		sort.Strings(wantPaths)
		if !reflect.DeepEqual(all, wantPaths) {
			t.Fatalf("resume after %d checkpoints: probe paths %v\nwant %v", k, all, wantPaths)
		}
	}
}

// restoredProbePaths are the probe calls a restored prefix stands for:
// those whose node, or an enclosing node, was restored.
func restoredProbePaths(restore []*runtime.Checkpoint, probePaths []string) []string {
	var out []string
	for _, pp := range probePaths {
		for _, cp := range restore {
			if pp == cp.Path || (len(pp) > len(cp.Path) && pp[:len(cp.Path)+1] == cp.Path+"/") || (len(pp) > len(cp.Path) && pp[:len(cp.Path)+1] == cp.Path+"[") {
				out = append(out, pp)
				break
			}
		}
	}
	return out
}

func normalize(t *testing.T, v any) any {
	b, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	out, _ := jsonvalue.Decode(b)
	return out
}
