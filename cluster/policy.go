package cluster

import (
	"errors"
	"fmt"
	"path/filepath"
	"slices"
	"sort"
	"strings"

	"github.com/flowrun/flowrun/dsl"
)

// errNotAllowed marks a pipeline this worker's operator did not allow it
// to run.
var errNotAllowed = errors.New("not allowed on this worker")

// allowed refuses a pipeline (or a pipeline it calls) that would start a
// local process, an MCP server speaking on stdin/stdout, unless the
// worker's operator allowed it: all of them, or that command.
func (w *Worker) allowed(p *dsl.Pipeline) error {
	var refused []string
	seen := map[*dsl.Pipeline]bool{}
	check := func(q *dsl.Pipeline) {
		if seen[q] {
			return
		}
		seen[q] = true
		names := make([]string, 0, len(q.MCP))
		for name := range q.MCP {
			names = append(names, name)
		}
		sort.Strings(names)
		for _, name := range names {
			s := q.MCP[name]
			if s.Command == "" || w.AllowMCPStdio || slices.Contains(w.AllowMCPCommands, s.Command) {
				continue
			}
			file := s.Pos.File
			if rel, err := filepath.Rel(filepath.Dir(p.Path), file); err == nil {
				file = rel // as the coordinator knows it, not where this worker keeps it
			}
			refused = append(refused, fmt.Sprintf("%s:%d:%d: mcp server %q would start the command %q", file, s.Pos.Line, s.Pos.Col, name, s.Command))
		}
	}
	check(p)
	dsl.Walk(p, func(q *dsl.Pipeline, _ *dsl.Node) { check(q) })
	if len(refused) == 0 {
		return nil
	}
	return fmt.Errorf("%w: %s (local processes need the worker's operator to allow them)", errNotAllowed, strings.Join(refused, "; "))
}
