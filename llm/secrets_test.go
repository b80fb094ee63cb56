package llm

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/flowrun/flowrun/llm/llmtest"
)

// TestKeyNeverLeaks drives every failure path with a server that echoes
// the Authorization header back, and looks for the key everywhere the
// client writes: errors (and their chains), observed exchanges and the
// cassette.
func TestKeyNeverLeaks(t *testing.T) {
	srv := llmtest.New(t)
	echo := func(status int) func(llmtest.Request) llmtest.Reply {
		return func(r llmtest.Request) llmtest.Reply {
			return llmtest.Error(status, "Incorrect API key provided: "+r.Header.Get("Authorization"))
		}
	}
	rec := NewCassette()
	c, _ := testClient(t, srv, func(o *Options) { o.Record = rec; o.MaxAttempts = 2 })
	var obs observed
	var outputs []string
	call := func(text string) {
		resp, err := c.Complete(context.Background(), Request{
			Key: Key{Node: "n", Iteration: 1, Attempt: 1}, Model: model("gpt-4.1"),
			Messages: userSays(text), Observe: obs.observe,
		})
		outputs = append(outputs, fmt.Sprintf("%v %+v %#v", err, err, resp))
		for e := err; e != nil; e = errors.Unwrap(e) {
			outputs = append(outputs, e.Error(), fmt.Sprintf("%+v", e))
		}
	}
	for _, status := range []int{401, 403, 404, 400, 429, 500} {
		srv.Handle(echo(status))
		call(fmt.Sprintf("status %d", status))
	}
	srv.Handle(func(llmtest.Request) llmtest.Reply { return llmtest.Reply{Body: `{"broken": "` + fakeKey} })
	call("malformed")
	srv.Handle(func(llmtest.Request) llmtest.Reply { return llmtest.Text("fine") })
	call("a prompt that pastes the key by mistake: " + fakeKey)

	if got := srv.Requests()[0].Header.Get("Authorization"); got != "Bearer "+fakeKey {
		t.Fatalf("the key was not sent (Authorization %q)", got)
	}
	for _, x := range obs.all() {
		outputs = append(outputs, fmt.Sprintf("%+v", x))
		if x.Err != nil {
			outputs = append(outputs, x.Err.Error())
		}
	}
	path := filepath.Join(t.TempDir(), "c.yaml")
	if err := rec.WriteFile(path); err != nil {
		t.Fatal(err)
	}
	file, _ := os.ReadFile(path)
	outputs = append(outputs, string(file))
	for i, out := range outputs {
		if strings.Contains(out, fakeKey) || strings.Contains(out, "FAKEKEY") {
			t.Errorf("output %d leaks the key: %s", i, out)
		}
	}
	if !strings.Contains(string(file), "[redacted]") {
		t.Error("the cassette shows no redaction of the pasted key")
	}
}

// A model's reply that repeats part of the key (OpenAI's masked form, its
// first 20 characters) or writes it JSON-escaped in tool-call arguments
// reaches the cassette with no run of eight characters of the key, raw or
// escaped.
func TestRepliedPiecesOfTheKeyAreRedacted(t *testing.T) {
	srv := llmtest.New(t)
	masked := fakeKey[:8] + "****" + fakeKey[len(fakeKey)-4:]
	srv.Push(llmtest.Text("Your key "+masked+" starts "+fakeKey[:20]+"."),
		llmtest.Reply{ToolCalls: []llmtest.ToolCall{{Name: "save", Arguments: `{"key": "\u0073` + fakeKey[1:] + `"}`}}})
	rec := NewCassette()
	c, _ := testClient(t, srv, func(o *Options) { o.Record = rec })
	for i := 1; i <= 2; i++ {
		if _, err := c.Complete(context.Background(), Request{Key: Key{Node: "n", Iteration: i, Attempt: 1}, Model: model("gpt-4.1"), Messages: userSays("hi")}); err != nil {
			t.Fatal(err)
		}
	}
	path := filepath.Join(t.TempDir(), "c.yaml")
	if err := rec.WriteFile(path); err != nil {
		t.Fatal(err)
	}
	b, _ := os.ReadFile(path)
	file := string(b)
	for i := 0; i+8 <= len(fakeKey); i++ {
		if strings.Contains(file, fakeKey[i:i+8]) {
			t.Fatalf("the cassette holds %q of the key:\n%s", fakeKey[i:i+8], file)
		}
	}
	if strings.Contains(file, "u0073") || strings.Count(file, "[redacted]") < 3 {
		t.Fatalf("the cassette keeps the escaped key or shows too few redactions:\n%s", file)
	}
}
