package batch

import (
	"context"
	"fmt"
	"strconv"
	"strings"

	"github.com/flowrun/flowrun/dsl"
	"github.com/flowrun/flowrun/runtime"
	"github.com/flowrun/flowrun/store"
)

// Trajectory fills run's trajectory (route, iterations, tool calls,
// questions, turns) from the events run runID recorded in st; p gives
// the loop and node ids, each counted from 0 so that a metric never reads
// a missing key.
func Trajectory(ctx context.Context, st *store.Store, p *dsl.Pipeline, runID string, run *dsl.ScoreRun) error {
	events, err := st.Events(ctx, runID)
	if err != nil {
		return fmt.Errorf("reading the events of run %s: %w", runID, err)
	}
	loops, nodes := dsl.TrajectoryNodes(p)
	run.Route, run.ToolCalls, run.Questions = []string{}, []dsl.ScoreToolCall{}, []dsl.ScoreQuestion{}
	run.Iterations, run.Turns = make(map[string]int, len(loops)), make(map[string]int, len(nodes))
	for _, id := range loops {
		run.Iterations[id] = 0
	}
	for _, id := range nodes {
		run.Turns[id] = 0
	}
	for _, e := range events {
		switch e.Type {
		case runtime.EventNodeStarted:
			run.Route = append(run.Route, e.Path)
			countIterations(e.Path, run.Iterations)
		case runtime.EventModelTurn:
			run.Turns[e.Node]++
		case runtime.EventToolCall:
			if e.Tool != nil {
				run.ToolCalls = append(run.ToolCalls, dsl.ScoreToolCall{Node: e.Node, Tool: e.Tool.Name, Arguments: e.Tool.Args, OK: e.Tool.Error == "" && e.Error == ""})
			}
		case runtime.EventQuestion:
			if e.Status != runtime.StatusWaiting {
				run.Questions = append(run.Questions, dsl.ScoreQuestion{Node: e.Node, Kind: e.Kind, Question: e.Message, Answer: e.Output})
			}
		}
	}
	return nil
}

// countIterations raises each loop's count to the iteration a node path
// shows it in: "refine[2]/reason" is refine's second iteration.
func countIterations(path string, iterations map[string]int) {
	for _, seg := range strings.Split(path, "/") {
		id, rest, ok := strings.Cut(seg, "[")
		if !ok {
			continue
		}
		if _, isLoop := iterations[id]; !isLoop {
			continue
		}
		if n, err := strconv.Atoi(strings.TrimSuffix(rest, "]")); err == nil {
			iterations[id] = max(iterations[id], n)
		}
	}
}
