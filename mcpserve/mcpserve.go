// Package mcpserve serves pipelines as the tools of an MCP server (flowrun
// mcp serve): each pipeline under a directory is a tool whose name is the
// pipeline's name, whose input schema is its inputs and whose output
// schema is its typed outputs.
//
// Guarantees:
//   - A call starts its run through package engine, as a durable run in
//     the engine's store, with the call's arguments taken as a remote
//     caller's inputs: no path in them is read outside the pipeline's
//     directory.
//   - Only pipelines inside the directory are served: a symbolic link that
//     leads outside it serves nothing, and says so on the log.
//   - A run that waits for a person asks the client's user (elicitation);
//     the request state that carries the answer back is signed with a key
//     of this process, bound to the session it was issued to, expires and
//     is accepted once.
//   - What a call returns is redacted: no registered secret reaches the
//     client, in the text or in the structured content.
//   - Over HTTP, only a loopback address is served, and every request must
//     carry the bearer token printed when the server starts.
package mcpserve

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"sync"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/flowrun/flowrun/dsl"
	"github.com/flowrun/flowrun/engine"
	"github.com/flowrun/flowrun/eventview"
	"github.com/flowrun/flowrun/internal/confined"
	"github.com/flowrun/flowrun/internal/httpauth"
	"github.com/flowrun/flowrun/jsonvalue"
	"github.com/flowrun/flowrun/llm"
	"github.com/flowrun/flowrun/redact"
	"github.com/flowrun/flowrun/runtime"
)

// Options configure a Server.
type Options struct {
	// Engine starts and answers the runs.
	Engine *engine.Engine
	// RecordDir, when set, receives each run's model exchanges and MCP
	// calls in a cassette of its own, PIPELINE.RUN.cassette.yaml; New
	// creates it if missing.
	RecordDir string
	// Log receives a line per pipeline left out and per cassette written.
	Log io.Writer
	// PrintJSON writes a run's outputs as the front end prints JSON
	// (flowrun's CLI also escapes what a terminal would act on); it must
	// redact. Default redact.JSON.
	PrintJSON func([]byte) []byte
}

// Server is an MCP server of the pipelines under one directory.
type Server struct {
	mcp *mcp.Server
	log io.Writer
}

// New loads every pipeline under dir; it fails when none loads.
func New(dir string, o Options) (*Server, error) {
	if o.Log == nil {
		o.Log = io.Discard
	}
	if o.PrintJSON == nil {
		o.PrintJSON = redact.JSON
	}
	if o.RecordDir != "" {
		if err := os.MkdirAll(o.RecordDir, 0o755); err != nil {
			return nil, fmt.Errorf("record directory: %w", err)
		}
	}
	ps := &pipelineServer{engine: o.Engine, recordDir: o.RecordDir, log: o.Log, printJSON: o.PrintJSON, states: newRequestStates()}
	s, err := ps.server(dir)
	if err != nil {
		return nil, err
	}
	return &Server{mcp: s, log: o.Log}, nil
}

// ServeStdio serves one client over r and w until it leaves or ctx ends.
func (s *Server) ServeStdio(ctx context.Context, r io.Reader, w io.Writer) error {
	err := s.mcp.Run(ctx, &mcp.IOTransport{Reader: io.NopCloser(r), Writer: nopWriteCloser{w}})
	if err != nil && ctx.Err() == nil && !errors.Is(err, io.EOF) {
		return err
	}
	return nil
}

type nopWriteCloser struct{ io.Writer }

func (nopWriteCloser) Close() error { return nil }

// ErrNotLoopback says an address to serve HTTP on is not on this machine.
var ErrNotLoopback = errors.New("not a loopback address: MCP is served on this machine only")

// ServeHTTP serves Streamable HTTP on a loopback address until ctx ends.
// Every request must carry the token it prints on the log as a bearer
// token.
func (s *Server) ServeHTTP(ctx context.Context, addr string) error {
	if !httpauth.IsLoopback(addr) {
		return fmt.Errorf("%s: %w", addr, ErrNotLoopback)
	}
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return err
	}
	token := httpauth.NewToken()
	handler := mcp.NewStreamableHTTPHandler(func(*http.Request) *mcp.Server { return s.mcp }, nil)
	srv := &http.Server{Handler: httpauth.RequireBearer(token, "flowrun mcp serve: send the token printed at start as Authorization: Bearer TOKEN", handler), ReadHeaderTimeout: 10 * time.Second}
	fmt.Fprintf(s.log, "Streamable HTTP on http://%s/ (send the header Authorization: Bearer %s)\n", ln.Addr(), token)
	done := make(chan error, 1)
	go func() { done <- srv.Serve(ln) }()
	select {
	case <-ctx.Done():
		_ = srv.Close()
		<-done
		return nil
	case err := <-done:
		return err
	}
}

