package dsl

import (
	"slices"
	"strings"
	"testing"

	"github.com/flowrun/flowrun/errclass"
)

func TestRetryOnTakesTheRetryableClasses(t *testing.T) {
	var names []string
	for _, c := range errclass.Retryable() {
		names = append(names, string(c))
	}
	p := loadString(t, `version: 1
name: t
state: {x: 0}
nodes:
  - id: n
    set: {x: 1}
    retry: {max_attempts: 2, retry_on: [`+strings.Join(names, ", ")+`]}
`)
	if got := p.Nodes[0].Retry.RetryOn; !slices.Equal(got, errclass.Retryable()) {
		t.Errorf("RetryOn = %q, want %q", got, errclass.Retryable())
	}
	_, ds := LoadSource("testdata/inline.yaml", []byte(`version: 1
name: t
state: {x: 0}
nodes:
  - id: n
    set: {x: 1}
    retry: {retry_on: [compile_error]}
`))
	if !ds.HasErrors() || !strings.Contains(ds.String(), "retry_on") || !strings.Contains(ds.String(), `"invalid_output"`) {
		t.Errorf("retry_on: [compile_error] (not retryable): %s", ds)
	}
}

func TestLoopAndMapPoliciesAreTyped(t *testing.T) {
	p := loadString(t, `version: 1
name: t
state:
  x: {default: 0, merge: sum}
nodes:
  - id: plain_loop
    loop: {max_iterations: 2, until: "true", body: [{id: a, set: {x: 1}}]}
  - id: failing_loop
    loop: {max_iterations: 2, until: "true", on_exhausted: fail, body: [{id: b, set: {x: 1}}]}
  - id: plain_map
    map: {over: "[1]", body: [{id: c, set: {x: 1}}]}
  - id: skipping_map
    map: {over: "[1]", on_item_error: skip, body: [{id: d, set: {x: 1}}]}
`)
	if got := p.Nodes[0].Loop().OnExhausted; got != ExhaustedContinue {
		t.Errorf("default on_exhausted = %q", got)
	}
	if got := p.Nodes[1].Loop().OnExhausted; got != ExhaustedFail {
		t.Errorf("on_exhausted: fail = %q", got)
	}
	if got := p.Nodes[2].Map().OnItemError; got != ItemErrorFail {
		t.Errorf("default on_item_error = %q", got)
	}
	if got := p.Nodes[3].Map().OnItemError; got != ItemErrorSkip {
		t.Errorf("on_item_error: skip = %q", got)
	}
}
