package mcpserve

import (
	"bytes"
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/flowrun/flowrun/engine"
	"github.com/flowrun/flowrun/runtime"
	"github.com/flowrun/flowrun/store"
)

const greetPipeline = `
version: 1
name: greet
description: Asks for a name and greets it.
nodes:
  - id: who
    ask:
      question: "Whom should I greet?"
      schema: {type: string}
outputs:
  greeting: '"hello " + nodes.who'
`

func writeFile(t *testing.T, dir, name, body string) string {
	t.Helper()
	path := filepath.Join(dir, name)
	if err := os.WriteFile(path, []byte(body), 0o644); err != nil {
		t.Fatal(err)
	}
	return path
}

// serve serves the pipelines under dir in this process, with an engine on
// a fresh SQLite store, and connects a client with opts to it.
func serve(t *testing.T, dir string, opts *mcp.ClientOptions) (*mcp.ClientSession, *store.Store, *bytes.Buffer) {
	t.Helper()
	st, err := store.Open(filepath.Join(t.TempDir(), "runs.db"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	eng, err := engine.New(engine.Options{Store: st})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { eng.Close() })
	var log bytes.Buffer
	s, err := New(dir, Options{Engine: eng, Log: &log})
	if err != nil {
		t.Fatalf("%v\n%s", err, log.String())
	}
	ct, stt := mcp.NewInMemoryTransports()
	ss, err := s.mcp.Connect(context.Background(), stt, nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ss.Close() })
	cs, err := mcp.NewClient(&mcp.Implementation{Name: "test", Version: "1"}, opts).Connect(context.Background(), ct, nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cs.Close() })
	return cs, st, &log
}

func text(v any) string {
	b, _ := json.Marshal(v)
	return string(b)
}

// A call runs its pipeline through the engine as a durable run; a
// question goes to the client's user, and the answer completes the run.
func TestCallAsksAndCompletesARecordedRun(t *testing.T) {
	dir := t.TempDir()
	writeFile(t, dir, "greet.yaml", greetPipeline)
	cs, st, log := serve(t, dir, &mcp.ClientOptions{
		ElicitationHandler: func(_ context.Context, r *mcp.ElicitRequest) (*mcp.ElicitResult, error) {
			return &mcp.ElicitResult{Action: "accept", Content: map[string]any{inputKey: "Ada"}}, nil
		},
	})
	res, err := cs.CallTool(context.Background(), &mcp.CallToolParams{Name: "greet", Arguments: map[string]any{}})
	if err != nil || res.IsError {
		t.Fatalf("call: %v %s\n%s", err, text(res), log)
	}
	if got := text(res.StructuredContent); got != `{"greeting":"hello Ada"}` {
		t.Errorf("outputs %s", got)
	}
	runs, err := st.Runs(context.Background())
	if err != nil || len(runs) != 1 || runs[0].Status != runtime.StatusCompleted || !runs[0].RemoteInputs {
		t.Fatalf("runs %+v %v", runs, err)
	}
}

// An answer that does not fit the question's schema is refused, and the
// run keeps waiting for one that does.
func TestCallRefusesAnAnswerOutsideTheSchema(t *testing.T) {
	dir := t.TempDir()
	writeFile(t, dir, "greet.yaml", greetPipeline)
	// The client answers input requests itself, as a client of the
	// current protocol may, so that what it sends is not checked first.
	cs, st, _ := serve(t, dir, &mcp.ClientOptions{
		Capabilities:   &mcp.ClientCapabilities{Elicitation: &mcp.ElicitationCapabilities{}},
		MultiRoundTrip: &mcp.MultiRoundTripOptions{Disabled: true},
	})
	ctx := context.Background()
	first, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: "greet", Arguments: map[string]any{}})
	if err != nil || first.RequestState == "" {
		t.Fatalf("the question was not asked: %v %s", err, text(first))
	}
	res, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: "greet", Arguments: map[string]any{}, RequestState: first.RequestState,
		InputResponses: mcp.InputResponseMap{inputKey: &mcp.ElicitResult{Action: "accept", Content: map[string]any{inputKey: 42}}}})
	if err != nil {
		t.Fatal(err)
	}
	if !res.IsError || !strings.Contains(text(res.Content), "does not match the question's schema") {
		t.Fatalf("a number for a string question: %s", text(res))
	}
	runs, _ := st.Runs(context.Background())
	if len(runs) != 1 || runs[0].Status != runtime.StatusWaiting {
		t.Fatalf("runs %+v", runs)
	}
}

// Only pipelines inside the directory are served: a symbolic link to one
// outside it is left out, and the log says why; files that are not
// pipelines are left out silently.
func TestServesOnlyPipelinesInsideTheDirectory(t *testing.T) {
	dir, outside := t.TempDir(), t.TempDir()
	writeFile(t, dir, "greet.yaml", greetPipeline)
	writeFile(t, dir, "data.yaml", "rows: [1, 2]\n")
	secret := writeFile(t, outside, "launch.yaml", strings.ReplaceAll(greetPipeline, "name: greet", "name: launch"))
	if err := os.Symlink(secret, filepath.Join(dir, "launch.yaml")); err != nil {
		t.Skip(err)
	}
	cs, _, log := serve(t, dir, nil)
	var served []string
	for tool, err := range cs.Tools(context.Background(), nil) {
		if err != nil {
			t.Fatal(err)
		}
		served = append(served, tool.Name)
	}
	if !slices.Equal(served, []string{"greet"}) {
		t.Errorf("served %v, want greet alone", served)
	}
	if got := log.String(); !strings.Contains(got, "launch.yaml is not served: it leads outside") || strings.Contains(got, "data.yaml") {
		t.Errorf("log:\n%s", got)
	}
}

// TestNewMakesTheRecordDirectory: New creates a missing record directory,
// and says so when it cannot.
func TestNewMakesTheRecordDirectory(t *testing.T) {
	dir := t.TempDir()
	writeFile(t, dir, "greet.yaml", greetPipeline)
	st, err := store.Open(filepath.Join(t.TempDir(), "runs.db"))
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	eng, err := engine.New(engine.Options{Store: st})
	if err != nil {
		t.Fatal(err)
	}
	defer eng.Close()
	rec := filepath.Join(t.TempDir(), "cassettes", "new")
	if _, err := New(dir, Options{Engine: eng, RecordDir: rec}); err != nil {
		t.Fatal(err)
	}
	if fi, err := os.Stat(rec); err != nil || !fi.IsDir() {
		t.Fatalf("record directory: %v", err)
	}
	blocked := filepath.Join(writeFile(t, dir, "a-file", "x"), "under")
	if _, err := New(dir, Options{Engine: eng, RecordDir: blocked}); err == nil || !strings.Contains(err.Error(), "record directory") {
		t.Errorf("a record directory under a file: %v", err)
	}
}
