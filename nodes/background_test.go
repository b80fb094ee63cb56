package nodes_test

import (
	"errors"
	"net/http"
	"sync"
	"testing"

	"github.com/flowrun/flowrun/llm"
	"github.com/flowrun/flowrun/llm/llmtest"
)

// Where nothing is checkpointed (here, a run with no store), a background
// call whose poll fails is retried against the response it created.
func TestBackgroundRetryKeepsTheResponseWithoutCheckpoints(t *testing.T) {
	const src = `
version: 1
name: t
models: {default: {model: o3, api: responses, background: true, poll: 1ms}}
nodes:
  - id: think
    llm: {prompt: Think hard.}
outputs: {text: nodes.think.text}
`
	srv := llmtest.New(t)
	srv.Push(llmtest.Reply{Text: "thought", Polls: 1})
	p := load(t, src, nil)
	res, _ := run(t, p, modelKinds(srv, llm.Options{HTTPClient: &http.Client{Transport: &dropFirstPoll{}}}), nil)
	mustComplete(t, res)
	if res.Outputs["text"] != "thought" {
		t.Fatalf("outputs %v", res.Outputs)
	}
	if n := srv.Creates(); n != 1 {
		t.Errorf("%d responses created, want 1", n)
	}
}

// dropFirstPoll fails the first GET, as a dropped connection would.
type dropFirstPoll struct {
	mu      sync.Mutex
	dropped bool
}

func (d *dropFirstPoll) RoundTrip(r *http.Request) (*http.Response, error) {
	d.mu.Lock()
	drop := r.Method == http.MethodGet && !d.dropped
	d.dropped = d.dropped || drop
	d.mu.Unlock()
	if drop {
		return nil, errors.New("connection reset by peer")
	}
	return http.DefaultTransport.RoundTrip(r)
}
