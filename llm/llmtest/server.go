// Package llmtest is an in-process fake OpenAI server for tests. It speaks
// the wire protocol of /v1/chat/completions (plain, tools, json_schema
// response format, SSE streaming) and /v1/responses (plain, structured,
// SSE streaming, and background responses: see background.go), answers
// each request with a scripted Reply, and keeps every request it received
// for the test to inspect.
//
// Script replies with Push (a queue, used first) or Handle (a function for
// whatever the queue does not cover). A request with neither fails the
// test and gets a 400.
package llmtest

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"time"
)

// Server is a fake OpenAI endpoint.
type Server struct {
	// URL is the base URL to use as OPENAI_BASE_URL, ending in /v1.
	URL string

	srv *httptest.Server
	t   TB

	mu          sync.Mutex
	queue       []Reply
	handler     func(Request) Reply
	requests    []Request
	inFlight    int
	maxInFlight int
	bg          backgroundState
}

// Request is what the server received.
type Request struct {
	N      int    // 1-based arrival order
	Path   string // /v1/chat/completions or /v1/responses
	API    string // "chat" or "responses"
	Header http.Header
	Raw    []byte         // the body as sent
	Body   map[string]any // the body decoded
	Model  string
	Stream bool
	At     time.Time
}

// ToolCall is a function call in a scripted reply.
type ToolCall struct {
	ID        string // default call_<n>
	Name      string
	Arguments string // JSON text, sent verbatim (it may be broken on purpose)
}

// Usage is the token count a reply reports.
type Usage struct {
	Prompt, Completion, Reasoning, Cached int
}

// Reply is one scripted answer. With Status >= 400 or Body set, the body
// is sent as is; otherwise Text and ToolCalls are rendered in the wire
// format of the request's API, streamed if the request asked for it.
type Reply struct {
	Text      string
	ToolCalls []ToolCall
	// FinishReason defaults to "tool_calls" with tool calls, else "stop".
	// "length" renders as an incomplete response on the Responses API.
	FinishReason string
	Usage        Usage
	// NoUsage leaves usage out of the reply, as some servers do.
	NoUsage bool
	Model   string // default: the requested model

	Status int               // HTTP status; default 200
	Header map[string]string // extra response headers
	Body   string            // raw body (e.g. truncated JSON), sent as application/json unless Header says

	Delay time.Duration // wait before answering, or until the client gives up
	Reset bool          // drop the connection without answering
	// Cut ends a streamed reply after its first delta, as a dropped
	// connection would.
	Cut bool
	// Polls, for a request with background: true, is how many polls of
	// the response find it still in progress before it ends.
	Polls int
	// Hold pauses a streamed reply after its first HoldAfter deltas until
	// Hold is closed (or the client leaves), so that a test can look at
	// a reply half arrived.
	Hold      <-chan struct{}
	HoldAfter int
	// Fail, when set, is an error reported with status 200: inside the
	// stream after the first delta (a chat chunk {"error": {...}}, a
	// Responses "error" event), or as the body of a reply not streamed.
	Fail *Failure
}

// Failure is an OpenAI-style error object: {"message", "type", "code"}.
type Failure struct {
	Code, Type, Message string
}

func (f *Failure) object() map[string]any {
	obj := map[string]any{"message": f.Message, "type": f.Type, "param": nil, "code": nil}
	if f.Code != "" {
		obj["code"] = f.Code
	}
	return obj
}

// InStream is a reply that starts with text and then fails inside the
// stream (or, not streamed, answers 200 with the error as its body).
func InStream(code, typ, message string) Reply {
	return Reply{Text: "partial answer", Fail: &Failure{Code: code, Type: typ, Message: message}}
}

// Text is a plain text reply.
func Text(s string) Reply { return Reply{Text: s} }

// JSON is a reply whose text is v marshalled.
func JSON(v any) Reply {
	b, err := json.Marshal(v)
	if err != nil {
		panic(err)
	}
	return Reply{Text: string(b)}
}

