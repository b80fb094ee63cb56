package runtime_test

import (
	"context"
	"strings"
	"testing"

	"github.com/flowrun/flowrun/dsl"
	"github.com/flowrun/flowrun/errclass"
	"github.com/flowrun/flowrun/nodes"
	"github.com/flowrun/flowrun/runtime"
	"github.com/flowrun/flowrun/runtime/runtimetest"
)

// panicky is a tool executor with a bug: it indexes past a slice.
type panicky struct{}

func (panicky) Execute(context.Context, *runtime.Scope, *dsl.Node) (runtime.Outcome, error) {
	var none []int
	_ = none[len(none)+1]
	return runtime.Outcome{}, nil
}

// A panic in a node's executor, in a map item's goroutine too, fails that
// node with class internal and the stack in the event's detail, not in its
// message; on_error routes it like any failure, the other items and nodes
// run, and the process lives on.
func TestPanicInANodeFailsTheNode(t *testing.T) {
	p, ds := dsl.LoadSource("p.yaml", []byte(`
version: 1
name: panics
state: {after: 0}
nodes:
  - id: each
    map:
      over: '1..4'
      max_concurrency: 4
      on_item_error: skip
      body:
        - id: boom
          tool: {name: read_file, args: {path: '"x"'}}
  - id: alone
    tool: {name: read_file, args: {path: '"x"'}}
    on_error: continue
  - id: after
    set: {after: 1}
outputs: {after: state.after, class: nodes.alone.error.class, message: nodes.alone.error.message}
`))
	if p == nil {
		t.Fatal(ds)
	}
	kinds := nodes.Kinds(nodes.Services{})
	kinds[dsl.KindTool] = panicky{}
	var rec runtimetest.Events
	res := runtime.Run(context.Background(), kinds, p, nil, runtime.Options{Sink: &rec})
	if res.Status != runtime.StatusCompleted || res.Outputs["after"] != 1 || res.Outputs["class"] != string(errclass.Internal) {
		t.Fatalf("status %s, err %v, outputs %v", res.Status, res.Err, res.Outputs)
	}
	if msg, _ := res.Outputs["message"].(string); !strings.Contains(msg, "index out of range") || strings.Contains(msg, "goroutine") {
		t.Errorf("the message should name the panic and hold no stack: %q", msg)
	}
	failed := 0
	for _, e := range rec.All() {
		if e.Type != runtime.EventNodeFailed {
			continue
		}
		failed++
		if e.Class != errclass.Internal || !strings.Contains(e.Detail, "panic_test.go") || strings.Contains(e.Error, "goroutine") {
			t.Errorf("node_failed %s: class %q, error %q, detail %.200q", e.Path, e.Class, e.Error, e.Detail)
		}
	}
	if failed != 5 {
		t.Errorf("%d node_failed events, want 5 (four items and one node)", failed)
	}
}
