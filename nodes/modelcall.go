package nodes

import (
	"context"
	"encoding/json"
	"fmt"
	"path/filepath"

	"github.com/flowrun/flowrun/dsl"
	"github.com/flowrun/flowrun/errclass"
	"github.com/flowrun/flowrun/llm"
	"github.com/flowrun/flowrun/llmconf"
	"github.com/flowrun/flowrun/mcpclient"
	"github.com/flowrun/flowrun/runtime"
	"github.com/flowrun/flowrun/sandbox"
)

// Services are what the model-calling kinds need from outside the
// pipeline, each behind the small interface the kinds use: an engine
// gives the real clients, flowrun test its doubles.
type Services struct {
	// LLM makes model calls; without it llm and agent nodes are not available.
	LLM Model
	// Models overrides named models (--model NAME=SPEC, see
	// llmconf.Override).
	Models map[string]string
	// OnDelta receives streamed text as it arrives, by node path, for a
	// live view. Recorded results are the same with or without it.
	OnDelta func(path, text string)
	// Sandbox runs code nodes and the python_execute tool; without it they
	// are not available.
	Sandbox Sandbox
	// MCP connects to the pipeline's MCP servers, starting each at its
	// first call; without it only a replayed cassette answers MCP tools.
	MCP MCP
	// MCPMocks, when set, answers the MCP tools it mocks before a
	// cassette or a server is asked (flowrun test's tools: mocks).
	MCPMocks MCPMocks
	// ToolMocks, when set, answers an agent's calls of the built-in and
	// pipeline tools it mocks instead of running them (flowrun test's
	// tools: mocks).
	ToolMocks ToolMocks
}

// Model answers model requests (an *llm.Client). When it also has
// Cassettes() (record, replay *llm.Cassette), MCP tool calls are recorded
// into and replayed from the same cassettes as its model calls.
type Model interface {
	Complete(ctx context.Context, req llm.Request) (*llm.Response, error)
}

// Sandbox runs model-written code (a *sandbox.Sandbox).
type Sandbox interface {
	// Check says why code in language cannot run here, or nil.
	Check(language string) error
	Run(ctx context.Context, req sandbox.Request) (*sandbox.Result, error)
}

// MCP is the sessions with a run's MCP servers (an *mcpclient.Sessions).
type MCP interface {
	Tools(ctx context.Context, s *dsl.MCPServer) ([]dsl.MCPTool, error)
	Call(ctx context.Context, s *dsl.MCPServer, tool string, args map[string]any, notify func(mcpclient.Notice)) (*mcpclient.Result, error)
}

// cassettes are the cassettes the model records into and replays from,
// if it has any.
func (svc *Services) cassettes() (record, replay *llm.Cassette) {
	if c, ok := svc.LLM.(interface {
		Cassettes() (record, replay *llm.Cassette)
	}); ok {
		return c.Cassettes()
	}
	return nil, nil
}

// ToolMocks answers an agent's calls of built-in and pipeline tools
// without running them: a test double that flowrun test puts in place of
// the tools.
type ToolMocks interface {
	// Call answers a call of tool by the agent at run path at; ok is
	// false when the tool has no mock. An error is the tool's, which the
	// model reads.
	Call(tool, at string, args map[string]any) (result any, ok bool, err error)
}

// MCPMocks answers MCP tool calls without a server: a test double that
// flowrun test puts in place of the servers.
type MCPMocks interface {
	// Listing is the tools of server s the mocks offer an agent; ok is
	// false when no tool of s is mocked.
	Listing(s *dsl.MCPServer) (specs []llm.ToolSpec, ok bool)
	// Call answers a call of s's tool at call site at; ok is false when
	// the tool has no mock. A *mcpclient.ServerDiedError stands for the
	// server dying.
	Call(s *dsl.MCPServer, tool, at string, args map[string]any) (res *mcpclient.Result, ok bool, err error)
}

// conversation is one node's exchange with a model: the messages sent
// (memory history included) and the turns this node adds, which go into
// its memory when the node succeeds.
type conversation struct {
	model  *llmconf.Model
	memory string
	sent   []llm.Message
	added  []llm.Message
	calls  int // model calls made so far
}