// AnswerCommand is the command that answers a waiting run's question.
func AnswerCommand(runID string, q *runtime.Question) string {
	switch {
	case q.Kind == runtime.QuestionConfirm:
		return fmt.Sprintf("flowrun resume %s --answer yes", runID)
	case q.Schema["type"] == "object":
		props, _ := q.Schema["properties"].(map[string]any)
		var fields []string
		for k := range props {
			fields = append(fields, k+"=...")
		}
		sort.Strings(fields)
		return fmt.Sprintf("flowrun resume %s --answer %s   (or --answer-file answer.json)", runID, strings.Join(fields, " --answer "))
	}
	return fmt.Sprintf("flowrun resume %s --answer VALUE   (or --answer-file answer.json)", runID)
}

// pipelineServer answers tool calls by running pipelines.
type pipelineServer struct {
	engine    *engine.Engine
	recordDir string // where each run's cassette goes; "" records none
	printJSON func([]byte) []byte
	log       io.Writer
	states    *requestStates
	mu        sync.Mutex // serialises what calls write to log
}

// server loads every pipeline under dir and adds each as a tool. A file
// that does not load is reported on the log and left out.
func (ps *pipelineServer) server(dir string) (*mcp.Server, error) {
	files, err := engine.Discover(dir)
	if err != nil {
		return nil, fmt.Errorf("finding the pipelines under %s: %w", dir, err)
	}
	root, err := filepath.Abs(dir)
	if err != nil {
		return nil, fmt.Errorf("finding the pipelines under %s: %w", dir, err)
	}
	// The same lookup as the web UI's: a symbolic link (or a directory
	// link) that leads outside DIR serves nothing.
	confine := confined.Dir{Root: root, MaxBytes: engine.MaxInputFileBytes, Limit: "the pipeline file size"}
	server := mcp.NewServer(&mcp.Implementation{Name: "flowrun", Version: "1"}, &mcp.ServerOptions{Capabilities: &mcp.ServerCapabilities{}})
	seen := map[string]string{}
	for _, rel := range files {
		f := filepath.Join(dir, filepath.FromSlash(rel))
		// Read once, through the confined lookup: what is checked is what
		// loads.
		src, err := confine.ReadFile(context.Background(), rel)
		if err != nil {
			if errors.Is(err, confined.ErrOutside) {
				err = fmt.Errorf("it leads outside %s", dir)
			}
			fmt.Fprintf(ps.log, "%s is not served: %v\n", f, err)
			continue
		}
		if !engine.LooksLikePipeline(src) {
			continue
		}
		p, ds := dsl.LoadSource(f, src)
		if len(ds) > 0 {
			fmt.Fprintln(ps.log, ds.String())
		}
		if p == nil {
			fmt.Fprintf(ps.log, "%s is not served: it does not load (above)\n", f)
			continue
		}
		if other, dup := seen[p.Name]; dup {
			fmt.Fprintf(ps.log, "%s is not served: %s already has the name %q\n", f, other, p.Name)
			continue
		}
		seen[p.Name] = f
		server.AddTool(pipelineTool(p), ps.handler(p))
	}
	if len(seen) == 0 {
		return nil, fmt.Errorf("no pipeline to serve under %s", dir)
	}
	return server, nil
}

// pipelineTool describes p as an MCP tool.
func pipelineTool(p *dsl.Pipeline) *mcp.Tool {
	props := map[string]any{}
	required := []any{}
	for _, in := range p.Inputs {
		s := map[string]any{}
		for k, v := range in.Schema {
			s[k] = v
		}
		if in.Description != "" {
			s["description"] = in.Description
		}
		props[in.Name] = s
		if !in.HasDefault {
			required = append(required, in.Name)
		}
	}
	outFields := map[string]*dsl.Type{}
	for _, o := range p.Outputs {
		outFields[o.Name] = o.Type
	}
	out := dsl.SchemaOf(dsl.Object(outFields))
	out["additionalProperties"] = true
	description := strings.TrimSpace(p.Description)
	if description == "" {
		description = "Runs the flowrun pipeline " + p.Name + "."
	}
	return &mcp.Tool{
		Name:         p.Name,
		Description:  description,
		InputSchema:  map[string]any{"type": "object", "properties": props, "required": required},
		OutputSchema: out,
	}
}

