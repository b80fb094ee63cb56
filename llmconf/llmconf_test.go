package llmconf

import (
	"strings"
	"testing"
	"time"
)

func TestOverride(t *testing.T) {
	responses := &Model{Name: "deep", Model: "o3", API: "responses"}
	chat := &Model{Name: "fast", Model: "gpt-4.1-mini", API: "chat"}
	cases := []struct {
		m          *Model
		spec       string
		model      string
		background bool
		poll       time.Duration
		err        string
	}{
		{m: chat, spec: "gpt-4.1", model: "gpt-4.1"},
		{m: responses, spec: "o3-pro,background", model: "o3-pro", background: true},
		{m: responses, spec: ",background,poll=30s", model: "o3", background: true, poll: 30 * time.Second},
		{m: chat, spec: ",background", err: `model "fast": background needs the Responses API`},
		{m: chat, spec: "o3,responses,background", model: "o3", background: true},
		{m: responses, spec: "o3,poll=soon", err: `model "deep": poll=soon is not a positive duration`},
		{m: responses, spec: "o3,backgorund", err: `model "deep": unknown option "backgorund" (the options are responses, background and poll=DURATION)`},
	}
	for _, c := range cases {
		got, err := Override(c.m, c.spec)
		if c.err != "" {
			if err == nil || !strings.Contains(err.Error(), c.err) {
				t.Errorf("Override(%s, %q) = %v, want error %q", c.m.Name, c.spec, err, c.err)
			}
			continue
		}
		if err != nil {
			t.Fatalf("Override(%s, %q): %v", c.m.Name, c.spec, err)
		}
		if got.Model != c.model || got.Background != c.background || got.Poll != c.poll {
			t.Errorf("Override(%s, %q) = model %q background %v poll %s", c.m.Name, c.spec, got.Model, got.Background, got.Poll)
		}
	}
	if responses.Background || responses.Model != "o3" {
		t.Error("Override changed the model it was given")
	}
}
