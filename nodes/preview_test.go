package nodes_test

import (
	"strings"
	"testing"

	"github.com/flowrun/flowrun/runtime"
	"github.com/flowrun/flowrun/sandbox"
)

// TestConfirmPreviewsCode: a confirmation of a code node carries the
// code it will run, rendered with the run's values, and the output of
// the node before it; nothing runs while it waits.
func TestConfirmPreviewsCode(t *testing.T) {
	p := load(t, `
version: 1
name: t
state: {n: 0}
nodes:
  - id: count
    set: {n: 6}
  - id: compute
    confirm: true
    code:
      language: go
      source: |
        package main

        func f() int { return ${{ state.n }} * 7 }
      call: f
outputs: {r: nodes.compute.result}
`, nil)
	res, _ := run(t, p, codeKinds(t, sandbox.Go), nil)
	if res.Status != runtime.StatusWaiting || res.Pending == nil || res.Pending.Context == nil {
		t.Fatalf("want waiting on the confirmation with its context: %+v", res)
	}
	c := res.Pending.Context
	if c.Kind != "code" || c.Language != "go" || !strings.Contains(c.Code, "func f() int { return 6 * 7 }") || c.After != "count" {
		t.Errorf("the confirmation's context: %+v", c)
	}
}
