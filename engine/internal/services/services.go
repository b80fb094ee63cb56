// Package services builds what a run calls models, code and MCP servers
// with (its model client, sandbox, MCP sessions, response cache and
// trace exporter) and ends them. It is the engine's: being internal to
// it, no other package wires a run's services, so every run gets the
// same ones.
//
// Guarantees:
//   - A pipeline that needs a model endpoint the environment does not
//     give replays the cassette it ships (saying so on Options.Notice) or
//     gets no Session (ErrNoEndpoint): no run fails at its first model
//     call for want of one.
//   - The cassette replayed is named by its absolute path (Session.Replay),
//     so that a run recorded with it resumes from any directory.
//   - End stops the sandbox's workers and the MCP servers, flushes the
//     traces and writes the recorded cassette; what fails there is a
//     notice, not an error, as the run has ended.
package services

import (
	"context"
	"errors"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"time"

	"github.com/flowrun/flowrun/clock"
	"github.com/flowrun/flowrun/dsl"
	"github.com/flowrun/flowrun/llm"
	"github.com/flowrun/flowrun/llmconf"
	"github.com/flowrun/flowrun/mcpclient"
	"github.com/flowrun/flowrun/nodes"
	"github.com/flowrun/flowrun/runtime"
	"github.com/flowrun/flowrun/sandbox"
	"github.com/flowrun/flowrun/store"
	"github.com/flowrun/flowrun/tracing"
)

// Options say which services to build.
type Options struct {
	// Models are the model overrides in force: a declared model's name
	// and the model id it calls instead.
	Models map[string]string
	// Replay names a cassette every model call is answered from.
	Replay string
	// NoEndpoint says the runs need no model endpoint here (their model
	// calls happen elsewhere): no cassette fallback, no refusal.
	NoEndpoint bool
	// Record receives every exchange, written by the caller; without it,
	// RecordTo names a cassette file End writes them to.
	Record   *llm.Cassette
	RecordTo string
	// Cache answers identical model requests from the store's response
	// cache (once UseStore gives it); CacheTTL makes older entries misses.
	Cache    bool
	CacheTTL time.Duration
	// OTLP is where traces go (tracing.Endpoint: default the environment).
	OTLP string
	// Untraced: the runs are not traced, wherever OTLP says traces go.
	Untraced bool
	// Limits is the rate budget shared with other processes.
	Limits      llm.SharedLimits
	MaxAttempts int
	LookupEnv   func(string) (string, bool)
	OnDelta     func(path, text string)
	// Notice is told what a person should know that is not an error.
	Notice func(format string, args ...any)
	// Doubles stand in for services a run would otherwise get.
	Doubles Doubles
}

// Doubles stand in for the services Open would build: a test's mocks, a
// benchmark's in-process endpoint, a sandbox that many runs share.
type Doubles struct {
	// Respond answers every model call (llm.Options.Respond): the run
	// needs no endpoint, so none is looked for and no cassette replayed
	// for want of one.
	Respond llm.Responder
	// HTTPClient sends the model client's requests (llm.Options.HTTPClient).
	HTTPClient *http.Client
	// Clock is what the model client's backoff and rate limits wait on.
	Clock clock.Clock
	// MCP and Tools answer the MCP and agent tool calls they mock; with
	// MCP, no MCP server is started, and a tool it does not mock is
	// answered by the cassette replayed or not at all.
	MCP   nodes.MCPMocks
	Tools nodes.ToolMocks
	// Sandbox, when set, runs the code in place of a sandbox of the
	// session's own; its owner closes it, not End.
	Sandbox *sandbox.Sandbox
	// Kinds changes the node kinds made (a test's mocked tool and code
	// nodes wrap those made).
	Kinds func(runtime.Registry) runtime.Registry
}

// Session is what one run, or the runs that share it, call models, code
// and MCP servers with, and what to do at its end.
type Session struct {
	// Services are what the node kinds call; Kinds are those kinds.
	Services nodes.Services
	Kinds    runtime.Registry
	// Replay is the cassette model calls are answered from, absolute.
	Replay string
	// Shared: many runs use the session, which ends with End alone, not
	// as one of them ends (Release).
	Shared bool

	model    *llm.Client
	sandbox  *sandbox.Sandbox // nil when Doubles.Sandbox is used
	mcp      *mcpclient.Sessions
	record   *llm.Cassette // written to recordTo at the end
	recordTo string
	notice   func(format string, args ...any)
	traces   *tracing.Exporter // nil unless runs are traced
	cache    sync.Once         // the model client is given the store once
}

// ErrNoEndpoint says a pipeline calls a model with neither a key nor an
// endpoint to go to, and ships no cassette to replay.
var ErrNoEndpoint = errors.New("no model endpoint: set OPENAI_API_KEY (or OPENAI_BASE_URL for a local OpenAI-compatible server)")

