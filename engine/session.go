package engine

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"time"

	"github.com/flowrun/flowrun/dsl"
	"github.com/flowrun/flowrun/engine/secret"
	"github.com/flowrun/flowrun/llm"
	"github.com/flowrun/flowrun/mcpclient"
	"github.com/flowrun/flowrun/nodes"
	"github.com/flowrun/flowrun/runtime"
	"github.com/flowrun/flowrun/sandbox"
	"github.com/flowrun/flowrun/store"
	"github.com/flowrun/flowrun/tracing"
)

// session is what one run (or one worker's pipeline) calls models, code
// and MCP servers with, and what to do at its end.
type session struct {
	e     *Engine
	svc   nodes.Services
	kinds runtime.Registry
	// The services behind svc's interfaces, which the session also ends
	// or gives the store to.
	model   *llm.Client
	sandbox *sandbox.Sandbox
	mcp     *mcpclient.Sessions
	record  *llm.Cassette // written to e.o.Record at the end
	replay  string        // the cassette model calls are answered from

	// traces is nil unless runs are traced.
	traces *tracing.Exporter
	// shared sessions serve many runs and end with their Shared, not
	// with a run.
	shared bool
	cache  sync.Once // the model client is given the store once
}

// ErrNoEndpoint says a pipeline calls a model with neither a key nor an
// endpoint to go to, and ships no cassette to replay.
var ErrNoEndpoint = errors.New("no model endpoint: set OPENAI_API_KEY (or OPENAI_BASE_URL for a local OpenAI-compatible server)")

// open builds the services for a run of p that goes on as recorded (a
// resumed run's spec; none for a new run).
func (e *Engine) open(p *dsl.Pipeline, o RunOptions, recorded store.RunSpec) (*session, error) {
	return e.openShared(p, o, recorded, e.o.Shared)
}

// openShared builds the services for a run of p. A run goes on with the
// model overrides and the cassette it recorded, unless it is given
// others. With no key and no endpoint, a pipeline that ships
// <pipeline>.cassette.yaml replays it (saying so in one notice); one that
// does not fails here, before any model call.
func (e *Engine) openShared(p *dsl.Pipeline, o RunOptions, recorded store.RunSpec, shared llm.SharedLimits) (*session, error) {
	s := &session{e: e}
	models, err := overrides(p, recorded.Models, e.o.Models, o.Models)
	if err != nil {
		return nil, &ConfigError{err}
	}
	s.svc.Models = models
	secret.Register(p, e.o.LookupEnv)
	opts := llm.Options{CacheTTL: e.o.CacheTTL, Shared: shared, Env: e.o.LookupEnv, MaxAttempts: e.o.MaxAttempts}
	if e.o.Cache {
		opts.CacheDefault = llm.CacheOn
	}
	replay := e.o.Replay
	if replay == "" {
		replay = recorded.Replay
	}
	if replay == "" && !e.o.NoEndpoint && NeedsEndpoint(p, e.o.LookupEnv) {
		fallback := strings.TrimSuffix(strings.TrimSuffix(p.Path, ".yaml"), ".yml") + ".cassette.yaml"
		if _, err := os.Stat(fallback); err != nil {
			return nil, &ConfigError{ErrNoEndpoint}
		}
		replay = fallback
		e.notice("no OPENAI_API_KEY or OPENAI_BASE_URL: replaying %s (offline)", fallback)
	}
	if replay != "" {
		c, err := llm.LoadCassette(replay)
		if err != nil {
			return nil, &ConfigError{err}
		}
		opts.Replay = c
		// Recorded whole, so that a resume from another directory finds it.
		if s.replay, err = filepath.Abs(replay); err != nil {
			return nil, &ConfigError{err}
		}
	}
	switch {
	case o.Record != nil:
		opts.Record = o.Record
	case e.o.Record != "":
		s.record = llm.NewCassette()
		opts.Record = s.record
	}
	if tracing.Endpoint(e.o.OTLP) != "" {
		x, err := tracing.New(context.Background(), e.o.OTLP)
		if err != nil {
			return nil, &ConfigError{err}
		}
		s.traces = x
	}
	s.model, s.sandbox, s.mcp = llm.New(opts), sandbox.New(sandbox.Options{}), &mcpclient.Sessions{}
	s.svc.LLM, s.svc.Sandbox, s.svc.MCP = s.model, s.sandbox, s.mcp
	s.svc.OnDelta = o.OnDelta
	kinds := nodes.Kinds
	if e.o.Kinds != nil {
		kinds = e.o.Kinds
	}
	s.kinds = kinds(s.svc)
	return s, nil
}

// NeedsEndpoint reports whether p calls a model that has neither a key nor
// an endpoint to go to in the environment lookupEnv reads.
func NeedsEndpoint(p *dsl.Pipeline, lookupEnv func(string) (string, bool)) bool {
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
			ep := llm.ResolveEndpoint(m, lookupEnv)
			if ep.URLFrom == "default" && !ep.HasKey {
				need = true
			}
		}
	})
	return need
}

// useStore lets the model client answer from, and fill, st's response
// cache; the runs of a shared session each call it before they run.
func (s *session) useStore(st *store.Store) { s.cache.Do(func() { s.model.UseCache(st) }) }

// end stops the sandbox's workers and the MCP servers, flushes the
// traces and writes the recorded cassette, if any.
func (s *session) end() {
	s.sandbox.Close()
	s.mcp.Close()
	if s.traces != nil {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		if err := s.traces.Shutdown(ctx); err != nil {
			s.e.notice("exporting the run's trace: %v", err)
		}
	}
	if s.record == nil {
		return
	}
	if err := s.record.WriteFile(s.e.o.Record); err != nil {
		s.e.notice("writing the cassette %s: %v", s.e.o.Record, err)
		return
	}
	s.e.notice("recorded %d model exchange(s) to %s", s.record.Len(), s.e.o.Record)
}

// release ends s as a run on it ends, or fails to start, unless other
// runs share it.
func (s *session) release() {
	if !s.shared {
		s.end()
	}
}

// withTraces is sink, plus the trace exporter when runs are traced.
func (s *session) withTraces(sink runtime.EventSink) runtime.EventSink {
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
