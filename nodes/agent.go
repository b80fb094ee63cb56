package nodes

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/flowrun/flowrun/dsl"
	"github.com/flowrun/flowrun/errclass"
	"github.com/flowrun/flowrun/figures"
	"github.com/flowrun/flowrun/jsonvalue"
	"github.com/flowrun/flowrun/llm"
	"github.com/flowrun/flowrun/runtime"
)

// defaultMaxSteps bounds an agent that does not set max_steps.
const defaultMaxSteps = 10

// agentNode runs a tool-calling loop of at most max_steps model turns.
// The model's calls to tools are executed and answered; a call to a finish
// tool ends the loop with it. The last turn is forced to call a finish tool
// (or, when there are none, to answer without tools), so a bounded agent
// always ends with a decision. A turn whose tool calls are truncated or do
// not match their tool's parameters is asked again, tool_retries times,
// and is kept neither in the conversation nor in the memory.
// Output: {finish: {name, args} or null, steps, text, usage, cost_usd}.
type agentNode struct{ svc *Services }

// CheckNode refuses, before the run starts, an agent listing a tool that
// cannot run here.
func (k agentNode) CheckNode(_ *dsl.Pipeline, n *dsl.Node) error {
	for _, name := range n.Agent().Tools {
		if err := k.svc.checkTool(name); err != nil {
			return err
		}
	}
	return nil
}

func (k agentNode) Execute(ctx context.Context, s *runtime.Scope, n *dsl.Node) (runtime.Outcome, error) {
	a := n.Agent()
	tools, err := k.svc.agentTools(ctx, s.Pipeline(), a)
	if err != nil {
		return runtime.Outcome{}, err
	}
	c, err := k.svc.startConversation(ctx, s, &a.LLM)
	if err != nil {
		return runtime.Outcome{}, err
	}
	r := &agentRun{svc: k.svc, s: s, n: n, a: a, c: c, tools: map[string]*tool{}, maxSteps: a.MaxSteps}
	if r.maxSteps <= 0 {
		r.maxSteps = defaultMaxSteps
	}
	for _, t := range tools {
		r.specs = append(r.specs, t.spec)
		r.tools[t.spec.Name] = t
	}
	out, err := r.loop(ctx)
	if err != nil {
		return runtime.Outcome{}, err
	}
	if err := c.remember(s); err != nil {
		return runtime.Outcome{}, err
	}
	return runtime.Outcome{Output: out}, nil
}

// agentRun is one execution of an agent node.
type agentRun struct {
	svc      *Services
	s        *runtime.Scope
	n        *dsl.Node
	a        *dsl.Agent
	c        *conversation
	tools    map[string]*tool
	specs    []llm.ToolSpec
	maxSteps int

	usage llm.Usage
	cost  float64
	text  string // the last assistant text that was not empty
}

func (r *agentRun) loop(ctx context.Context) (map[string]any, error) {
	var finish map[string]any
	steps, mustCallTool := 0, false
	for steps < r.maxSteps && finish == nil {
		steps++
		choice := r.choice(steps == r.maxSteps, mustCallTool)
		resp, err := r.turn(ctx, choice, steps)
		if err != nil {
			return nil, err
		}
		r.c.add(resp.Message())
		if resp.Text != "" {
			r.text = resp.Text
		}
		if len(resp.ToolCalls) == 0 {
			if len(r.a.Finish) == 0 {
				break
			}
			// The model answered in words while it owes a finish call:
			// the next turn must call a tool rather than be nudged in
			// words the pipeline's author did not write.
			mustCallTool = true
			continue
		}
		mustCallTool = false
		if finish, err = r.runCalls(ctx, steps, resp.ToolCalls); err != nil {
			return nil, err
		}
	}
	out := map[string]any{"finish": nil, "steps": steps, "text": r.text, "usage": usageMap(r.usage), "cost_usd": r.cost}
	if finish != nil {
		out["finish"] = finish
	}
	return out, nil
}

// choice is the tool_choice of a turn: on the last step, one of the finish
// tools (or no tool when there are none); after a reply without a tool
// call, any tool; else the model's choice.
func (r *agentRun) choice(last, mustCallTool bool) llm.ToolChoice {
	switch {
	case len(r.specs) == 0:
		return llm.ToolChoice{}
	case last && len(r.a.Finish) > 0:
		return llm.ToolChoice{Mode: "required", Tools: r.a.Finish}
	case last:
		return llm.ToolChoice{Mode: "none"}
	case mustCallTool:
		return llm.ToolChoice{Mode: "required"}
	}
	return llm.ToolChoice{}
}

// turn asks the model for its next move, asking again (tool_retries times)
// while the reply's tool calls cannot be run. A rejected reply costs its
// tokens but is not kept.
func (r *agentRun) turn(ctx context.Context, choice llm.ToolChoice, step int) (*llm.Response, error) {
	for try := 1; ; try++ {
		resp, err := r.svc.call(ctx, r.s, r.n, r.c, llm.Request{Temperature: r.a.Temperature, MaxTokens: r.a.MaxTokens,
			Tools: r.specs, ToolChoice: choice})
		if resp != nil {
			r.usage = r.usage.Add(resp.Usage)
			r.cost = figures.RoundUSD(r.cost + resp.CostUSD)
		}
		if err != nil {
			return nil, err
		}
		problem := r.problem(resp, choice)
		if problem == "" {
			return resp, nil
		}
		if try > r.a.ToolRetries {
			return nil, runtime.Errorf(errclass.InvalidOutput, "step %d: %s (asked %d times; tool_retries: %d)", step, problem, try, r.a.ToolRetries)
		}
	}
}

