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

// --model NAME=echo runs a model on the echo provider, and any other
// model id takes an offline model back to a server.
func TestOverrideOffline(t *testing.T) {
	chat := &Model{Name: "fast", Model: "gpt-4.1-mini"}
	if m, err := Override(chat, "echo"); err != nil || !m.Offline() || m.Provider != ProviderEcho {
		t.Errorf("echo: %+v, %v", m, err)
	}
	mock := &Model{Name: "fast", Model: "mock", Provider: ProviderMock, MockFile: "r.yaml"}
	if m, err := Override(mock, "gpt-4.1"); err != nil || m.Offline() || m.Model != "gpt-4.1" {
		t.Errorf("gpt-4.1: %+v, %v", m, err)
	}
}

// A mock file's replies are chosen in order by their patterns; each
// problem names its line.
func TestParseMock(t *testing.T) {
	m, err := ParseMock([]byte("replies:\n  - prompt: France\n    text: Paris\n  - input: (?s)grade.*Paris\n    json: {verdict: true}\n  - text: no idea\n"))
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range [][3]string{{"capital of France?", "", "Paris"}, {"Paris", "grade this\nParis", `{"verdict":true}`}, {"Peru", "Peru", "no idea"}} {
		if r, ok := m.Reply(c[0], c[1]); !ok || r.Text != c[2] {
			t.Errorf("%q: %q %v, want %q", c[0], r.Text, ok, c[2])
		}
	}
	for src, want := range map[string]string{
		"replies:\n  - prompt: '('\n    text: x\n": "line 2: prompt: not a regular expression",
		"replies:\n  - promt: x\n    text: x\n":    `line 2: unknown key "promt"`,
		"replies:\n  - prompt: x\n":                "line 2: a reply needs text: or json:",
		"answers: []\n":                            `line 1: unknown key "answers"`,
	} {
		if _, err := ParseMock([]byte(src)); err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("%q: %v, want %q", src, err, want)
		}
	}
}