// handler runs p for one call, as flowrun run would. When the run waits
// for a person, the call asks the client's user (MCP elicitation, as an
// input request) and the client's retry, carrying the answer and the
// sealed request state, resumes the run with it.
func (ps *pipelineServer) handler(p *dsl.Pipeline) mcp.ToolHandler {
	return func(ctx context.Context, req *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
		o := engine.RunOptions{Sink: &mcpProgress{ctx: ctx, session: req.Session, token: req.Params.GetProgressToken()}, Remote: true}
		if ps.recordDir != "" {
			o.Record = llm.NewCassette()
		}
		var r *engine.Run
		var err error
		if req.Params.RequestState != "" {
			r, err = ps.answer(ctx, req, o)
		} else {
			inputs := map[string]any{}
			if len(req.Params.Arguments) > 0 {
				if err := json.Unmarshal(req.Params.Arguments, &inputs); err != nil {
					return toolError(fmt.Sprintf("the arguments are not a JSON object: %v", err)), nil
				}
			}
			r, err = ps.engine.Start(ctx, p, inputs, o)
		}
		var res *runtime.Result
		if r != nil {
			res = r.Wait()
		}
		// A client before the multi-round-trip protocol cannot use a
		// request state: the SDK asks its first question for it and calls
		// this handler once more, so every further question is asked here.
		run := ""
		for err == nil && res.Status == runtime.StatusWaiting && clientElicits(req.Session) && !clientRetriesWithState(req.Session) {
			run = res.RunID
			var er *mcp.ElicitResult
			if er, err = req.Session.Elicit(ctx, elicitation(res.Pending)); err != nil {
				err = &callError{fmt.Errorf("asking the client's user %q for run %s: %w; the run waits: %s",
					res.Pending.Text, res.RunID, err, AnswerCommand(res.RunID, res.Pending))}
				break
			}
			var a any
			if a, err = reply(res.RunID, *res.Pending, er); err != nil {
				res = nil
				break
			}
			res = nil
			if r, err = r.Answer(ctx, a, engine.ResumeOptions{RunOptions: o}); err == nil {
				res = r.Wait()
			}
		}
		if res != nil {
			run = res.RunID
		}
		if o.Record != nil && run != "" {
			ps.writeRecording(o.Record, p, run)
		}
		return ps.result(req, p, res, err), nil
	}
}

// writeRecording adds what one call of a run recorded to that run's
// cassette, so that calls never overwrite each other's and the call that
// answers a question completes the run's.
func (ps *pipelineServer) writeRecording(c *llm.Cassette, p *dsl.Pipeline, runID string) {
	path := filepath.Join(ps.recordDir, p.Name+"."+runID+".cassette.yaml")
	ps.mu.Lock()
	defer ps.mu.Unlock()
	if err := c.AppendFile(path); err != nil {
		fmt.Fprintf(ps.log, "recording run %s: %v\n", runID, err)
		return
	}
	fmt.Fprintf(ps.log, "recorded %d model exchange(s) of run %s to %s\n", c.Len(), runID, path)
}

// callError is a call that could not be made as sent (a request state
// refused, no answer given): its message is the whole tool error.
type callError struct{ err error }

func (e *callError) Error() string { return e.err.Error() }
func (e *callError) Unwrap() error { return e.err }

// beforeRun says whether err kept a run from starting for a reason its
// message says in full.
func beforeRun(err error) bool {
	var call *callError
	var config *engine.ConfigError
	var input *engine.InputError
	var host *engine.HostError
	return errors.As(err, &call) || errors.As(err, &config) || errors.As(err, &input) || errors.As(err, &host)
}

// inputKey names the one input request a waiting run makes.
const inputKey = "answer"