// startConversation resolves the node's model and builds its first request:
// the system prompt (the node's, else its memory's), the memory's history,
// and the prompt with its images.
func (svc *Services) startConversation(ctx context.Context, s *runtime.Scope, l *dsl.LLM) (*conversation, error) {
	p := s.Pipeline()
	m, ok := p.Models[l.Model]
	if !ok {
		return nil, runtime.Errorf(errclass.Critical, "model %q is not declared in %s", l.Model, p.Path)
	}
	if spec, ok := svc.Models[l.Model]; ok {
		var err error
		if m, err = llmconf.Override(m, spec); err != nil {
			return nil, runtime.Errorf(errclass.Critical, "%w", err)
		}
	}
	c := &conversation{model: m, memory: l.Memory}
	system := l.System
	if system == nil && l.Memory != "" {
		system = p.Memories[l.Memory].System
	}
	if system != nil {
		text, err := s.Render(system)
		if err != nil {
			return nil, fmt.Errorf("system: %w", err)
		}
		c.sent = append(c.sent, llm.Message{Role: llm.RoleSystem, Text: text})
	}
	if l.Memory != "" {
		for i, raw := range s.Memory(l.Memory) {
			var msg llm.Message
			if err := json.Unmarshal(raw, &msg); err != nil {
				return nil, fmt.Errorf("memory %q message %d: %w", l.Memory, i, err)
			}
			c.sent = append(c.sent, msg)
		}
	}
	user := llm.Message{Role: llm.RoleUser}
	if l.Prompt != nil {
		text, err := s.Render(l.Prompt)
		if err != nil {
			return nil, fmt.Errorf("prompt: %w", err)
		}
		user.Text = text
	}
	for i, img := range l.Images {
		v, err := s.EvalValue(img)
		if err != nil {
			return nil, fmt.Errorf("images[%d]: %w", i, err)
		}
		// An entry is one image, or a list of them (an expression building
		// images per pair); an empty string or list is no image.
		refs, ok := v.([]any)
		if !ok {
			refs = []any{v}
		}
		for _, r := range refs {
			ref, isText := r.(string)
			if !isText {
				return nil, runtime.Errorf(errclass.Critical, "images[%d]: expected a path or URL, got %T", i, r)
			}
			if ref == "" {
				continue
			}
			url, err := llm.ImageURL(ref, func(name string) ([]byte, error) { return readImage(ctx, s, name) })
			if err != nil {
				return nil, runtime.Errorf(errclass.Critical, "images[%d]: %w", i, err)
			}
			user.Images = append(user.Images, url)
		}
	}
	c.add(user)
	return c, nil
}

// readImage reads an image file inside the pipeline directory, or a file
// the user named as an input of the run, where it is (relative to the
// working directory), under the same size cap and rules.
func readImage(ctx context.Context, s *runtime.Scope, name string) ([]byte, error) {
	files := s.Pipeline().Files
	if s.UserFile(name) {
		if real, err := filepath.EvalSymlinks(name); err == nil {
			if real, err = filepath.Abs(real); err == nil {
				files.Root, files.Base, name = filepath.Dir(real), "", filepath.Base(real)
			}
		}
	}
	return files.ReadFile(ctx, name)
}

func (c *conversation) add(m llm.Message) {
	c.sent = append(c.sent, m)
	c.added = append(c.added, m)
}

