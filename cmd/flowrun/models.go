package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"strings"
	"time"

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

// modelFlags are the flags about model calls shared by run and resume.
type modelFlags struct {
	record, replay string
	models         inputFlags
	cache          bool
	cacheTTL       time.Duration
	otel           string
	// shared is not a flag: flowrun worker sets it to the rate budget the
	// workers share.
	shared llm.SharedLimits
	// remote is not a flag: the runs happen on workers (batch --nats), so
	// this process needs a model endpoint only for judge metrics.
	remote bool
	// recordInto is not a flag: flowrun mcp serve records each run into a
	// cassette of its own, and writes it itself once it knows the run.
	recordInto *llm.Cassette
}

func (m *modelFlags) register(fs *flag.FlagSet) {
	fs.StringVar(&m.record, "record", "", "record every model exchange into this cassette `file`")
	fs.StringVar(&m.replay, "replay", "", "answer every model call from this cassette `file`, with no network")
	fs.BoolVar(&m.cache, "cache", false, "answer identical model requests from the run store's response cache (temperature 0 only, unless a model or node says cache: always)")
	fs.DurationVar(&m.cacheTTL, "cache-ttl", 0, "treat cached replies older than this `duration` as misses and replace them (default: no limit)")
	fs.Var(&m.models, "model", "use another model id for a named model, as `NAME=MODEL`, with options: NAME=[MODEL][,responses][,background][,poll=5s] (repeatable)")
	fs.StringVar(&m.otel, "otel", "", "export a trace of every run to this OTLP `URL` (HTTP, or gRPC with OTEL_EXPORTER_OTLP_PROTOCOL=grpc; default: $OTEL_EXPORTER_OTLP_ENDPOINT)")
}

// modelSession is the model client for one command and what to do at its end.
type modelSession struct {
	svc    nodes.Services
	record *llm.Cassette
	path   string
	// traces is nil unless runs are traced (--otel or OTEL_EXPORTER_OTLP_*).
	traces *tracing.Exporter
}

// startModels builds the model client for p. With no key and no endpoint,
// a pipeline that ships <pipeline>.cassette.yaml replays it (saying so in
// one line); one that does not fails here, before any model call.
func startModels(p *dsl.Pipeline, f *modelFlags, stderr io.Writer) (*modelSession, error) {
	ms := &modelSession{}
	ms.svc.Models = map[string]string{}
	for _, kv := range f.models {
		name, id, ok := strings.Cut(kv, "=")
		if !ok || name == "" || id == "" {
			return nil, fmt.Errorf("--model %q: write it as NAME=MODEL", kv)
		}
		m, declared := p.Models[name]
		if !declared {
			return nil, fmt.Errorf("--model %q: the pipeline declares no model %q", kv, name)
		}
		if _, err := llmconf.Override(m, id); err != nil {
			return nil, fmt.Errorf("--model %q: %w", kv, err)
		}
		ms.svc.Models[name] = id
	}
	registerSecrets(p)
	if f.cacheTTL < 0 {
		return nil, fmt.Errorf("--cache-ttl %s: give a positive duration such as 24h", f.cacheTTL)
	}
	opts := llm.Options{CacheTTL: f.cacheTTL, Shared: f.shared}
	if f.cache {
		opts.CacheDefault = llm.CacheOn
	}
	replay := f.replay
	if replay == "" && !f.remote && needsEndpoint(p) {
		fallback := strings.TrimSuffix(strings.TrimSuffix(p.Path, ".yaml"), ".yml") + ".cassette.yaml"
		if _, err := os.Stat(fallback); err != nil {
			return nil, errors.New("no model endpoint: set OPENAI_API_KEY (or OPENAI_BASE_URL for a local OpenAI-compatible server), or replay a recorded run with --replay FILE")
		}
		replay = fallback
		fmt.Fprintf(stderr, "no OPENAI_API_KEY or OPENAI_BASE_URL: replaying %s (offline)\n", fallback)
	}
	if replay != "" {
		c, err := llm.LoadCassette(replay)
		if err != nil {
			return nil, err
		}
		opts.Replay = c
	}
	switch {
	case f.recordInto != nil:
		opts.Record = f.recordInto
	case f.record != "":
		ms.record, ms.path = llm.NewCassette(), f.record
		opts.Record = ms.record
	}
	if tracing.Endpoint(f.otel) != "" {
		x, err := tracing.New(context.Background(), f.otel)
		if err != nil {
			return nil, err
		}
		ms.traces = x
	}
	ms.svc.LLM = llm.New(opts)
	ms.svc.Sandbox = sandbox.New(sandbox.Options{})
	ms.svc.MCP = &mcpclient.Sessions{}
	return ms, nil
}

// needsEndpoint reports whether p calls a model that has neither a key nor
// an endpoint to go to.
func needsEndpoint(p *dsl.Pipeline) bool {
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
			ep := llm.ResolveEndpoint(m, os.LookupEnv)
			if ep.URLFrom == "default" && !ep.HasKey {
				need = true
			}
		}
	})
	return need
}

// useStore lets the model client answer from, and fill, st's response cache.
func (ms *modelSession) useStore(st *store.Store) { ms.svc.LLM.UseCache(st) }

// finish stops the sandbox's workers and the MCP servers, and writes the recorded cassette, if any.
func (ms *modelSession) finish(stderr io.Writer) {
	ms.svc.Sandbox.Close()
	ms.svc.MCP.Close()
	if ms.traces != nil {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		if err := ms.traces.Shutdown(ctx); err != nil {
			fmt.Fprintf(stderr, "flowrun: --otel: %v\n", err)
		}
	}
	if ms.record == nil {
		return
	}
	if err := ms.record.WriteFile(ms.path); err != nil {
		fmt.Fprintf(stderr, "flowrun: --record: %v\n", err)
		return
	}
	fmt.Fprintf(stderr, "recorded %d model exchange(s) to %s\n", ms.record.Len(), ms.path)
}

// withTraces is sink, plus the trace exporter when runs are traced.
func (ms *modelSession) withTraces(sink runtime.EventSink) runtime.EventSink {
	f := fanout{sink}
	ms.traceInto(&f)
	return &f
}

// traceInto adds the trace exporter, when runs are traced, to f.
func (ms *modelSession) traceInto(f *fanout) {
	if ms.traces != nil {
		*f = append(*f, ms.traces)
	}
}

// fanout gives every event to each of its sinks in turn.
type fanout []runtime.EventSink

func (f *fanout) Event(e runtime.Event) {
	for _, s := range *f {
		s.Event(e)
	}
}
