package dsl

import (
	"strings"
	"testing"
)

func TestModelMaxReplyBytes(t *testing.T) {
	const src = "version: 1\nname: t\nmodels: {default: {model: gpt-4.1-mini, max_reply_bytes: %s}}\nnodes:\n  - id: a\n    llm: {prompt: hi}\n"
	p := loadString(t, strings.Replace(src, "%s", "2097152", 1))
	if got := p.Models["default"].MaxReplyBytes; got != 2<<20 {
		t.Errorf("max_reply_bytes read as %d, want 2097152", got)
	}
	for value, says := range map[string]string{
		"0":          "must be >= 1",
		"2147483648": "more than 1073741824",
		"64MiB":      "integer",
	} {
		_, ds := LoadSource("testdata/inline.yaml", []byte(strings.Replace(src, "%s", value, 1)))
		if got := ds.String(); !strings.Contains(got, "max_reply_bytes") || !strings.Contains(got, says) {
			t.Errorf("max_reply_bytes: %s gives %q, want an error at the field saying %q", value, got, says)
		}
	}
}
