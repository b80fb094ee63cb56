package flowtest

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// A model with background: true is mocked like any other: its calls are
// created, polled and collected on the fake server.
func TestMocksAnswerBackgroundCalls(t *testing.T) {
	src, err := os.ReadFile("testdata/loop.yaml")
	if err != nil {
		t.Fatal(err)
	}
	pipeline := strings.Replace(string(src), "default: {model: gpt-4.1-mini}",
		"default: {model: o3, api: responses, background: true, poll: 1ms, base_url: \"http://models.invalid/api/v2\"}", 1)
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "loop.yaml"), []byte(pipeline), 0o644); err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(dir, "loop.test.yaml")
	if err := os.WriteFile(path, []byte(reviseTwice), 0o644); err != nil {
		t.Fatal(err)
	}
	f, ds := Load(path)
	if len(ds) > 0 {
		t.Fatalf("load: %s", ds)
	}
	res := (&Runner{}).RunAll(context.Background(), []*File{f}, nil, 1)[0]
	if !res.Pass {
		t.Fatalf("case failed: %s", strings.Join(res.Problems, "\n"))
	}
	created := 0
	for _, e := range res.Events {
		if e.Remote != nil && e.Remote.What == "created" {
			created++
		}
	}
	if created != 3 {
		t.Errorf("%d background responses created, want one per critique", created)
	}
}