// problem says why a reply's tool calls cannot be run, or "".
func (r *agentRun) problem(resp *llm.Response, choice llm.ToolChoice) string {
	names := make([]string, len(resp.ToolCalls))
	for i, tc := range resp.ToolCalls {
		names[i] = tc.Name
	}
	switch {
	case choice.Mode == "none" && len(names) > 0:
		return fmt.Sprintf("on its last step (max_steps: %d) the model must answer without tools, but it called %s", r.maxSteps, strings.Join(names, ", "))
	case len(choice.Tools) > 0 && !slices.ContainsFunc(names, func(n string) bool { return slices.Contains(choice.Tools, n) }):
		return fmt.Sprintf("on its last step (max_steps: %d) the model must call a finish tool (%s), but it %s", r.maxSteps, strings.Join(choice.Tools, ", "), called(names))
	case choice.Mode == "required" && len(names) == 0:
		return "the model answered without calling a tool, after it had been told to call one"
	}
	for _, tc := range resp.ToolCalls {
		t := r.tools[tc.Name]
		switch {
		case t == nil:
			return fmt.Sprintf("the model called tool %q, which this agent does not have", tc.Name)
		case tc.ArgsError != "":
			msg := fmt.Sprintf("tool %s: %s", tc.Name, tc.ArgsError)
			if resp.FinishReason == "length" {
				msg += " (the reply was cut off at the token limit: raise max_tokens)"
			}
			return msg
		}
		if _, ok := tc.Args.(map[string]any); !ok {
			return fmt.Sprintf("tool %s: the arguments are not a JSON object: %s", tc.Name, tc.Arguments)
		}
		if err := jsonvalue.Validate(t.spec.Parameters, tc.Args); err != nil {
			return fmt.Sprintf("tool %s: the arguments do not match its parameters: %v", tc.Name, err)
		}
	}
	return ""
}

func called(names []string) string {
	if len(names) == 0 {
		return "called no tool"
	}
	return "called " + strings.Join(names, ", ")
}

// runCalls executes a turn's tool calls in order and answers each with a
// tool message. The first finish call is the agent's answer; it returns it.
// A tool that fails answers {"error": ...}, so that the model can recover;
// only a stop (budget, timeout, cancellation) ends the node.
func (r *agentRun) runCalls(ctx context.Context, step int, calls []llm.ToolCall) (map[string]any, error) {
	var finish map[string]any
	count := map[string]int{}
	for _, tc := range calls {
		count[tc.Name]++
	}
	seen := map[string]int{}
	var images []string
	for _, tc := range calls {
		t, args := r.tools[tc.Name], tc.Args.(map[string]any)
		ev := runtime.ToolCall{Name: tc.Name, Args: args}
		if t.name != "" {
			ev.Name = t.name
		}
		start := time.Now()
		var reply any
		switch {
		case t.finish && finish == nil:
			finish = map[string]any{"name": tc.Name, "args": args}
			// Answered all the same: a memory holding this turn is sent
			// again later, and a call without its answer is refused.
			reply = map[string]any{"ok": true}
		case t.finish:
			ev.Error = fmt.Sprintf("not taken: the agent already finished with %s in this turn", finish["name"])
			reply = map[string]any{"error": ev.Error}
		default:
			seen[tc.Name]++
			at := callSite{dir: fmt.Sprintf("%s[%d]/", r.n.ID, step), name: ev.Name}
			if count[tc.Name] > 1 {
				at.name = fmt.Sprintf("%s[%d]", ev.Name, seen[tc.Name])
			}
			result, err := r.runTool(ctx, t, tc.Name, at, args)
			if m, ok := result.(mcpReply); ok {
				result, images = m.value, append(images, m.images...)
			}
			if err != nil {
				if stopping(ctx, err) || endsNode(err) {
					return nil, err
				}
				ev.Error = err.Error()
				reply = map[string]any{"error": ev.Error}
			} else {
				ev.Result, reply = result, result
			}
		}
		r.emit(&ev, start)
		content, err := json.Marshal(reply)
		if err != nil {
			content, _ = json.Marshal(map[string]any{"error": fmt.Sprintf("the result of %s cannot be written as JSON: %v", tc.Name, err)})
		}
		r.c.add(llm.Message{Role: llm.RoleTool, ToolCallID: tc.ID, Text: string(content)})
	}
	if len(images) > 0 {
		// Tool messages carry text only: the images a tool returned
		// follow the turn's answers, as the model would see a user's.
		r.c.add(llm.Message{Role: llm.RoleUser, Text: "Images returned by the tool calls above:", Images: images})
	}
	return finish, nil
}

// runTool runs a tool the model called, or takes its mocked result: MCP
// tools (named server.tool) have mocks of their own.
func (r *agentRun) runTool(ctx context.Context, t *tool, name string, at callSite, args map[string]any) (any, error) {
	if r.svc.ToolMocks != nil && t.name == "" {
		if result, ok, err := r.svc.ToolMocks.Call(name, r.s.Path(r.n.ID), args); ok {
			return result, err
		}
	}
	return t.run(ctx, r.s, at, args)
}

func (r *agentRun) emit(tc *runtime.ToolCall, start time.Time) {
	r.s.Emit(runtime.Event{Type: runtime.EventToolCall, Path: r.s.Path(r.n.ID), Node: r.n.ID, Kind: string(r.n.Kind),
		Attempt: r.s.Attempt(), DurationMS: float64(time.Since(start).Microseconds()) / 1000, Tool: tc})
}

// stopping reports whether a tool's error must end the node rather than
// be told to the model: the run is stopping or the node's time is up.
func stopping(ctx context.Context, err error) bool {
	var stop *runtime.StopError
	return errors.As(err, &stop) || ctx.Err() != nil
}
