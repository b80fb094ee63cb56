package dsl

import (
	"strings"
	"testing"

	"github.com/flowrun/flowrun/sandbox/bounds"
)

// TestHardening11SandboxLimitsBounded: sandbox limits a wasm32 guest cannot
// have are errors at validation, with file:line:col, never a number that
// overflows later; the largest allowed values decode exactly.
func TestHardening11SandboxLimitsBounded(t *testing.T) {
	pipeline := func(limits string) string {
		return "version: 1\nname: l\nnodes:\n  - id: c\n    code:\n      language: python\n      source: \"def f(): return 1\"\n      call: f\n      limits: " + limits + "\n"
	}
	for _, c := range []struct{ limits, want string }{
		{"{memory_mb: 100000}", `p.yaml:9:27: error: node "c": code.limits.memory_mb: 100000 is more than 4096`},
		{"{memory_mb: 268435456}", `p.yaml:9:27: error: node "c": code.limits.memory_mb: 268435456 is more than 4096`},
		{"{memory_mb: 4097}", `p.yaml:9:27: error: node "c": code.limits.memory_mb: 4097 is more than 4096`},
		{"{max_output_kb: 9007199254740993}", `p.yaml:9:31: error: node "c": code.limits.max_output_kb: 9007199254740993 is more than 262144`},
		{"{max_output_kb: 1e30}", `p.yaml:9:31: error: node "c": code.limits.max_output_kb: 1e30 is more than 262144`},
	} {
		p, ds := LoadSource("p.yaml", []byte(pipeline(c.limits)))
		if p != nil || !strings.Contains(ds.String(), c.want) {
			t.Errorf("%s: want %q, got:\n%s", c.limits, c.want, ds)
		}
	}
	p, ds := LoadSource("p.yaml", []byte(pipeline("{memory_mb: 4096, max_output_kb: 262144}")))
	if p == nil {
		t.Fatalf("the largest limits must validate:\n%s", ds)
	}
	l := p.Nodes[0].Code().Limits
	if l.MemoryMB != bounds.MaxMemoryMB || l.MaxOutputBytes != bounds.MaxOutputBytes {
		t.Fatalf("decoded %+v", l)
	}
}

// Every numeric field of the pipeline schema has a maximum, except those
// that bound nothing (seed, an input's own schema keywords, literal
// values) and the sandbox limits, which boundedInt checks with their own
// reason. A field added without one fails here.
func TestEveryNumericLimitHasAMaximum(t *testing.T) {
	unbounded := map[string]bool{"seed": true, "memory_mb": true, "max_output_kb": true}
	_, doc := pipelineSchema()
	var walk func(path string, v any)
	walk = func(path string, v any) {
		switch x := v.(type) {
		case map[string]any:
			if props, ok := x["properties"].(map[string]any); ok && !strings.Contains(path, "$defs/input") {
				for name, p := range props {
					p, _ := p.(map[string]any)
					if _, ok := p["maximum"]; !ok && numeric(p) && !unbounded[name] {
						t.Errorf("%s/%s: a number with no maximum", path, name)
					}
				}
			}
			for k, c := range x {
				walk(path+"/"+k, c)
			}
		case []any:
			for _, c := range x {
				walk(path, c)
			}
		}
	}
	walk("", doc)
}
