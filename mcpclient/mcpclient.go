// Package mcpclient connects flowrun to the MCP servers a pipeline
// declares, with the official Go SDK.
//
// Guarantees: a stdio server runs in a process group of its own
// (internal/proc) with only the environment variables the pipeline lists,
// plus PATH, HOME, TMPDIR and LANG so that interpreters start. An HTTP
// server is sent only the headers the pipeline names. No message from a
// server, on any transport, is read past MaxMessageBytes. Every value taken
// from flowrun's environment (env:NAME) is registered as a secret with
// package redact before a server sees it. A Sessions starts each server
// once, at its first use, however many calls follow, and Close ends every
// group it started, so no server outlives the run; if flowrun dies, the
// proc reaper ends them. A daemon a server leaves behind (setsid) is
// ended with it, on Linux (proc.Limits.Daemons).
package mcpclient

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/flowrun/flowrun/dsl"
	"github.com/flowrun/flowrun/internal/proc"
	"github.com/flowrun/flowrun/redact"
)

// startTimeout bounds starting a server and its initialize handshake.
const startTimeout = 30 * time.Second

// stopGrace is how long a stdio server has to exit after its stdin closes.
const stopGrace = 2 * time.Second

// baseEnv are the variables every stdio server gets: none is a secret,
// and without them npx, node or python scripts do not start.
var baseEnv = []string{"PATH", "HOME", "TMPDIR", "LANG"}

// Sessions holds the connections of one run, keyed by server
// configuration. It is safe for concurrent use.
type Sessions struct {
	LookupEnv func(string) (string, bool) // os.LookupEnv when nil

	mu      sync.Mutex
	conns   map[string]*conn
	retired []*conn // servers that died, replaced by a new start
	closed  bool
}

// conn is one started server.
type conn struct {
	ready   chan struct{} // closed once start has finished
	err     error
	session *mcp.ClientSession
	tools   []dsl.MCPTool
	group   *proc.Group   // nil for HTTP
	exited  chan struct{} // closed when the stdio process has exited
	exitErr error         // how it exited, once exited is closed
	stderr  *tailBuffer
	broken  atomic.Bool // a call found the connection failed
	// tooLarge is set once the server sent a message over MaxMessageBytes.
	tooLarge atomic.Pointer[MessageTooLargeError]

	// listeners are the calls in flight that want the server's notices,
	// by progress token; a notice is delivered under mu, so that none
	// arrives once its call has returned.
	mu        sync.Mutex
	listeners map[string]func(Notice)
	nextToken int
}

// Notice is a progress or log notification a server sent during a call.
type Notice struct {
	Message  string  // the progress message, or the log message's data
	Progress float64 // with Total, how far the call has come; 0 for a log message
	Total    float64 // 0 when the server gave none
	Level    string  // a log message's level ("info", "warning", ...); "" for progress
}

// listen registers notify for a call and returns its progress token and
// the function that stops delivery.
func (c *conn) listen(notify func(Notice)) (token string, stop func()) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.listeners == nil {
		c.listeners = map[string]func(Notice){}
	}
	c.nextToken++
	token = fmt.Sprintf("flowrun-%d", c.nextToken)
	c.listeners[token] = notify
	return token, func() {
		c.mu.Lock()
		defer c.mu.Unlock()
		delete(c.listeners, token)
	}
}

// progress delivers a progress notification to the call it is about.
func (c *conn) progress(p *mcp.ProgressNotificationParams) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if notify := c.listeners[fmt.Sprint(p.ProgressToken)]; notify != nil {
		notify(Notice{Message: redact.String(p.Message), Progress: p.Progress, Total: p.Total})
	}
}