// Calls is a reply made of tool calls.
func Calls(calls ...ToolCall) Reply { return Reply{ToolCalls: calls} }

// Call is a tool call with arguments marshalled from args.
func Call(name string, args any) ToolCall {
	b, err := json.Marshal(args)
	if err != nil {
		panic(err)
	}
	return ToolCall{Name: name, Arguments: string(b)}
}

// Error is an OpenAI-style error reply.
func Error(status int, message string) Reply {
	typ := "invalid_request_error"
	switch {
	case status == 429:
		typ = "rate_limit_exceeded"
	case status >= 500:
		typ = "server_error"
	}
	b, _ := json.Marshal(map[string]any{"error": map[string]any{
		"message": message, "type": typ, "param": nil, "code": nil,
	}})
	return Reply{Status: status, Body: string(b)}
}

// RateLimited is a 429 carrying a header such as Retry-After: 7 or
// retry-after-ms: 1500.
func RateLimited(header, value string) Reply {
	r := Error(429, "Rate limit reached. Please try again later.")
	r.Header = map[string]string{header: value}
	return r
}

// TB is the part of testing.TB the server uses; flowrun test runs the
// server outside a Go test, with no TB.
type TB interface {
	Cleanup(func())
	Errorf(format string, args ...any)
}

// New starts a server; with t it fails the test on unscripted requests
// and is closed when the test ends.
func New(t TB) *Server {
	s := &Server{t: t}
	s.srv = httptest.NewServer(http.HandlerFunc(s.serve))
	s.URL = s.srv.URL + "/v1"
	if t != nil {
		t.Cleanup(s.Close)
	}
	return s
}

// Close shuts the server down.
func (s *Server) Close() { s.srv.Close() }

// Push queues replies, answered in order before Handle is consulted.
func (s *Server) Push(replies ...Reply) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.queue = append(s.queue, replies...)
}

// Handle sets the function that answers when the queue is empty.
func (s *Server) Handle(f func(Request) Reply) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.handler = f
}

// Requests returns the requests received so far, in arrival order.
func (s *Server) Requests() []Request {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]Request(nil), s.requests...)
}

// Last returns the last request received.
func (s *Server) Last() Request {
	s.mu.Lock()
	defer s.mu.Unlock()
	if len(s.requests) == 0 {
		return Request{}
	}
	return s.requests[len(s.requests)-1]
}

// Calls is the number of requests received.
func (s *Server) Calls() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return len(s.requests)
}

// MaxInFlight is the most requests the server was handling at once.
func (s *Server) MaxInFlight() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.maxInFlight
}

// Env is an environment lookup pointing OPENAI_BASE_URL at the server
// and, when key is not empty, OPENAI_API_KEY at key.
func (s *Server) Env(key string) func(string) (string, bool) {
	return func(name string) (string, bool) {
		switch {
		case name == "OPENAI_BASE_URL":
			return s.URL, true
		case name == "OPENAI_API_KEY" && key != "":
			return key, true
		}
		return "", false
	}
}

