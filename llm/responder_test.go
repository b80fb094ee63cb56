package llm

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/flowrun/flowrun/clock"
	"github.com/flowrun/flowrun/errclass"
	"github.com/flowrun/flowrun/llmconf"
)

// replies is a Responder that gives its replies in order.
type replies struct {
	keys []Key
	next []any // a Reply or an error
}

func (r *replies) Respond(_ context.Context, k Key) (Reply, error) {
	r.keys = append(r.keys, k)
	v := r.next[0]
	r.next = r.next[1:]
	if err, ok := v.(error); ok {
		return Reply{}, err
	}
	return v.(Reply), nil
}

type classed struct{ class errclass.Class }

func (c classed) Error() string         { return "mocked " + string(c.class) }
func (c classed) Class() errclass.Class { return c.class }

// A Responder's answers go through the client as a server's would: a
// rate limit is retried on the client's clock (a fake one: no wait), a
// reply that breaks the schema gets a repair turn, the usage it reports
// is priced, and no endpoint or key is needed.
func TestResponderRepliesAreRetriedRepairedAndPriced(t *testing.T) {
	r := &replies{next: []any{
		classed{errclass.RateLimit},
		Reply{Text: `{"verdict": 1}`},
		Reply{Text: `{"verdict": "ACCEPT"}`, Usage: Usage{Prompt: 1000, Completion: 100, Total: 1100}},
	}}
	fake := clock.NewFake(time.Time{})
	var obs observed
	c := New(Options{Respond: r, Env: func(string) (string, bool) { return "", false }, Now: fake.Now, Sleep: fake.Sleep})
	schema := map[string]any{"type": "object", "properties": map[string]any{"verdict": map[string]any{"type": "string"}}, "required": []any{"verdict"}}
	resp, err := c.Complete(context.Background(), Request{Key: Key{Node: "judge"}, Model: model("gpt-4.1-mini"), Messages: userSays("judge"),
		OutputSchema: schema, RepairRetries: 1, Observe: obs.observe})
	if err != nil {
		t.Fatal(err)
	}
	if v, _ := resp.JSON.(map[string]any); v["verdict"] != "ACCEPT" || resp.Turns != 2 || resp.CostUSD <= 0 {
		t.Errorf("json %v, %d turns, cost %v", resp.JSON, resp.Turns, resp.CostUSD)
	}
	if len(fake.Slept()) != 1 || len(r.keys) != 3 || r.keys[0].Node != "judge" {
		t.Errorf("slept %v; asked %v", fake.Slept(), r.keys)
	}
	if x := obs.all(); len(x) != 3 || x[0].Class != errclass.RateLimit || x[0].Endpoint != "responder" {
		t.Errorf("observed %+v", x)
	}
}

// An error without a class is critical: not retried.
func TestResponderErrorWithoutClassIsCritical(t *testing.T) {
	r := &replies{next: []any{errors.New("no mock")}}
	c := New(Options{Respond: r})
	_, err := c.Complete(context.Background(), Request{Key: Key{Node: "n"}, Model: model("gpt-4.1-mini"), Messages: userSays("x")})
	if errclass.Of(err) != errclass.Critical || len(r.keys) != 1 {
		t.Errorf("%v (class %s) after %d tries", err, errclass.Of(err), len(r.keys))
	}
}

// A Responder with no answer for a call leaves it to an offline model,
// which answers as it would in a run (a test's unmocked node on echo);
// any other model fails the call with the Responder's message.
func TestResponderLeavesUnansweredCallsToOfflineModels(t *testing.T) {
	noAnswer := NoAnswer(`flowrun test: no mock for node "a"`)
	r := &replies{next: []any{noAnswer, noAnswer, Reply{Text: "mocked"}}}
	c := New(Options{Respond: r, Env: func(string) (string, bool) { return "", false }})
	echo := &llmconf.Model{Name: "default", Model: "echo", Provider: llmconf.ProviderEcho}
	var seen []Exchange
	resp, err := c.Complete(context.Background(), Request{Key: Key{Node: "a"}, Model: echo, Messages: userSays("say this back"),
		Observe: func(x Exchange) { seen = append(seen, x) }})
	if err != nil || resp.Text != "say this back" {
		t.Fatalf("echo left unanswered: %+v, %v", resp, err)
	}
	if len(seen) != 1 || !AnsweredOffline(seen[0].Endpoint) {
		t.Errorf("observed %+v, want one exchange with the offline model", seen)
	}
	_, err = c.Complete(context.Background(), Request{Key: Key{Node: "a"}, Model: model("gpt-4.1-mini"), Messages: userSays("hi")})
	if errclass.Of(err) != errclass.Critical || !strings.Contains(err.Error(), `no mock for node "a"`) || strings.Contains(err.Error(), "no answer") {
		t.Errorf("a server's model left unanswered: %v, want the Responder's message, critical", err)
	}
	resp, err = c.Complete(context.Background(), Request{Key: Key{Node: "a"}, Model: echo, Messages: userSays("say this back")})
	if err != nil || resp.Text != "mocked" {
		t.Errorf("echo answered by the Responder: %+v, %v", resp, err)
	}
}
