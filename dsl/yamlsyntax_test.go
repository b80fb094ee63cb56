package dsl

import "testing"

// earlyClosingQuote names only a quote after which the value goes on:
// what may legally follow a closing quote is not one.
func TestEarlyClosingQuote(t *testing.T) {
	for _, c := range []struct {
		line, fixed string
		open, at    int
	}{
		{`  x: "say "hi" now"`, `x: "say \"hi\" now"`, 5, 10},
		{`  - "a "b" c"`, `- "a \"b\" c"`, 4, 7},
		{`  "k": "v "w""`, `"k": "v \"w\""`, 7, 10},
		{`  x: "a \"b" c"`, `x: "a \"b\" c"`, 5, 11},
		{`  x: "closed" # a comment`, "", 0, 0},
		{`  set: {x: "a", y: "b"}`, "", 0, 0},
		{`  xs: ["a", "b"]`, "", 0, 0},
		{`  x: "never closed`, "", 0, 0},
		{`  x: plain`, "", 0, 0},
	} {
		open, at, fixed, ok := earlyClosingQuote(c.line)
		if ok != (c.fixed != "") || fixed != c.fixed || open != c.open || at != c.at {
			t.Errorf("earlyClosingQuote(%q) = %d, %d, %q, %v; want %d, %d, %q", c.line, open, at, fixed, ok, c.open, c.at, c.fixed)
		}
	}
}
