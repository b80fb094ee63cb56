package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"sync"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
	"gopkg.in/yaml.v3"

	"github.com/flowrun/flowrun/dsl"
	"github.com/flowrun/flowrun/durable"
	"github.com/flowrun/flowrun/internal/confined"
	"github.com/flowrun/flowrun/internal/httpauth"
	"github.com/flowrun/flowrun/jsonvalue"
	"github.com/flowrun/flowrun/llm"
	"github.com/flowrun/flowrun/redact"
	"github.com/flowrun/flowrun/runtime"
	"github.com/flowrun/flowrun/store"
)

const mcpUsage = `flowrun mcp serve [DIR] [--http ADDR] [--record DIR | --replay FILE]

Serves every pipeline under DIR (default: the current directory) as a tool
of an MCP server: the tool's name is the pipeline's name, its input schema
the pipeline's inputs, its output schema the pipeline's typed outputs. A
call runs the pipeline as a durable run (listed by flowrun runs), sends
progress notifications, and returns the outputs as structured content.
Over stdio by default (for Claude Desktop, Cursor and other clients that
start flowrun); with --http, Streamable HTTP on a loopback address, with a
bearer token printed on stderr. With --record DIR, each run's model
exchanges and MCP calls go to a cassette of its own,
DIR/PIPELINE.RUN.cassette.yaml.`

func mcpCmd(ctx context.Context, args []string, stdin io.Reader, stdout, stderr io.Writer) int {
	if len(args) == 0 || args[0] != "serve" {
		if len(args) > 0 && (args[0] == "-h" || args[0] == "--help") {
			fmt.Fprintln(stdout, mcpUsage)
			return exitOK
		}
		fmt.Fprintln(stderr, "flowrun mcp: the command is flowrun mcp serve [DIR] [--http ADDR] (see flowrun mcp --help)")
		return exitInvalid
	}
	fset := newFlagSet("mcp serve", mcpUsage)
	addr := fset.String("http", "", "serve Streamable HTTP on this loopback `address` (such as 127.0.0.1:8765) instead of stdio")
	storePath := storeFlag(fset)
	var mf modelFlags
	mf.register(fset)
	fset.Lookup("record").Usage = "record each run into a cassette of its own in this `directory`: PIPELINE.RUN.cassette.yaml (a run resumed by an answer adds to its file)"
	dirs, code, ok := parseFlags(fset, args[1:], stdout, stderr)
	if !ok {
		return code
	}
	recordDir := mf.record
	mf.record = ""
	if recordDir != "" {
		if err := os.MkdirAll(recordDir, 0o755); err != nil {
			fmt.Fprintf(stderr, "flowrun mcp serve: --record: %v\n", err)
			return exitInvalid
		}
	}
	if len(dirs) > 1 {
		fmt.Fprintln(stderr, "flowrun mcp serve: name one directory")
		return exitInvalid
	}
	dir := "."
	if len(dirs) == 1 {
		dir = dirs[0]
	}
	ps := &pipelineServer{launch: launch{models: &mf, store: *storePath, remote: true}, recordDir: recordDir, stderr: stderr, states: newRequestStates()}
	server, err := ps.server(dir)
	if err != nil {
		fmt.Fprintf(stderr, "flowrun mcp serve: %v\n", err)
		return exitInvalid
	}
	if *addr != "" {
		return serveMCPHTTP(ctx, server, *addr, stderr)
	}
	err = server.Run(ctx, &mcp.IOTransport{Reader: io.NopCloser(stdin), Writer: nopWriteCloser{stdout}})
	if err != nil && ctx.Err() == nil && !errors.Is(err, io.EOF) {
		fmt.Fprintf(stderr, "flowrun mcp serve: %v\n", err)
		return exitFailed
	}
	return exitOK
}

type nopWriteCloser struct{ io.Writer }

func (nopWriteCloser) Close() error { return nil }

// pipelineServer answers tool calls by running pipelines.
type pipelineServer struct {
	launch    launch // models and store; sink and human are per call
	recordDir string // --record: where each run's cassette goes
	stderr    io.Writer
	states    *requestStates
	mu        sync.Mutex // serialises what runs write to stderr
}