func (s *Server) serve(w http.ResponseWriter, r *http.Request) {
	if id, cancel, ok := backgroundPath(r.URL.Path); ok {
		s.serveBackground(w, r, id, cancel)
		return
	}
	raw, _ := io.ReadAll(r.Body)
	req := Request{Path: r.URL.Path, Header: r.Header.Clone(), Raw: raw, At: time.Now()}
	switch r.URL.Path {
	case "/v1/chat/completions":
		req.API = "chat"
	case "/v1/responses":
		req.API = "responses"
	}
	_ = json.Unmarshal(raw, &req.Body)
	req.Model, _ = req.Body["model"].(string)
	req.Stream, _ = req.Body["stream"].(bool)

	s.mu.Lock()
	req.N = len(s.requests) + 1
	s.requests = append(s.requests, req)
	s.inFlight++
	s.maxInFlight = max(s.maxInFlight, s.inFlight)
	var rep Reply
	scripted := true
	switch {
	case len(s.queue) > 0:
		rep, s.queue = s.queue[0], s.queue[1:]
	case s.handler != nil:
		h := s.handler
		s.mu.Unlock()
		rep = h(req)
		s.mu.Lock()
	default:
		scripted = false
	}
	s.mu.Unlock()
	defer func() {
		s.mu.Lock()
		s.inFlight--
		s.mu.Unlock()
	}()

	if !scripted {
		if s.t != nil {
			s.t.Errorf("llmtest: no reply scripted for request %d (%s %s)", req.N, r.Method, r.URL.Path)
		}
		rep = Error(400, fmt.Sprintf("llmtest: no reply scripted for request %d", req.N))
	}
	if req.API == "" && rep.Status == 0 && rep.Body == "" {
		rep = Error(404, "llmtest: unknown path "+r.URL.Path)
	}
	if rep.Delay > 0 {
		select {
		case <-time.After(rep.Delay):
		case <-r.Context().Done():
			return
		}
	}
	if rep.Reset {
		reset(w)
		return
	}
	for k, v := range rep.Header {
		w.Header().Set(k, v)
	}
	background := req.API == "responses" && req.Body["background"] == true
	if rep.Fail != nil && !req.Stream && !background {
		b, _ := json.Marshal(map[string]any{"error": rep.Fail.object()})
		rep.Body = string(b)
	}
	if rep.Status >= 400 || rep.Body != "" {
		if rep.Header["Content-Type"] == "" {
			w.Header().Set("Content-Type", "application/json")
		}
		w.WriteHeader(max(rep.Status, 200))
		io.WriteString(w, rep.Body)
		return
	}
	if rep.Model == "" {
		rep.Model = req.Model
	}
	for i := range rep.ToolCalls {
		if rep.ToolCalls[i].ID == "" {
			rep.ToolCalls[i].ID = fmt.Sprintf("call_%d_%d", req.N, i+1)
		}
	}
	if rep.FinishReason == "" {
		rep.FinishReason = "stop"
		if len(rep.ToolCalls) > 0 {
			rep.FinishReason = "tool_calls"
		}
	}
	if background {
		s.create(w, r, req, rep)
		return
	}
	switch {
	case req.API == "chat" && req.Stream:
		streamChat(r.Context(), w, req, rep)
	case req.API == "chat":
		writeJSON(w, chatCompletion(req, rep))
	case req.Stream:
		streamResponses(r.Context(), w, req, rep)
	default:
		writeJSON(w, response(req, rep))
	}
}

// reset closes the connection so the client sees a reset, not a reply.
func reset(w http.ResponseWriter) {
	hj, ok := w.(http.Hijacker)
	if !ok {
		panic("llmtest: cannot hijack the connection")
	}
	conn, _, err := hj.Hijack()
	if err != nil {
		return
	}
	if tc, ok := conn.(*net.TCPConn); ok {
		_ = tc.SetLinger(0)
	}
	conn.Close()
}

func writeJSON(w http.ResponseWriter, v any) {
	w.Header().Set("Content-Type", "application/json")
	_ = json.NewEncoder(w).Encode(v)
}

func chatUsage(rep Reply) map[string]any {
	if rep.NoUsage {
		return nil
	}
	u := rep.Usage
	return map[string]any{
		"prompt_tokens":             u.Prompt,
		"completion_tokens":         u.Completion,
		"total_tokens":              u.Prompt + u.Completion,
		"prompt_tokens_details":     map[string]any{"cached_tokens": u.Cached, "audio_tokens": 0},
		"completion_tokens_details": map[string]any{"reasoning_tokens": u.Reasoning, "audio_tokens": 0, "accepted_prediction_tokens": 0, "rejected_prediction_tokens": 0},
	}
}

