package engine

import (
	"context"
	"net/http"
	"sync"

	"github.com/flowrun/flowrun/clock"
	"github.com/flowrun/flowrun/dsl"
	"github.com/flowrun/flowrun/engine/internal/durable"
	"github.com/flowrun/flowrun/engine/internal/services"
	"github.com/flowrun/flowrun/llm"
	"github.com/flowrun/flowrun/nodes"
	"github.com/flowrun/flowrun/runtime"
	"github.com/flowrun/flowrun/sandbox"
)

// Doubles stand in for services the engine would make for a run, so that
// a test's mocks (flowrun test's cases) or a benchmark's in-process
// endpoint (cmd/bench) run on the engine's path rather than beside it:
// the engine still makes the rest, checks the node kinds and prepares
// the inputs.
type Doubles struct {
	// Respond answers every model call in place of an endpoint
	// (llm.Options.Respond), through the real model client, whose
	// retries, structured output checks and pricing apply: the run needs
	// no endpoint, so none is looked for and no cassette replayed for
	// want of one.
	Respond llm.Responder
	// Replay names a cassette that answers model calls (before Respond)
	// and MCP tool calls, in place of Options.Replay.
	Replay string
	// HTTPClient sends the model client's requests (a fake endpoint in
	// process).
	HTTPClient *http.Client
	// Clock is what the run waits on: its retry backoff and its model
	// client's backoff and rate limits. A clock.Fake lets them pass at once.
	Clock clock.Clock
	// MCP and Tools answer the MCP and agent tool calls they mock
	// (nodes.Services.MCPMocks and ToolMocks). With MCP no MCP server is
	// started: a tool it does not mock is answered by the cassette
	// replayed, or not at all.
	MCP   nodes.MCPMocks
	Tools nodes.ToolMocks
	// Kinds, when set, changes the node kinds the engine made for the run
	// (a case answers its tool and code nodes from its mocks).
	Kinds func(runtime.Registry) runtime.Registry
}

// InMemory keeps a run in memory only: it is recorded nowhere (no store
// is opened for it, no stop asked from elsewhere reaches it), it is not
// traced, its events go to RunOptions.Sink alone and it ends with its Run. A flowrun test
// case runs so, and cmd/bench measures the runtime so.
type InMemory struct {
	// Restore are checkpoints the run goes on from, as a fork goes on
	// from its parent's (a case made from a forked or resumed run);
	// Edits are the changes already made on them and on the inputs
	// (Edited makes both), told in run_started.
	Restore []*runtime.Checkpoint
	Edits   []runtime.Edit
	// Checkpointer, when set, receives a checkpoint after every node;
	// without one no checkpoint is made.
	Checkpointer runtime.Checkpointer
}

// startInMemory starts a run of p on s, kept as m says.
func (e *Engine) startInMemory(ctx context.Context, s *services.Session, p *dsl.Pipeline, inputs map[string]any, o RunOptions) (*Run, error) {
	id := o.ID
	if id == "" {
		id = runtime.NewRunID()
	}
	m := o.InMemory
	pr, err := e.runner(nil, s, p, o).PrepareInMemory(id, p, inputs,
		durable.InMemory{Restore: m.Restore, Edits: m.Edits, Checkpointer: m.Checkpointer})
	if err != nil {
		s.Release()
		return nil, preparing(err)
	}
	return e.launch(ctx, s, pr), nil
}

// sharedSandbox is the one sandbox of an engine with
// Options.ShareSandbox, made at its first run.
type sharedSandbox struct {
	once sync.Once
	sb   *sandbox.Sandbox
}

func (sh *sharedSandbox) get() *sandbox.Sandbox {
	sh.once.Do(func() { sh.sb = sandbox.New(sandbox.Options{}) })
	return sh.sb
}

// close stops its workers, if it was made.
func (sh *sharedSandbox) close() {
	sh.once.Do(func() {})
	if sh.sb != nil {
		sh.sb.Close()
	}
}

// doubles are the services.Doubles of a run given d (nil: none).
func (e *Engine) doubles(d *Doubles) services.Doubles {
	var out services.Doubles
	if e.o.ShareSandbox {
		out.Sandbox = e.sandbox.get()
	}
	if d != nil {
		out.Respond, out.HTTPClient, out.Clock, out.MCP, out.Tools, out.Kinds = d.Respond, d.HTTPClient, d.Clock, d.MCP, d.Tools, d.Kinds
	}
	return out
}