// result is what the client gets for a run that ended or waits.
func (ps *pipelineServer) result(req *mcp.CallToolRequest, p *dsl.Pipeline, res *runtime.Result, err error) *mcp.CallToolResult {
	switch {
	case err != nil && beforeRun(err):
		return toolError(err.Error())
	case res == nil:
		return toolError(fmt.Sprintf("the run of %s could not start: %v", p.Name, err))
	}
	switch res.Status {
	case runtime.StatusCompleted:
		text, err := jsonvalue.Marshal(res.Outputs)
		if err != nil {
			return toolError(fmt.Sprintf("run %s completed but its outputs could not be encoded as JSON: %v", res.RunID, err))
		}
		// The outputs as the front end prints JSON: redacted, > left as it is.
		// The structured content is the same document, so that no secret
		// reaches the client by another way.
		text = ps.printJSON(text)
		return &mcp.CallToolResult{StructuredContent: json.RawMessage(text), Content: []mcp.Content{&mcp.TextContent{Text: string(text)}}}
	case runtime.StatusWaiting:
		q := res.Pending
		if !clientElicits(req.Session) {
			return toolError(fmt.Sprintf("run %s is waiting for a person (%s: %s) and this client cannot ask one (no MCP elicitation); answer it with: %s",
				res.RunID, q.Path, q.Text, AnswerCommand(res.RunID, q)))
		}
		return &mcp.CallToolResult{InputRequests: mcp.InputRequestMap{inputKey: elicitation(q)}, RequestState: ps.states.seal(res.RunID, *q, req.Session.ID())}
	case runtime.StatusStopped:
		return toolError(fmt.Sprintf("run %s stopped: %s (continue it with flowrun resume %s)", res.RunID, res.Reason, res.RunID))
	}
	return toolError(fmt.Sprintf("run %s failed: %v (after fixing the cause, continue it with flowrun resume %s)", res.RunID, res.Err, res.RunID))
}

func clientElicits(ss *mcp.ServerSession) bool {
	init := ss.InitializeParams()
	return init != nil && init.Capabilities != nil && init.Capabilities.Elicitation != nil
}

// multiRoundTripProtocol is the first protocol version whose clients
// answer input requests and retry a call with its request state.
const multiRoundTripProtocol = "2026-07-28"

func clientRetriesWithState(ss *mcp.ServerSession) bool {
	init := ss.InitializeParams()
	return init == nil || init.ProtocolVersion >= multiRoundTripProtocol
}

// elicitation is the form that asks q: one field, answer.
func elicitation(q *runtime.Question) *mcp.ElicitParams {
	field, text := q.Schema, q.Text
	if q.Kind == runtime.QuestionConfirm {
		field, text = map[string]any{"type": "boolean"}, "Running "+q.Path+" needs your confirmation."
	}
	if field == nil {
		field = map[string]any{"type": "string"}
	}
	if lines := eventview.QuestionContext(q); len(lines) > 0 {
		text += "\n\n" + strings.Join(lines, "\n")
	}
	return &mcp.ElicitParams{Mode: "form", Message: text, RequestedSchema: map[string]any{
		"type": "object", "properties": map[string]any{inputKey: field}, "required": []any{inputKey},
	}}
}

// answer resumes the waiting run named by the call's request state with
// the user's answer to its question.
func (ps *pipelineServer) answer(ctx context.Context, req *mcp.CallToolRequest, o engine.RunOptions) (*engine.Run, error) {
	w, err := ps.states.open(req.Params.RequestState, req.Session.ID(), time.Now())
	if err != nil {
		return nil, &callError{err}
	}
	er, _ := req.Params.InputResponses[inputKey].(*mcp.ElicitResult)
	a, err := reply(w.Run, w.Question, er)
	if err != nil {
		return nil, err
	}
	return ps.engine.Answer(ctx, w.Run, a, engine.ResumeOptions{RunOptions: o})
}

// reply is the answer the user's reply er gives to q, which run waits on.
func reply(run string, q runtime.Question, er *mcp.ElicitResult) (any, error) {
	switch {
	case er == nil:
		return nil, &callError{fmt.Errorf("no answer to %q came with the call; run %s waits: %s", q.Text, run, AnswerCommand(run, &q))}
	case er.Action == "accept":
		return er.Content[inputKey], nil
	case q.Kind == runtime.QuestionConfirm:
		return false, nil
	}
	return nil, &callError{fmt.Errorf("the user did not answer %q (%s); run %s waits: %s", q.Text, er.Action, run, AnswerCommand(run, &q))}
}

func toolError(msg string) *mcp.CallToolResult {
	return &mcp.CallToolResult{IsError: true, Content: []mcp.Content{&mcp.TextContent{Text: redact.String(msg)}}}
}

// mcpProgress tells the client of each node that finished, when the
// call asked for progress.
type mcpProgress struct {
	ctx     context.Context
	session *mcp.ServerSession
	token   any
	done    float64
}

func (s *mcpProgress) Event(e runtime.Event) {
	if s.token == nil || (e.Type != runtime.EventNodeFinished && e.Type != runtime.EventNodeFailed) {
		return
	}
	s.done++
	msg := e.Path + " done"
	if e.Type == runtime.EventNodeFailed {
		msg = e.Path + " failed"
	}
	_ = s.session.NotifyProgress(s.ctx, &mcp.ProgressNotificationParams{ProgressToken: s.token, Progress: s.done, Message: msg})
}