// call sends the conversation, recording every exchange as a model_turn
// event and charging its usage to the run: under a cost cap, each try
// reserves from the run's ledger before it is sent, and a refusal stops
// the run.
func (svc *Services) call(ctx context.Context, s *runtime.Scope, n *dsl.Node, c *conversation, req llm.Request) (*llm.Response, error) {
	if err := s.CheckBudget(); err != nil {
		return nil, err
	}
	path := s.Path(n.ID)
	req.Key = llm.Key{Node: path, Iteration: s.Loop().Iteration, Attempt: s.Attempt()}
	req.Model = c.model
	req.Messages = c.sent
	req.Timeout = n.Timeout
	if l := n.LLM(); l != nil {
		req.Cache = l.Cache
	} else if a := n.Agent(); a != nil {
		req.Cache = a.Cache
	}
	if r := n.Retry; r != nil {
		req.Retry = &llm.NodeRetry{MaxAttempts: r.MaxAttempts, Backoff: r.Backoff, RetryOn: r.RetryOn}
	}
	if svc.OnDelta != nil {
		req.OnDelta = func(t string) { svc.OnDelta(path, t) }
	}
	req.Observe = func(x llm.Exchange) {
		t := &runtime.Turn{Model: c.model.Model, Endpoint: x.Endpoint, Attempt: s.Attempt(), Try: x.Try,
			Messages: req.Messages, LatencyMS: float64(x.Latency.Microseconds()) / 1000, Class: x.Class,
			WaitMS: float64(x.Wait.Microseconds()) / 1000, Cached: x.Cached}
		if x.Reply != nil {
			usage := x.Reply.Usage
			t.Reply, t.Usage, t.CostUSD = x.Reply, &usage, x.Reply.CostUSD
		}
		if x.Err != nil {
			// What the run's ledger counted it at, so that the turns add
			// up to the run's cost wherever they are summed.
			t.Error, t.CostUSD = x.Err.Error(), x.Charged
		}
		s.Emit(runtime.Event{Type: runtime.EventModelTurn, Path: path, Node: n.ID, Kind: string(n.Kind), Turn: t})
	}
	c.calls++
	if c.model.Background {
		req.InFlight = &inFlightCalls{s: s, n: n, call: fmt.Sprintf("background attempt %d call %d", s.Attempt(), c.calls), kept: map[int]llm.BackgroundCall{}}
		req.OnBackground = func(b llm.BackgroundEvent) {
			s.Emit(runtime.Event{Type: runtime.EventRemoteWork, Path: path, Node: n.ID, Kind: string(n.Kind),
				Remote: &runtime.RemoteWork{What: b.What, ID: b.ID, Status: b.Status, Polls: b.Polls, Error: b.Error}})
		}
	}
	req.Ledger = s.Ledger()
	resp, err := svc.LLM.Complete(ctx, req)
	if resp != nil {
		s.AddTokens(resp.Usage.Total)
		if req.Ledger == nil {
			s.AddCost(resp.CostUSD)
		}
	}
	if stop := runtime.CostCapStop(err); stop != nil {
		return resp, stop
	}
	return resp, err
}

// remember appends the node's turns to its memory; called on success only,
// so a failed node leaves its memory as it was.
func (c *conversation) remember(s *runtime.Scope) error {
	if c.memory == "" {
		return nil
	}
	raws := make([]json.RawMessage, 0, len(c.added))
	for _, m := range c.added {
		b, err := json.Marshal(m)
		if err != nil {
			return err
		}
		raws = append(raws, b)
	}
	s.AppendMemory(c.memory, raws...)
	return nil
}

func usageMap(u llm.Usage) map[string]any {
	return map[string]any{"prompt": u.Prompt, "completion": u.Completion, "reasoning": u.Reasoning, "cached": u.Cached, "total": u.Total}
}

// inFlightCalls keeps the background responses of one model call of a
// node in the run's checkpoints, so that the node run again after a crash
// or a stop re-attaches to them, and in kept, so that the call's own
// retries do where nothing is checkpointed (a tool pipeline's nodes).
type inFlightCalls struct {
	s    *runtime.Scope
	n    *dsl.Node
	call string // the call within the node: attempt and number
	kept map[int]llm.BackgroundCall
}

func (f *inFlightCalls) key(turn int) string { return fmt.Sprintf("%s turn %d", f.call, turn) }

func (f *inFlightCalls) Lookup(turn int) (llm.BackgroundCall, bool) {
	if bc, ok := f.kept[turn]; ok {
		return bc, true
	}
	raw, ok := f.s.InFlight(f.n, f.key(turn))
	if !ok {
		return llm.BackgroundCall{}, false
	}
	return llm.ReadBackgroundCall(raw)
}

func (f *inFlightCalls) Record(ctx context.Context, turn int, bc llm.BackgroundCall) error {
	f.kept[turn] = bc
	return f.s.RecordInFlight(ctx, f.n, f.key(turn), bc)
}