// Open builds the services for runs of p as o says. With no key and no
// endpoint, a pipeline that ships <pipeline>.cassette.yaml replays it
// (saying so in one notice); one that does not is ErrNoEndpoint.
func Open(p *dsl.Pipeline, o Options) (*Session, error) {
	if o.Notice == nil {
		o.Notice = func(string, ...any) {}
	}
	s := &Session{notice: o.Notice, recordTo: o.RecordTo}
	s.Services.Models = o.Models
	d := o.Doubles
	opts := llm.Options{CacheTTL: o.CacheTTL, Shared: o.Limits, Env: o.LookupEnv, MaxAttempts: o.MaxAttempts,
		Respond: d.Respond, HTTPClient: d.HTTPClient}
	if d.Clock != nil {
		opts.Now, opts.Sleep = d.Clock.Now, d.Clock.Sleep
	}
	if o.Cache {
		opts.CacheDefault = llm.CacheOn
	}
	replay := o.Replay
	if replay == "" && !o.NoEndpoint && d.Respond == nil && NeedsEndpoint(p, o.Models, o.LookupEnv) {
		fallback := strings.TrimSuffix(strings.TrimSuffix(p.Path, ".yaml"), ".yml") + ".cassette.yaml"
		if _, err := os.Stat(fallback); err != nil {
			return nil, ErrNoEndpoint
		}
		replay = fallback
		o.Notice("no OPENAI_API_KEY or OPENAI_BASE_URL: replaying %s (offline)", fallback)
	}
	if replay != "" {
		c, err := llm.LoadCassette(replay)
		if err != nil {
			return nil, err
		}
		opts.Replay = c
		if s.Replay, err = filepath.Abs(replay); err != nil {
			return nil, err
		}
	}
	switch {
	case o.Record != nil:
		opts.Record = o.Record
	case o.RecordTo != "":
		s.record = llm.NewCassette()
		opts.Record = s.record
	}
	if !o.Untraced && tracing.Endpoint(o.OTLP) != "" {
		x, err := tracing.New(context.Background(), o.OTLP)
		if err != nil {
			return nil, err
		}
		s.traces = x
	}
	s.model, s.mcp = llm.New(opts), &mcpclient.Sessions{}
	sb := d.Sandbox
	if sb == nil {
		s.sandbox = sandbox.New(sandbox.Options{})
		sb = s.sandbox
	}
	s.Services.LLM, s.Services.Sandbox = s.model, sb
	if d.MCP == nil {
		s.Services.MCP = s.mcp
	}
	s.Services.OnDelta, s.Services.MCPMocks, s.Services.ToolMocks = o.OnDelta, d.MCP, d.Tools
	s.Kinds = nodes.Kinds(s.Services)
	if d.Kinds != nil {
		s.Kinds = d.Kinds(s.Kinds)
	}
	return s, nil
}

// NeedsEndpoint reports whether p calls a model that has neither a key nor
// an endpoint to go to in the environment lookupEnv reads.
func NeedsEndpoint(p *dsl.Pipeline, overrides map[string]string, lookupEnv func(string) (string, bool)) bool {
	need := false
	dsl.Walk(p, func(q *dsl.Pipeline, n *dsl.Node) {
		var name string
		switch {
		case n.LLM() != nil:
			name = n.LLM().Model
		case n.Agent() != nil:
			name = n.Agent().Model
		default:
			return
		}
		if m := q.Models[name]; m != nil {
			// --model default=echo runs offline; --model default=gpt-4.1
			// sends an echo model's calls to a server.
			if spec, ok := overrides[name]; ok {
				if o, err := llmconf.Override(m, spec); err == nil {
					m = o
				}
			}
			ep := llm.ResolveEndpoint(m, lookupEnv)
			if ep.URLFrom == "default" && !ep.HasKey {
				need = true
			}
		}
	})
	return need
}

// UseStore lets the model client answer from, and fill, st's response
// cache; the runs of a shared session each call it before they run.
func (s *Session) UseStore(st *store.Store) { s.cache.Do(func() { s.model.UseCache(st) }) }

// Traces is where events go to be traced: nil when runs are not traced.
func (s *Session) Traces() runtime.EventSink {
	if s.traces == nil {
		return nil
	}
	return s.traces
}

// Release ends s as a run on it ends, or fails to start, unless other
// runs share it.
func (s *Session) Release() {
	if !s.Shared {
		s.End()
	}
}

// End stops the sandbox's workers and the MCP servers, flushes the
// traces and writes the recorded cassette, if any.
func (s *Session) End() {
	if s.sandbox != nil {
		s.sandbox.Close()
	}
	s.mcp.Close()
	if s.traces != nil {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		if err := s.traces.Shutdown(ctx); err != nil {
			s.notice("exporting the run's trace: %v", err)
		}
	}
	if s.record == nil {
		return
	}
	if err := s.record.WriteFile(s.recordTo); err != nil {
		s.notice("writing the cassette %s: %v", s.recordTo, err)
		return
	}
	s.notice("recorded %d model exchange(s) to %s", s.record.Len(), s.recordTo)
}

// WithTraces is sink, plus the trace exporter when runs are traced.
func (s *Session) WithTraces(sink runtime.EventSink) runtime.EventSink {
	if s.traces == nil {
		return sink
	}
	if sink == nil {
		return s.traces
	}
	return fanout{sink, s.traces}
}

// fanout gives every event to each of its sinks in turn.
type fanout []runtime.EventSink

func (f fanout) Event(e runtime.Event) {
	for _, s := range f {
		s.Event(e)
	}
}
