package cluster

import (
	"bytes"
	"errors"
	"fmt"
	"net/url"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"strings"
	"sync"

	"github.com/flowrun/flowrun/dsl"
	"github.com/flowrun/flowrun/llm"
)

// errNotAllowed marks a pipeline this worker's operator did not allow it
// to run.
var errNotAllowed = errors.New("not allowed on this worker")

// allowed refuses a pipeline (or a pipeline it calls) that would start a
// local process, an MCP server speaking on stdin/stdout, unless the
// worker's operator allowed it: all of them, or that command. It also
// refuses one that would read a variable of the worker's environment the
// operator did not allow (env:, an MCP server's value from the
// environment, an api_key_env other than OPENAI_API_KEY), or send a key
// to a base_url other than the worker's own endpoint and those the
// operator allowed.
func (w *Worker) allowed(p *dsl.Pipeline) error {
	var refused []string
	seen := map[*dsl.Pipeline]bool{}
	check := func(q *dsl.Pipeline) {
		if seen[q] {
			return
		}
		seen[q] = true
		file := relTo(p, q.Path)
		refused = append(refused, w.refusedEnv(q, file)...)
		names := make([]string, 0, len(q.MCP))
		for name := range q.MCP {
			names = append(names, name)
		}
		sort.Strings(names)
		for _, name := range names {
			s := q.MCP[name]
			for _, v := range append(slices.Clone(s.Env), s.Headers...) {
				if v.FromEnv != "" && !slices.Contains(w.AllowEnv, v.FromEnv) {
					refused = append(refused, fmt.Sprintf("%s: mcp server %q would read the variable %s", file, name, v.FromEnv))
				}
			}
			if s.Command == "" || w.AllowMCPStdio || slices.Contains(w.AllowMCPCommands, s.Command) {
				continue
			}
			refused = append(refused, fmt.Sprintf("%s:%d:%d: mcp server %q would start the command %q", relTo(p, s.Pos.File), s.Pos.Line, s.Pos.Col, name, s.Command))
		}
	}
	check(p)
	dsl.Walk(p, func(q *dsl.Pipeline, _ *dsl.Node) { check(q) })
	if len(refused) == 0 {
		return nil
	}
	return fmt.Errorf("%w: %s (local processes, variables of the worker's environment and endpoints other than its own need the worker's operator to allow them)",
		errNotAllowed, strings.Join(refused, "; "))
}

// relTo names file as the coordinator knows it, relative to p's
// directory, not where this worker keeps it.
func relTo(p *dsl.Pipeline, file string) string {
	if rel, err := filepath.Rel(filepath.Dir(p.Path), file); err == nil {
		return rel
	}
	return file
}

// standardKeyEnv is the one variable a pipeline may take a key from
// unless the worker's operator allows others.
const standardKeyEnv = "OPENAI_API_KEY"

// refusedEnv says what of q's env: names and models this worker does not
// allow.
func (w *Worker) refusedEnv(q *dsl.Pipeline, file string) []string {
	var refused []string
	for _, name := range q.Env {
		if !slices.Contains(w.AllowEnv, name) {
			refused = append(refused, fmt.Sprintf("%s: env: names %s", file, name))
		}
	}
	models := make([]string, 0, len(q.Models))
	for name := range q.Models {
		models = append(models, name)
	}
	sort.Strings(models)
	for _, name := range models {
		m := q.Models[name]
		ep := llm.ResolveEndpoint(m, os.LookupEnv)
		if ep.KeyEnv == "" {
			continue // no key goes with its requests
		}
		if ep.KeyEnv != standardKeyEnv && !slices.Contains(w.AllowKeyEnv, ep.KeyEnv) {
			refused = append(refused, fmt.Sprintf("%s: model %q: api_key_env names %s", file, name, ep.KeyEnv))
		}
		if ep.URLFrom == "base_url" && !w.endpointAllowed(m.BaseURL) {
			refused = append(refused, fmt.Sprintf("%s: model %q would send a key to %s", file, name, ep.URL))
		}
	}
	return refused
}

// endpointAllowed says whether this worker sends keys to base: its own
// endpoint (OPENAI_BASE_URL, or OpenAI's), or one its operator allowed.
func (w *Worker) endpointAllowed(base string) bool {
	norm := func(u string) string { return strings.TrimRight(strings.TrimSpace(u), "/") }
	own := llm.DefaultBaseURL
	if v, ok := os.LookupEnv("OPENAI_BASE_URL"); ok && norm(v) != "" {
		own = v
	}
	for _, allowed := range append([]string{own}, w.AllowEndpoints...) {
		if norm(allowed) == norm(base) {
			return true
		}
	}
	return false
}

// endpointPlaceholder stands for a worker's model endpoint in what it
// publishes.
const endpointPlaceholder = "[worker endpoint]"

// endpoints are the model endpoints a worker calls, which it keeps out of
// what it publishes: the coordinator and everyone on the account learn
// neither its URLs nor the user names in them.
type endpoints struct {
	mu    sync.RWMutex
	names []string // longest first, so that no shorter one splits a longer
}

// add the endpoints of q's models, as the model client names them in
// events and errors: the URL (with its user name), without it, and its
// host.
func (e *endpoints) add(q *dsl.Pipeline) {
	e.mu.Lock()
	defer e.mu.Unlock()
	for _, m := range q.Models {
		shown := llm.ResolveEndpoint(m, os.LookupEnv).URL
		names := []string{shown}
		if u, err := url.Parse(shown); err == nil && u.Host != "" {
			u.User = nil
			names = append(names, u.String(), u.Host)
		}
		for _, n := range names {
			if !slices.Contains(e.names, n) {
				e.names = append(e.names, n)
			}
		}
	}
	sort.Slice(e.names, func(i, j int) bool { return len(e.names[i]) > len(e.names[j]) })
}

// scrub replaces the endpoints in data.
func (e *endpoints) scrub(data []byte) []byte {
	if e == nil {
		return data
	}
	e.mu.RLock()
	defer e.mu.RUnlock()
	for _, n := range e.names {
		data = bytes.ReplaceAll(data, []byte(n), []byte(endpointPlaceholder))
	}
	return data
}
