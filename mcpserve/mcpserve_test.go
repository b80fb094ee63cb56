package mcpserve

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/flowrun/flowrun/engine"
	"github.com/flowrun/flowrun/internal/testwait"
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
	return serveWith(t, setup{}, dir, opts)
}

// setup says how a test's server runs.
type setup struct {
	// transport is "" for the SDK's in-memory pair, "stdio" for
	// ServeStdio over pipes, or "http" for ServeHTTP on a loopback port,
	// the client sending the token it logs.
	transport string
	// engine configures the engine, besides its store.
	engine engine.Options
	// recordDir is the server's Options.RecordDir.
	recordDir string
}

// serveWith is serve, set up as su says.
func serveWith(t *testing.T, su setup, dir string, opts *mcp.ClientOptions) (*mcp.ClientSession, *store.Store, *bytes.Buffer) {
	t.Helper()
	transport, eo := su.transport, su.engine
	st, err := store.Open(filepath.Join(t.TempDir(), "runs.db"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	eo.Store = st
	eng, err := engine.New(eo)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { eng.Close() })
	log := &lockedBuffer{lines: make(chan string, 16)}
	s, err := New(dir, Options{Engine: eng, Log: log, RecordDir: su.recordDir})
	if err != nil {
		t.Fatalf("%v\n%s", err, log.String())
	}
	ctx, stop := context.WithCancel(context.Background())
	served := make(chan error, 1)
	t.Cleanup(func() {
		stop()
		if transport != "" {
			if err := <-served; err != nil {
				t.Errorf("serving over %s: %v", transport, err)
			}
		}
	})
	var ct mcp.Transport
	switch transport {
	case "":
		var stt mcp.Transport
		ct, stt = mcp.NewInMemoryTransports()
		ss, err := s.mcp.Connect(ctx, stt, nil)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { ss.Close() })
	case "stdio":
		toServer, fromClient := io.Pipe()
		fromServer, toClient := io.Pipe()
		go func() {
			served <- s.ServeStdio(ctx, toServer, toClient)
			toClient.Close()
		}()
		ct = &mcp.IOTransport{Reader: fromServer, Writer: fromClient}
	case "http":
		go func() { served <- s.ServeHTTP(ctx, "127.0.0.1:0") }()
		url, token := log.served(t)
		ct = &mcp.StreamableClientTransport{Endpoint: url, HTTPClient: bearerClient(token)}
	default:
		t.Fatalf("no transport %q", transport)
	}
	cs, err := mcp.NewClient(&mcp.Implementation{Name: "test", Version: "1"}, opts).Connect(ctx, ct, nil)
	if err != nil {
		t.Fatalf("connecting over %s: %v\n%s", transport, err, log.String())
	}
	t.Cleanup(func() { cs.Close() })
	return cs, st, &log.buf
}

// lockedBuffer is a server's log: kept whole, and each line also sent to
// lines (while there is room) for a test waiting on one.
type lockedBuffer struct {
	mu    sync.Mutex
	buf   bytes.Buffer
	lines chan string
}

func (b *lockedBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	for line := range strings.Lines(string(p)) {
		select {
		case b.lines <- line:
		default:
		}
	}
	return b.buf.Write(p)
}

func (b *lockedBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.String()
}

// servedRE reads the address and token ServeHTTP logs.
var servedRE = regexp.MustCompile(`on (http://\S+) \(send the header Authorization: Bearer (\w+)\)`)

// served waits for the line ServeHTTP logs when it listens and returns
// its address and token.
func (b *lockedBuffer) served(t *testing.T) (url, token string) {
	t.Helper()
	timeout := time.After(testwait.Hang())
	for {
		select {
		case line := <-b.lines:
			if m := servedRE.FindStringSubmatch(line); m != nil {
				return m[1], m[2]
			}
		case <-timeout:
			t.Fatalf("ServeHTTP logged no address within %s:\n%s", testwait.Hang(), b.String())
		}
	}
}

// bearerClient sends token as ServeHTTP asks.
func bearerClient(token string) *http.Client {
	return &http.Client{Transport: roundTripFunc(func(r *http.Request) (*http.Response, error) {
		r = r.Clone(r.Context())
		r.Header.Set("Authorization", "Bearer "+token)
		return http.DefaultTransport.RoundTrip(r)
	})}
}

type roundTripFunc func(*http.Request) (*http.Response, error)

func (f roundTripFunc) RoundTrip(r *http.Request) (*http.Response, error) { return f(r) }

func text(v any) string {
	b, _ := json.Marshal(v)
	return string(b)
}

// A call runs its pipeline through the engine as a durable run; a
// question goes to the client's user as it is, and the answer completes
// the run.
func TestCallAsksAndCompletesARecordedRun(t *testing.T) {
	dir := t.TempDir()
	writeFile(t, dir, "greet.yaml", greetPipeline)
	user := &elicited{answer: func(*mcp.ElicitParams) *mcp.ElicitResult { return accept("Ada") }}
	cs, st, log := serve(t, dir, user.options())
	res := call(t, cs, "greet", map[string]any{}, log)
	if got, asked := text(res.StructuredContent), user.messages(); got != `{"greeting":"hello Ada"}` || !slices.Equal(asked, []string{"Whom should I greet?"}) {
		t.Errorf("asked %q, got %s", asked, got)
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
	cs, st, first := askedWithState(t, dir, "greet")
	res := answerState(t, cs, "greet", first.RequestState, accept(42))
	if !res.IsError || !strings.Contains(text(res.Content), "does not match the question's schema") {
		t.Fatalf("a number for a string question: %s", text(res))
	}
	runs, _ := st.Runs(context.Background())
	if len(runs) != 1 || runs[0].Status != runtime.StatusWaiting {
		t.Fatalf("runs %+v", runs)
	}
}

// askedWithState serves dir to a client that answers input requests
// itself, as a client of the current protocol may (so that it can keep
// and resend a state, and what it sends is not checked first), and calls
// name, which must ask.
func askedWithState(t *testing.T, dir, name string) (*mcp.ClientSession, *store.Store, *mcp.CallToolResult) {
	t.Helper()
	cs, st, log := serve(t, dir, &mcp.ClientOptions{
		Capabilities:   &mcp.ClientCapabilities{Elicitation: &mcp.ElicitationCapabilities{}},
		MultiRoundTrip: &mcp.MultiRoundTripOptions{Disabled: true},
	})
	first, err := cs.CallTool(context.Background(), &mcp.CallToolParams{Name: name, Arguments: map[string]any{}})
	if err != nil || first.RequestState == "" {
		t.Fatalf("%s asked nothing: %v %s\n%s", name, err, text(first), log)
	}
	return cs, st, first
}

// answerState calls name again with the request state of the call that
// asked and the client's response r.
func answerState(t *testing.T, cs *mcp.ClientSession, name, state string, r *mcp.ElicitResult) *mcp.CallToolResult {
	t.Helper()
	res, err := cs.CallTool(context.Background(), &mcp.CallToolParams{Name: name, Arguments: map[string]any{},
		RequestState: state, InputResponses: mcp.InputResponseMap{inputKey: r}})
	if err != nil {
		t.Fatal(err)
	}
	return res
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