// server loads every pipeline under dir and adds each as a tool. A file
// that does not load is reported on stderr and left out.
func (ps *pipelineServer) server(dir string) (*mcp.Server, error) {
	var files []string
	err := filepath.WalkDir(dir, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		name := d.Name()
		if d.IsDir() && path != dir && strings.HasPrefix(name, ".") {
			return filepath.SkipDir
		}
		if !d.IsDir() && (strings.HasSuffix(name, ".yaml") || strings.HasSuffix(name, ".yml")) &&
			!strings.HasSuffix(name, ".test.yaml") && !strings.HasSuffix(name, ".cassette.yaml") {
			files = append(files, path)
		}
		return nil
	})
	if err != nil {
		return nil, err
	}
	sort.Strings(files)
	root, err := filepath.Abs(dir)
	if err != nil {
		return nil, fmt.Errorf("finding the pipelines under %s: %w", dir, err)
	}
	// The same lookup as the web UI's: a symbolic link (or a directory
	// link) that leads outside DIR serves nothing.
	confine := confined.Dir{Root: root, MaxBytes: maxInputFileBytes, Limit: "the pipeline file size"}
	server := mcp.NewServer(&mcp.Implementation{Name: "flowrun", Version: "1"}, &mcp.ServerOptions{Capabilities: &mcp.ServerCapabilities{}})
	seen := map[string]string{}
	for _, f := range files {
		// Read once, through the confined lookup: what is checked is what
		// loads.
		rel, err := filepath.Rel(dir, f)
		var src []byte
		if err == nil {
			src, err = confine.ReadFile(context.Background(), rel)
		}
		if err != nil {
			if errors.Is(err, confined.ErrOutside) {
				err = fmt.Errorf("it leads outside %s", dir)
			}
			fmt.Fprintf(ps.stderr, "flowrun mcp serve: %s is not served: %v\n", f, err)
			continue
		}
		if !looksLikePipeline(src) {
			continue
		}
		p, ds := dsl.LoadSource(f, src)
		if len(ds) > 0 {
			fmt.Fprintln(ps.stderr, diagnosticsText(ds))
		}
		if p == nil {
			fmt.Fprintf(ps.stderr, "flowrun mcp serve: %s is not served: it does not load (above)\n", f)
			continue
		}
		if other, dup := seen[p.Name]; dup {
			fmt.Fprintf(ps.stderr, "flowrun mcp serve: %s is not served: %s already has the name %q\n", f, other, p.Name)
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

// looksLikePipeline tells a pipeline file from the other YAML files a
// directory of pipelines holds (data, cassettes, prompts): it has
// version: and nodes: or outputs: at the top.
func looksLikePipeline(src []byte) bool {
	var top map[string]any
	if yaml.Unmarshal(src, &top) != nil {
		return false
	}
	_, version := top["version"]
	_, nodes := top["nodes"]
	_, outputs := top["outputs"]
	return version && (nodes || outputs)
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
		l := ps.launch
		l.sink = &mcpProgress{ctx: ctx, session: req.Session, token: req.Params.GetProgressToken()}
		stderr := &lockedWriter{mu: &ps.mu, w: ps.stderr}
		if ps.recordDir != "" {
			mf := *l.models
			mf.recordInto = llm.NewCassette()
			l.models = &mf
		}
		var res *runtime.Result
		var err error
		if req.Params.RequestState != "" {
			res, err = ps.answer(ctx, req, l, stderr)
		} else {
			inputs := map[string]any{}
			if len(req.Params.Arguments) > 0 {
				if err := json.Unmarshal(req.Params.Arguments, &inputs); err != nil {
					return toolError(fmt.Sprintf("the arguments are not a JSON object: %v", err)), nil
				}
			}
			res, err = startRun(ctx, p, inputs, l, stderr)
		}
		// A client before the multi-round-trip protocol cannot use a
		// request state: the SDK asks its first question for it and calls
		// this handler once more, so every further question is asked here.
		run := ""
		for err == nil && res.Status == runtime.StatusWaiting && clientElicits(req.Session) && !clientRetriesWithState(req.Session) {
			run = res.RunID
			var er *mcp.ElicitResult
			if er, err = req.Session.Elicit(ctx, elicitation(res.Pending)); err != nil {
				err = &setupError{exitFailed, fmt.Errorf("asking the client's user %q for run %s: %w; the run waits: %s",
					res.Pending.Text, res.RunID, err, answerCommand(res.RunID, res.Pending))}
				break
			}
			res, err = ps.resumeWith(ctx, res.RunID, *res.Pending, er, l, stderr)
		}
		if res != nil {
			run = res.RunID
		}
		if l.models.recordInto != nil && run != "" {
			ps.writeRecording(l.models.recordInto, p, run, stderr)
		}
		return ps.result(req, p, res, err), nil
	}
}

// writeRecording adds what one call of a run recorded to that run's
// cassette, so that calls never overwrite each other's and the call that
// answers a question completes the run's.
func (ps *pipelineServer) writeRecording(c *llm.Cassette, p *dsl.Pipeline, runID string, stderr io.Writer) {
	path := filepath.Join(ps.recordDir, p.Name+"."+runID+".cassette.yaml")
	if err := c.AppendFile(path); err != nil {
		fmt.Fprintf(stderr, "flowrun mcp serve: --record: %v\n", err)
		return
	}
	fmt.Fprintf(stderr, "recorded %d model exchange(s) of run %s to %s\n", c.Len(), runID, path)
}

// inputKey names the one input request a waiting run makes.
const inputKey = "answer"

// result is what the client gets for a run that ended or waits.
func (ps *pipelineServer) result(req *mcp.CallToolRequest, p *dsl.Pipeline, res *runtime.Result, err error) *mcp.CallToolResult {
	var setup *setupError
	switch {
	case errors.As(err, &setup):
		return toolError(setup.err.Error())
	case res == nil:
		return toolError(fmt.Sprintf("the run of %s could not start: %v", p.Name, err))
	}
	switch res.Status {
	case runtime.StatusCompleted:
		text, err := jsonvalue.Marshal(res.Outputs)
		if err != nil {
			return toolError(fmt.Sprintf("run %s completed but its outputs could not be encoded as JSON: %v", res.RunID, err))
		}
		// The outputs as the CLI prints them: redacted, > left as it is.
		// The structured content is the same document, so that no secret
		// reaches the client by another way.
		text = outJSON(text)
		return &mcp.CallToolResult{StructuredContent: json.RawMessage(text), Content: []mcp.Content{&mcp.TextContent{Text: string(text)}}}
	case runtime.StatusWaiting:
		q := res.Pending
		if !clientElicits(req.Session) {
			return toolError(fmt.Sprintf("run %s is waiting for a person (%s: %s) and this client cannot ask one (no MCP elicitation); answer it with: %s",
				res.RunID, q.Path, q.Text, answerCommand(res.RunID, q)))
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
	return &mcp.ElicitParams{Mode: "form", Message: text, RequestedSchema: map[string]any{
		"type": "object", "properties": map[string]any{inputKey: field}, "required": []any{inputKey},
	}}
}

// answer resumes the waiting run named by the call's request state with
// the user's answer to its question.
func (ps *pipelineServer) answer(ctx context.Context, req *mcp.CallToolRequest, l launch, stderr io.Writer) (*runtime.Result, error) {
	w, err := ps.states.open(req.Params.RequestState, req.Session.ID(), time.Now())
	if err != nil {
		return nil, &setupError{exitInvalid, err}
	}
	er, _ := req.Params.InputResponses[inputKey].(*mcp.ElicitResult)
	return ps.resumeWith(ctx, w.Run, w.Question, er, l, stderr)
}

// resumeWith resumes run, which waits on q, with the user's reply er.
func (ps *pipelineServer) resumeWith(ctx context.Context, run string, q runtime.Question, er *mcp.ElicitResult, l launch, stderr io.Writer) (*runtime.Result, error) {
	var answer any
	switch {
	case er == nil:
		return nil, &setupError{exitInvalid, fmt.Errorf("no answer to %q came with the call; run %s waits: %s", q.Text, run, answerCommand(run, &q))}
	case er.Action == "accept":
		answer = er.Content[inputKey]
	case q.Kind == runtime.QuestionConfirm:
		answer = false
	default:
		return nil, &setupError{exitInvalid, fmt.Errorf("the user did not answer %q (%s); run %s waits: %s", q.Text, er.Action, run, answerCommand(run, &q))}
	}
	l.human = &givenAnswer{path: q.Path, answer: answer}
	st, err := store.Open(l.store)
	if err != nil {
		return nil, &setupError{exitFailed, err}
	}
	defer st.Close()
	return resumeRun(ctx, st, run, durable.ResumeOptions{}, l, stderr)
}

// givenAnswer answers one question, once; any other waits.
type givenAnswer struct {
	path   string
	answer any
	used   bool
}

func (g *givenAnswer) Answer(_ context.Context, q runtime.Question) (any, bool, error) {
	if g.used || q.Path != g.path {
		return nil, false, nil
	}
	g.used = true
	return g.answer, true, nil
}

func toolError(msg string) *mcp.CallToolResult {
	return &mcp.CallToolResult{IsError: true, Content: []mcp.Content{&mcp.TextContent{Text: redact.String(msg)}}}
}

// lockedWriter lets concurrent calls share stderr.
type lockedWriter struct {
	mu *sync.Mutex
	w  io.Writer
}

func (l *lockedWriter) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.w.Write(p)
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

// serveMCPHTTP serves Streamable HTTP on a loopback address. Every request
// must carry the token printed on stderr as a bearer token.
func serveMCPHTTP(ctx context.Context, server *mcp.Server, addr string, stderr io.Writer) int {
	if !httpauth.IsLoopback(addr) {
		fmt.Fprintf(stderr, "flowrun mcp serve: --http %s: give a loopback address such as 127.0.0.1:8765 (flowrun serves MCP on this machine only)\n", addr)
		return exitInvalid
	}
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		fmt.Fprintf(stderr, "flowrun mcp serve: %v\n", err)
		return exitFailed
	}
	token := httpauth.NewToken()
	handler := mcp.NewStreamableHTTPHandler(func(*http.Request) *mcp.Server { return server }, nil)
	srv := &http.Server{Handler: httpauth.RequireBearer(token, "flowrun mcp serve: send the token printed at start as Authorization: Bearer TOKEN", handler), ReadHeaderTimeout: 10 * time.Second}
	fmt.Fprintf(stderr, "flowrun mcp serve: Streamable HTTP on http://%s/ (send the header Authorization: Bearer %s)\n", ln.Addr(), token)
	done := make(chan error, 1)
	go func() { done <- srv.Serve(ln) }()
	select {
	case <-ctx.Done():
		_ = srv.Close()
		<-done
		return exitOK
	case err := <-done:
		fmt.Fprintf(stderr, "flowrun mcp serve: %v\n", err)
		return exitFailed
	}
}
