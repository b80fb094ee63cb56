package flowtest

import (
	"context"
	"strings"
	"testing"
)

// A model with background: true is mocked like any other, at the model
// client: no background response is created or polled (that protocol is
// the llm package's to test, over HTTP).
func TestMocksAnswerBackgroundCalls(t *testing.T) {
	path := writeTestOf(t, func(pipeline string) string {
		return strings.Replace(pipeline, "default: {model: gpt-4.1-mini}",
			"default: {model: o3, api: responses, background: true, poll: 1ms, base_url: \"http://models.invalid/api/v2\"}", 1)
	}, reviseTwice)
	f, ds := Load(path)
	if len(ds) > 0 {
		t.Fatalf("load: %s", ds)
	}
	res := (&Runner{}).RunAll(context.Background(), []*File{f}, nil, 1)[0]
	if !res.Pass {
		t.Fatalf("case failed: %s", strings.Join(res.Problems, "\n"))
	}
	for _, e := range res.Events {
		if e.Remote != nil {
			t.Errorf("background work at %s: %s", e.Path, e.Remote.What)
		}
	}
}
