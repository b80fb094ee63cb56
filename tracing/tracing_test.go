package tracing

import (
	"context"
	"testing"

	"go.opentelemetry.io/otel/trace/noop"
)

func TestIterationIsTheInnermostNumericIndex(t *testing.T) {
	for path, want := range map[string]int{"refine[2]/route": 2, "a[1]/b[3]/c": 3, "a[4]/both[long]/x": 4, "plain": -1, "both[long]/longest": -1} {
		got, ok := iteration(path)
		if !ok {
			got = -1
		}
		if got != want {
			t.Errorf("iteration(%q) = %d, want %d", path, got, want)
		}
	}
}

func TestParentIsTheEnclosingNode(t *testing.T) {
	type mark struct{}
	r := &runTrace{ctx: context.Background(), nodes: map[string]nodeSpan{}}
	for _, p := range []string{"rounds", "rounds[2]/inner", "both"} {
		r.nodes[p] = nodeSpan{ctx: context.WithValue(context.Background(), mark{}, p), span: noop.Span{}}
	}
	for path, want := range map[string]string{"rounds[2]/solve": "rounds", "rounds[2]/inner[1]/x": "rounds[2]/inner",
		"both[long]/longest": "both", "top": ""} {
		got, _ := r.parent(path).Value(mark{}).(string)
		if got != want {
			t.Errorf("parent(%q) = %q, want %q", path, got, want)
		}
	}
}

func TestTraceIDIsTheRunsOwn(t *testing.T) {
	if TraceID("run-a") != TraceID("run-a") || TraceID("run-a") == TraceID("run-b") || !TraceID("run-a").IsValid() {
		t.Error("a run's trace id is not derived from its id alone")
	}
}