func chatCompletion(req Request, rep Reply) map[string]any {
	msg := map[string]any{"role": "assistant", "content": nil, "refusal": nil}
	if rep.Text != "" || len(rep.ToolCalls) == 0 {
		msg["content"] = rep.Text
	}
	if len(rep.ToolCalls) > 0 {
		var calls []map[string]any
		for _, tc := range rep.ToolCalls {
			calls = append(calls, map[string]any{
				"id": tc.ID, "type": "function",
				"function": map[string]any{"name": tc.Name, "arguments": tc.Arguments},
			})
		}
		msg["tool_calls"] = calls
	}
	return map[string]any{
		"id":      fmt.Sprintf("chatcmpl-%d", req.N),
		"object":  "chat.completion",
		"created": 1700000000,
		"model":   rep.Model,
		"choices": []any{map[string]any{
			"index": 0, "message": msg, "logprobs": nil, "finish_reason": rep.FinishReason,
		}},
		"usage":              chatUsage(rep),
		"system_fingerprint": "fp_llmtest",
	}
}

func streamChat(ctx context.Context, w http.ResponseWriter, req Request, rep Reply) {
	sse := newSSE(w)
	chunk := func(delta map[string]any, finish any) {
		sse.data(map[string]any{
			"id": fmt.Sprintf("chatcmpl-%d", req.N), "object": "chat.completion.chunk",
			"created": 1700000000, "model": rep.Model,
			"choices": []any{map[string]any{"index": 0, "delta": delta, "logprobs": nil, "finish_reason": finish}},
		})
	}
	chunk(map[string]any{"role": "assistant", "content": ""}, nil)
	for i, piece := range pieces(rep.Text) {
		chunk(map[string]any{"content": piece}, nil)
		if !rep.held(ctx, i) {
			return
		}
		if rep.Cut {
			return
		}
		if rep.Fail != nil {
			sse.data(map[string]any{"error": rep.Fail.object()})
			return
		}
	}
	for i, tc := range rep.ToolCalls {
		chunk(map[string]any{"tool_calls": []any{map[string]any{
			"index": i, "id": tc.ID, "type": "function",
			"function": map[string]any{"name": tc.Name, "arguments": ""},
		}}}, nil)
		half := len(tc.Arguments) / 2
		for _, part := range []string{tc.Arguments[:half], tc.Arguments[half:]} {
			chunk(map[string]any{"tool_calls": []any{map[string]any{
				"index": i, "function": map[string]any{"arguments": part},
			}}}, nil)
		}
	}
	chunk(map[string]any{}, rep.FinishReason)
	if opts, _ := req.Body["stream_options"].(map[string]any); opts["include_usage"] == true && !rep.NoUsage {
		sse.data(map[string]any{
			"id": fmt.Sprintf("chatcmpl-%d", req.N), "object": "chat.completion.chunk",
			"created": 1700000000, "model": rep.Model, "choices": []any{},
			"usage": chatUsage(rep),
		})
	}
	sse.raw("[DONE]")
}

func response(req Request, rep Reply) map[string]any {
	var output []any
	if rep.Text != "" || len(rep.ToolCalls) == 0 {
		output = append(output, map[string]any{
			"type": "message", "id": fmt.Sprintf("msg_%d", req.N), "status": "completed", "role": "assistant",
			"content": []any{map[string]any{"type": "output_text", "text": rep.Text, "annotations": []any{}}},
		})
	}
	for i, tc := range rep.ToolCalls {
		output = append(output, map[string]any{
			"type": "function_call", "id": fmt.Sprintf("fc_%d_%d", req.N, i+1), "call_id": tc.ID,
			"name": tc.Name, "arguments": tc.Arguments, "status": "completed",
		})
	}
	status, incomplete := "completed", any(nil)
	switch rep.FinishReason {
	case "length":
		status, incomplete = "incomplete", map[string]any{"reason": "max_output_tokens"}
	case "content_filter":
		status, incomplete = "incomplete", map[string]any{"reason": "content_filter"}
	}
	var usage any
	if !rep.NoUsage {
		usage = map[string]any{
			"input_tokens":          rep.Usage.Prompt,
			"input_tokens_details":  map[string]any{"cached_tokens": rep.Usage.Cached},
			"output_tokens":         rep.Usage.Completion,
			"output_tokens_details": map[string]any{"reasoning_tokens": rep.Usage.Reasoning},
			"total_tokens":          rep.Usage.Prompt + rep.Usage.Completion,
		}
	}
	return map[string]any{
		"id": fmt.Sprintf("resp_%d", req.N), "object": "response", "created_at": 1700000000,
		"status": status, "error": nil, "incomplete_details": incomplete,
		"model": rep.Model, "output": output, "parallel_tool_calls": true,
		"tool_choice": "auto", "tools": []any{}, "temperature": 1.0, "top_p": 1.0,
		"usage": usage,
	}
}

