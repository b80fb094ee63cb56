package nodes_test

import (
	"strings"
	"testing"
	"time"

	"github.com/flowrun/flowrun/errclass"
	"github.com/flowrun/flowrun/llm"
	"github.com/flowrun/flowrun/llm/llmtest"
	"github.com/flowrun/flowrun/runtime"
)

// A model's retry:, a node's retry: and the client default are one policy:
// the node's replaces the model's, and neither multiplies the other.
func TestRetryPolicyExactRequests(t *testing.T) {
	cases := []struct {
		name, modelRetry, nodeRetry string
		want                        int
	}{
		{"client default", "", "", 5},
		{"model policy alone", ", retry: {max_attempts: 3, backoff: 2s, max_backoff: 3s, jitter: 0}", "", 3},
		{"node retry alone", "", "    retry: {max_attempts: 2, backoff: 1s}\n", 2},
		{"both: the node's wins", ", retry: {max_attempts: 3}", "    retry: {max_attempts: 2}\n", 2},
		{"node retry on other classes only", ", retry: {max_attempts: 4}", "    retry: {max_attempts: 3, retry_on: [invalid_output]}\n", 1},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			srv := llmtest.New(t)
			srv.Handle(func(llmtest.Request) llmtest.Reply { return llmtest.Error(500, "overloaded") })
			p := load(t, `
version: 1
name: t
models: {default: {model: gpt-4.1-mini`+c.modelRetry+`}}
nodes:
  - id: ask
    llm: {prompt: hi}
`+c.nodeRetry, nil)
			w := &waits{}
			res, rec := run(t, p, modelKinds(srv, llm.Options{Sleep: w.sleep}), nil)
			if res.Status != runtime.StatusFailed {
				t.Fatalf("status %s, want failed", res.Status)
			}
			if got := srv.Calls(); got != c.want {
				t.Fatalf("%d requests, want %d", got, c.want)
			}
			if n := len(rec.Paths(runtime.EventNodeRetry)); n != 0 {
				t.Fatalf("%d node_retry events: the node was run again on top of the client's retries", n)
			}
			var turns []*runtime.Turn
			for _, e := range rec.All() {
				if e.Type == runtime.EventModelTurn {
					turns = append(turns, e.Turn)
				}
			}
			if len(turns) != c.want {
				t.Fatalf("%d model_turn events, want one per request (%d)", len(turns), c.want)
			}
			for i, turn := range turns {
				last := i == len(turns)-1
				if turn.Class != errclass.Server || turn.Try != i+1 || (turn.WaitMS > 0) == last {
					t.Fatalf("turn %d: class %s try %d wait %vms", i+1, turn.Class, turn.Try, turn.WaitMS)
				}
			}
			if c.name == "model policy alone" {
				if got := w.d; len(got) != 2 || got[0] != 2*time.Second || got[1] != 3*time.Second {
					t.Fatalf("waits %v, want [2s 3s] (backoff doubled, capped by max_backoff, no jitter)", got)
				}
			}
			if !strings.Contains(res.Err.Error(), "overloaded") {
				t.Fatalf("error %v does not carry the server's message", res.Err)
			}
		})
	}
}
