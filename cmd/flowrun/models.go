package main

import (
	"flag"
	"fmt"
	"io"
	"maps"
	"strings"
	"time"

	"github.com/flowrun/flowrun/dsl"
	"github.com/flowrun/flowrun/engine"
	"github.com/flowrun/flowrun/llm"
	"github.com/flowrun/flowrun/llmconf"
)

// modelFlags are the flags about model calls shared by the commands that
// run pipelines.
type modelFlags struct {
	record, replay string
	models         inputFlags
	cache          bool
	cacheTTL       time.Duration
	otel           string
}

func (m *modelFlags) register(fs *flag.FlagSet) {
	fs.StringVar(&m.record, "record", "", "record every model exchange into this cassette `file`")
	fs.StringVar(&m.replay, "replay", "", "answer every model call from this cassette `file`, with no network")
	fs.BoolVar(&m.cache, "cache", false, "answer identical model requests from the run store's response cache (temperature 0 only, unless a model or node says cache: always)")
	fs.DurationVar(&m.cacheTTL, "cache-ttl", 0, "treat cached replies older than this `duration` as misses and replace them (default: no limit)")
	fs.Var(&m.models, "model", "use another model id for a named model, as `NAME=MODEL` (repeatable)")
	fs.StringVar(&m.otel, "otel", "", "export a trace of every run to this OTLP `URL` (HTTP, or gRPC with OTEL_EXPORTER_OTLP_PROTOCOL=grpc; default: $OTEL_EXPORTER_OTLP_ENDPOINT)")
}

// options are the engine's options the flags give, with the store at
// storePath; notices go to stderr.
func (m *modelFlags) options(storePath string, stderr io.Writer) engine.Options {
	return engine.Options{StorePath: storePath, Models: m.models, Record: m.record, Replay: m.replay,
		Cache: m.cache, CacheTTL: m.cacheTTL, OTLP: m.otel, Notices: stderr}
}

func (m *modelFlags) engine(storePath string, stderr io.Writer) (*engine.Engine, error) {
	return engine.New(m.options(storePath, stderr))
}

// warnUnpriced warns, under a cost cap, of each model of p (after the
// NAME=MODEL overrides) that has no price: the cap cannot hold for it.
func warnUnpriced(stderr io.Writer, cmd string, p *dsl.Pipeline, overrides []string) {
	for _, e := range llm.Unpriced(overridden(p, overrides)) {
		fmt.Fprintf(stderr, "%s: warning: %v\n", cmd, e)
	}
}

// overridden are p's models after the NAME=MODEL overrides.
func overridden(p *dsl.Pipeline, overrides []string) map[string]*llmconf.Model {
	models := maps.Clone(p.Models)
	for _, kv := range overrides {
		name, id, _ := strings.Cut(kv, "=")
		if m, ok := models[name]; ok {
			if o, err := llmconf.Override(m, id); err == nil {
				models[name] = o
			}
		}
	}
	return models
}