func streamResponses(ctx context.Context, w http.ResponseWriter, req Request, rep Reply) {
	sse := newSSE(w)
	deltas := 0
	for _, ev := range responseEvents(req, rep, "in_progress") {
		sse.event(ev["type"].(string), ev)
		if ev["type"] != "response.output_text.delta" {
			continue
		}
		if !rep.held(ctx, deltas) || rep.Cut {
			return
		}
		deltas++
	}
}

// responseEvents are the SSE events of a streamed Responses API reply,
// numbered from 0; the first announces the response with status created.
// A Fail ends them with an error event after the first delta.
func responseEvents(req Request, rep Reply, created string) []map[string]any {
	var out []map[string]any
	event := func(typ string, fields map[string]any) {
		fields["type"] = typ
		fields["sequence_number"] = len(out)
		out = append(out, fields)
	}
	final := response(req, rep)
	started := map[string]any{}
	for k, v := range final {
		started[k] = v
	}
	started["status"], started["output"], started["usage"] = created, []any{}, nil
	event("response.created", map[string]any{"response": started})
	msgID := fmt.Sprintf("msg_%d", req.N)
	for _, piece := range pieces(rep.Text) {
		event("response.output_text.delta", map[string]any{
			"item_id": msgID, "output_index": 0, "content_index": 0, "delta": piece, "logprobs": []any{},
		})
		if rep.Fail != nil {
			event("error", map[string]any{"code": rep.Fail.Code, "message": rep.Fail.Message, "param": nil})
			return out
		}
	}
	typ := "response.completed"
	if final["status"] == "incomplete" {
		typ = "response.incomplete"
	}
	event(typ, map[string]any{"response": final})
	return out
}

// held waits, after delta i, for Hold when the reply is held there; it
// reports false when the client left meanwhile.
func (rep Reply) held(ctx context.Context, i int) bool {
	if rep.Hold == nil || i+1 != rep.HoldAfter {
		return true
	}
	select {
	case <-rep.Hold:
		return true
	case <-ctx.Done():
		return false
	}
}

// pieces splits text into streaming deltas, a word (with its following
// spaces) at a time.
func pieces(text string) []string {
	var out []string
	for len(text) > 0 {
		i := strings.IndexAny(text, " \n")
		if i < 0 {
			out = append(out, text)
			break
		}
		j := i + 1
		for j < len(text) && (text[j] == ' ' || text[j] == '\n') {
			j++
		}
		out = append(out, text[:j])
		text = text[j:]
	}
	return out
}

type sseWriter struct {
	w http.ResponseWriter
	b *bufio.Writer
}

func newSSE(w http.ResponseWriter) *sseWriter {
	w.Header().Set("Content-Type", "text/event-stream")
	w.Header().Set("Cache-Control", "no-cache")
	w.WriteHeader(200)
	return &sseWriter{w: w, b: bufio.NewWriter(w)}
}

func (s *sseWriter) data(v any) {
	b, _ := json.Marshal(v)
	s.raw(string(b))
}

func (s *sseWriter) event(typ string, v any) {
	b, _ := json.Marshal(v)
	fmt.Fprintf(s.b, "event: %s\ndata: %s\n\n", typ, b)
	s.flush()
}

func (s *sseWriter) raw(data string) {
	fmt.Fprintf(s.b, "data: %s\n\n", data)
	s.flush()
}

func (s *sseWriter) flush() {
	_ = s.b.Flush()
	if f, ok := s.w.(http.Flusher); ok {
		f.Flush()
	}
}