// log delivers a log message to every call in flight: a log message names
// no call.
func (c *conn) log(p *mcp.LoggingMessageParams) {
	text, ok := p.Data.(string)
	if !ok {
		b, _ := json.Marshal(p.Data)
		text = string(b)
	}
	if p.Logger != "" {
		text = p.Logger + ": " + text
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	for _, notify := range c.listeners {
		notify(Notice{Message: redact.String(text), Level: string(p.Level)})
	}
}

// Key identifies a server's configuration: two pipelines declaring the
// same command share a listing cache entry. Values taken from the
// environment are not part of it (only their names), so no secret is.
func Key(s *dsl.MCPServer) string {
	b, _ := json.Marshal(struct {
		Command string
		Args    []string
		Dir     string
		Env     []dsl.MCPValue
		URL     string
		Headers []dsl.MCPValue
	}{s.Command, s.Args, s.Dir, s.Env, s.URL, s.Headers})
	sum := sha256.Sum256(b)
	return hex.EncodeToString(sum[:12])
}

func (ss *Sessions) lookup(name string) (string, bool) {
	if ss.LookupEnv != nil {
		return ss.LookupEnv(name)
	}
	return os.LookupEnv(name)
}

// connect returns the server's connection, starting it on first use.
func (ss *Sessions) connect(ctx context.Context, s *dsl.MCPServer) (*conn, error) {
	key := Key(s)
	ss.mu.Lock()
	if ss.closed {
		ss.mu.Unlock()
		return nil, fmt.Errorf("mcp server %s: the run has ended", s.Name)
	}
	if ss.conns == nil {
		ss.conns = map[string]*conn{}
	}
	c, started := ss.conns[key]
	if started && c.diedAfterStart() {
		// A server that died, or whose connection failed, is started
		// (or connected to) again for the node's next attempt.
		ss.retired = append(ss.retired, c)
		started = false
	}
	if !started {
		c = &conn{ready: make(chan struct{})}
		ss.conns[key] = c
	}
	ss.mu.Unlock()
	if !started {
		c.err = c.start(ctx, s, ss.lookup)
		close(c.ready)
	}
	select {
	case <-c.ready:
	case <-ctx.Done():
		return nil, ctx.Err()
	}
	return c, c.err
}

// Tools lists the server's tools, starting it if need be. The listing is
// the one the server gave when it started.
func (ss *Sessions) Tools(ctx context.Context, s *dsl.MCPServer) ([]dsl.MCPTool, error) {
	c, err := ss.connect(ctx, s)
	if err != nil {
		return nil, err
	}
	return c.tools, nil
}

// Close stops every server the run started and waits for them to exit.
func (ss *Sessions) Close() {
	ss.mu.Lock()
	ss.closed = true
	conns := ss.retired
	for _, c := range ss.conns {
		conns = append(conns, c)
	}
	ss.conns, ss.retired = nil, nil
	ss.mu.Unlock()
	for _, c := range conns {
		<-c.ready
		c.stop()
	}
}

func (c *conn) start(ctx context.Context, s *dsl.MCPServer, lookup func(string) (string, bool)) error {
	ctx, cancel := context.WithTimeout(ctx, startTimeout)
	defer cancel()
	var transport mcp.Transport
	if s.URL != "" {
		t, err := c.httpTransport(s, lookup)
		if err != nil {
			return err
		}
		transport = t
	} else {
		t, err := c.startProcess(s, lookup)
		if err != nil {
			return err
		}
		transport = t
	}
	client := mcp.NewClient(&mcp.Implementation{Name: "flowrun", Version: "1"}, &mcp.ClientOptions{
		Capabilities: &mcp.ClientCapabilities{},
		ProgressNotificationHandler: func(_ context.Context, r *mcp.ProgressNotificationClientRequest) {
			c.progress(r.Params)
		},
		LoggingMessageHandler: func(_ context.Context, r *mcp.LoggingMessageRequest) { c.log(r.Params) },
	})
	session, err := client.Connect(ctx, transport, nil)
	if err != nil {
		c.stop()
		return startFailed(s, c.explain("connecting", err))
	}
	c.session = session
	if caps := session.InitializeResult().Capabilities; caps != nil && caps.Logging != nil {
		// Servers of the protocol before 2026-07-28 send no log messages
		// until asked; a server that refuses still serves its tools.
		_ = session.SetLoggingLevel(ctx, &mcp.SetLoggingLevelParams{Level: "info"})
	}
	for t, err := range session.Tools(ctx, nil) {
		if err != nil {
			c.stop()
			return startFailed(s, c.explain("listing its tools", err))
		}
		in, _ := jsonPlain(t.InputSchema).(map[string]any)
		out, _ := jsonPlain(t.OutputSchema).(map[string]any)
		c.tools = append(c.tools, dsl.MCPTool{Name: t.Name, Description: t.Description, InputSchema: in, OutputSchema: out})
	}
	return nil
}

func (c *conn) startProcess(s *dsl.MCPServer, lookup func(string) (string, bool)) (mcp.Transport, error) {
	path, err := exec.LookPath(s.Command)
	if err != nil {
		why := "not found in PATH (install it, or give its full path as command:)"
		if strings.ContainsAny(s.Command, `/\`) {
			why = "no such executable file"
		}
		return nil, fmt.Errorf("cannot start %q: %s", s.Command, why)
	}
	env, err := serverEnv(s, lookup)
	if err != nil {
		return nil, err
	}
	cmd := exec.Command(path, s.Args...)
	cmd.Dir, cmd.Env = s.Dir, env
	inR, inW, err := os.Pipe()
	if err != nil {
		return nil, err
	}
	outR, outW, err := os.Pipe()
	if err != nil {
		inR.Close()
		inW.Close()
		return nil, err
	}
	c.stderr = &tailBuffer{max: 4 << 10}
	cmd.Stdin, cmd.Stdout, cmd.Stderr = inR, outW, c.stderr
	g, err := proc.Start(cmd, proc.Limits{Daemons: true})
	inR.Close()
	outW.Close()
	if err != nil {
		inW.Close()
		outR.Close()
		return nil, fmt.Errorf("cannot start %q: %w", s.Command, err)
	}
	c.group, c.exited = g, make(chan struct{})
	go func() {
		defer close(c.exited)
		c.exitErr = g.Wait()
	}()
	// The SDK's own cap counts what its decoder has read ahead, so it
	// would trip first, with an error that names neither server nor cap.
	return &mcp.IOTransport{Reader: c.bound(outR, s.Name, "\n"), Writer: inW, MaxLineLength: -1}, nil
}

// serverEnv is the environment of a stdio server: baseEnv and what the
// pipeline lists, nothing else.
func serverEnv(s *dsl.MCPServer, lookup func(string) (string, bool)) ([]string, error) {
	var env []string
	for _, name := range baseEnv {
		if v, ok := lookup(name); ok {
			env = append(env, name+"="+v)
		}
	}
	for _, v := range s.Env {
		value := v.Value
		if v.FromEnv != "" {
			got, ok := lookup(v.FromEnv)
			if !ok {
				return nil, fmt.Errorf("env %s: env:%s is not set in flowrun's environment", v.Name, v.FromEnv)
			}
			redact.Add(got)
			value = got
		}
		env = append(env, v.Name+"="+value)
	}
	return env, nil
}

func (c *conn) httpTransport(s *dsl.MCPServer, lookup func(string) (string, bool)) (mcp.Transport, error) {
	h := http.Header{}
	for _, v := range s.Headers {
		got, ok := lookup(v.FromEnv)
		if !ok {
			return nil, fmt.Errorf("headers %s: env:%s is not set in flowrun's environment", v.Name, v.FromEnv)
		}
		redact.Add(got)
		h.Set(v.Name, got)
	}
	bounded := &boundTransport{c: c, server: s.Name, next: http.DefaultTransport}
	client := &http.Client{Transport: &headerTransport{headers: h, next: bounded}}
	return &mcp.StreamableClientTransport{Endpoint: s.URL, HTTPClient: client, DisableStandaloneSSE: true, MaxRetries: -1}, nil
}

// headerTransport adds the pipeline's named headers to every request.
type headerTransport struct {
	headers http.Header
	next    http.RoundTripper
}

func (t *headerTransport) RoundTrip(r *http.Request) (*http.Response, error) {
	r = r.Clone(r.Context())
	for k, v := range t.headers {
		r.Header[k] = v
	}
	return t.next.RoundTrip(r)
}

// stop closes the session and ends the process group: stdin closing asks
// the server to exit; after stopGrace it is killed.
func (c *conn) stop() {
	if c.session != nil {
		_ = c.session.Close()
	}
	if c.group == nil {
		return
	}
	select {
	case <-c.exited:
	case <-time.After(stopGrace):
		c.group.Kill()
		<-c.exited
	}
}

// diedAfterStart reports whether a started server has since exited or
// its connection failed.
func (c *conn) diedAfterStart() bool {
	select {
	case <-c.ready:
		return c.dead() || c.broken.Load()
	default:
		return false
	}
}

// dead reports whether the stdio server has exited.
func (c *conn) dead() bool {
	if c.exited == nil {
		return false
	}
	select {
	case <-c.exited:
		return true
	default:
		return false
	}
}

// explain words a failure, with the tail of the server's stderr.
func (c *conn) explain(doing string, err error) error {
	if tooLarge := c.tooLarge.Load(); tooLarge != nil {
		return fmt.Errorf("%s: %w", doing, tooLarge)
	}
	msg := fmt.Sprintf("%s: %v", doing, err)
	if c.dead() {
		how := "exited"
		if c.exitErr != nil {
			how = fmt.Sprintf("exited (%v)", c.exitErr)
		}
		msg = fmt.Sprintf("the server %s while %s: %v", how, doing, err)
	}
	if c.stderr != nil {
		if tail := strings.TrimSpace(c.stderr.String()); tail != "" {
			msg += "; its stderr ends: " + redact.String(lastLines(tail, 5))
		}
	}
	return errors.New(msg)
}

// startFailed adds to why s did not start what to check, which validate
// and run report at the server's line.
func startFailed(s *dsl.MCPServer, err error) error {
	if s.URL != "" {
		return fmt.Errorf("%w (check url: and that a Streamable HTTP MCP server is up there)", err)
	}
	return fmt.Errorf("%w (check command: and args:; run them by hand: an MCP server waits for messages on stdin and writes only MCP messages to stdout)", err)
}

func lastLines(s string, n int) string {
	lines := strings.Split(s, "\n")
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	return strings.Join(lines, " | ")
}

// ServerDiedError is a call that ended because the server exited or the
// connection to it closed: the run fails, the model is not asked again.
// Unreachable says it is an HTTP server that could not be reached.
type ServerDiedError struct {
	Server, Tool string
	Unreachable  bool
	Err          error
}

func (e *ServerDiedError) Error() string {
	if e.Unreachable {
		return fmt.Sprintf("mcp server %s could not be reached during a call to %s: %v", e.Server, e.Tool, e.Err)
	}
	return fmt.Sprintf("mcp server %s died during a call to %s: %v", e.Server, e.Tool, e.Err)
}

func (e *ServerDiedError) Unwrap() error { return e.Err }

// Result is a tool call's answer, as flowrun hands it on.
type Result struct {
	// Value is the structured content when there is some, else the text
	// when every content item is text, else the list of content items
	// (images and audio stand in by type and size).
	Value any `json:"value" yaml:"value"`
	// Images are the images the tool returned, as data URLs.
	Images []string `json:"images,omitempty" yaml:"images,omitempty"`
	// Error is the tool's error text when it reported one (isError).
	Error string `json:"error,omitempty" yaml:"error,omitempty"`
}

// Call calls tool with args, waiting at most the server's timeout; notify,
// when not nil, receives the progress and log notifications the server
// sends while the call runs, never after Call returns. A tool
// that reports an error, refuses the call or times out gives a Result
// with Error set, for the model to read; a connection that fails (the
// server exited, or an HTTP server cannot be reached) gives a
// *ServerDiedError, and the next call starts or connects to the server
// again.
func (ss *Sessions) Call(ctx context.Context, s *dsl.MCPServer, tool string, args map[string]any, notify func(Notice)) (*Result, error) {
	c, err := ss.connect(ctx, s)
	if err != nil {
		return nil, fmt.Errorf("mcp server %s: %w", s.Name, err)
	}
	callCtx, cancel := context.WithTimeout(ctx, s.Timeout)
	defer cancel()
	params := &mcp.CallToolParams{Name: tool, Arguments: args}
	if notify != nil {
		token, stop := c.listen(notify)
		defer stop()
		params.SetProgressToken(token)
		// Current servers take the level of the log messages they send
		// per request; older ones the level set after connecting.
		params.Meta[mcp.MetaKeyLogLevel] = "info"
	}
	res, err := c.session.CallTool(callCtx, params)
	refused := protocolError(err)
	switch {
	case err == nil:
		return Convert(res), nil
	case ctx.Err() != nil:
		return nil, ctx.Err()
	case callCtx.Err() != nil:
		return &Result{Error: fmt.Sprintf("%s.%s did not answer within %s (the server's timeout:)", s.Name, tool, s.Timeout)}, nil
	case refused != nil:
		// The server answered with a protocol error (unknown tool, bad
		// arguments): the model can correct its call.
		return &Result{Error: refused.Message}, nil
	}
	// Anything else is the connection failing: give the process a moment
	// to be reaped, so that the message says how it ended.
	c.broken.Store(true)
	if tooLarge := c.tooLarge.Load(); tooLarge != nil {
		return nil, fmt.Errorf("calling %s: %w", tool, tooLarge)
	}
	if c.exited != nil {
		select {
		case <-c.exited:
		case <-time.After(time.Second):
		}
	}
	return nil, &ServerDiedError{Server: s.Name, Tool: tool, Unreachable: s.URL != "", Err: c.explain("answering", err)}
}

// rejectedByTransport is the code the SDK gives a request that did not
// reach the server (an HTTP server that cannot be reached): a failed
// connection, not the server's answer.
const rejectedByTransport = -32005

// protocolError is the JSON-RPC error the server answered with, if err
// holds one.
func protocolError(err error) *jsonrpc.Error {
	switch e := err.(type) {
	case *jsonrpc.Error:
		if e.Code != rejectedByTransport {
			return e
		}
	case interface{ Unwrap() []error }:
		for _, inner := range e.Unwrap() {
			if rpc := protocolError(inner); rpc != nil {
				return rpc
			}
		}
	case interface{ Unwrap() error }:
		return protocolError(e.Unwrap())
	}
	return nil
}

// Convert turns a protocol result into a Result.
func Convert(r *mcp.CallToolResult) *Result {
	out := &Result{}
	var texts []string
	var items []any
	allText := true
	for _, c := range r.Content {
		switch c := c.(type) {
		case *mcp.TextContent:
			texts = append(texts, c.Text)
			items = append(items, map[string]any{"type": "text", "text": c.Text})
		case *mcp.ImageContent:
			allText = false
			out.Images = append(out.Images, "data:"+c.MIMEType+";base64,"+base64.StdEncoding.EncodeToString(c.Data))
			items = append(items, map[string]any{"type": "image", "mime_type": c.MIMEType, "bytes": len(c.Data),
				"note": "the image follows this message"})
		case *mcp.AudioContent:
			allText = false
			items = append(items, map[string]any{"type": "audio", "mime_type": c.MIMEType, "bytes": len(c.Data)})
		case *mcp.ResourceLink:
			allText = false
			items = append(items, map[string]any{"type": "resource_link", "uri": c.URI, "name": c.Name, "description": c.Description})
		case *mcp.EmbeddedResource:
			allText = false
			item := map[string]any{"type": "resource"}
			if c.Resource != nil {
				item["uri"] = c.Resource.URI
				if c.Resource.Text != "" {
					item["text"] = c.Resource.Text
				} else {
					item["bytes"] = len(c.Resource.Blob)
				}
			}
			items = append(items, item)
		}
	}
	switch {
	case r.IsError:
		out.Error = strings.Join(texts, "\n")
		if out.Error == "" {
			out.Error = "the tool reported an error without text"
		}
	case r.StructuredContent != nil:
		out.Value = jsonPlain(r.StructuredContent)
	case allText:
		out.Value = strings.Join(texts, "\n")
	default:
		out.Value = items
	}
	return out
}

// jsonPlain gives v as the maps, slices and float64s JSON decodes to.
func jsonPlain(v any) any {
	b, err := json.Marshal(v)
	if err != nil {
		return v
	}
	var out any
	if json.Unmarshal(b, &out) != nil {
		return v
	}
	return out
}

// tailBuffer keeps the last max bytes written to it, redacted as they
// arrive: cutting redacted text can leave a piece of the placeholder but
// never a piece of a secret.
type tailBuffer struct {
	mu     sync.Mutex
	max    int
	buf    bytes.Buffer
	stream redact.Stream
}

func (t *tailBuffer) Write(p []byte) (int, error) {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.buf.WriteString(t.stream.Next(string(p)))
	if over := t.buf.Len() - t.max; over > 0 {
		t.buf.Next(over)
	}
	return len(p), nil
}

func (t *tailBuffer) String() string {
	t.mu.Lock()
	defer t.mu.Unlock()
	held := t.stream // End on a copy: later writes continue the stream
	return t.buf.String() + held.End()
}
