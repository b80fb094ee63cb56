package flowtest

import (
	"bytes"
	"encoding/json"
	"fmt"
	"maps"
	"path/filepath"
	"reflect"
	"slices"
	"strings"

	"gopkg.in/yaml.v3"

	"github.com/flowrun/flowrun/dsl"
	"github.com/flowrun/flowrun/errclass"
	"github.com/flowrun/flowrun/jsonvalue"
	"github.com/flowrun/flowrun/llm"
	"github.com/flowrun/flowrun/runtime"
)

// RecordedRun is what FromRun needs of a stored run: its pipeline, inputs
// and events in order.
type RecordedRun struct {
	ID       string
	Pipeline *dsl.Pipeline
	// PipelinePath is the pipeline file as the test file names it:
	// relative to the directory the test file is written to.
	PipelinePath string
	Inputs       map[string]any
	Events       []runtime.Event
	// Restore, when set, is where the run went on from (a fork, or a
	// resume with edits): the case restores it and makes Edits, and Events
	// are the run's from there on.
	Restore *Restore
	Edits   []runtime.Edit
	// Expected, for a run a batch scored, is what its dataset row
	// expected of it.
	Expected *Expected
}

// Expected is what a dataset row expected of a run that a batch scored,
// so that a case made from a failing item does not pin its wrong answer.
type Expected struct {
	Source string // where it comes from: "batch B, item KEY"
	// Outputs are the dataset's values of the outputs the batch compared
	// with a dataset field (outputs.X == item.Y), by output: the case
	// expects them instead of what the run gave.
	Outputs map[string]any
	// Fields, when Outputs is empty, are the dataset fields the batch's
	// metrics read, and Why says why none could be pinned: the case
	// expects what the run gave and says so in a comment.
	Fields map[string]any
	Why    string
}

// FromRun writes a test file with one case that replays a run offline:
// every model turn of an llm or agent node, and every finish of a tool or
// code node, becomes a mock of that node at its run path (the iteration,
// map item or branch: refine[2]/write), in call order; the built-in and
// MCP tools agents called get their results under tools:, by name in call
// order; a person's answers go under answers:. A tool the pipeline
// implements (with a pipeline or an llm template) runs in the case, so a
// run whose model calls happened inside one cannot be converted: the
// error names the call. The case expects the run's status
// (and error class), its route and its outputs. A run that went on from
// checkpoints (Restore) becomes a case that restores them, with the
// run's edits under edits:. Map items and parallel
// branches may interleave otherwise in a rerun, so with map or parallel
// nodes the case expects the route's steps in any order.
func FromRun(r RecordedRun) ([]byte, error) {
	static := map[string]*dsl.Node{}
	concurrent := false
	for _, sn := range StaticNodes(r.Pipeline) {
		static[sn.Path] = sn.Node
		concurrent = concurrent || sn.Node.Kind == dsl.KindParallel || sn.Node.Kind == dsl.KindMap
	}
	var route []string
	open := map[string]int{}       // where in route each node that has not ended started
	var failedClass errclass.Class // of the last node that failed: the run's, when it failed
	c := caseDoc{Name: "replays run " + r.ID, Inputs: r.Inputs, Mocks: map[string][]replyDoc{}, Tools: map[string][]replyDoc{}, Answers: map[string]any{}}
	if r.Restore != nil {
		doc, err := restoreOf(r.Restore)
		if err != nil {
			return nil, fmt.Errorf("the checkpoints it went on from: %w", err)
		}
		c.Restore = doc
	}
	if len(r.Edits) > 0 {
		c.Edits = map[string]any{}
		for _, e := range r.Edits {
			c.Edits[e.Key] = e.New
		}
	}
	var finished *runtime.Event
	for i := range r.Events {
		e := &r.Events[i]
		path := Strip(e.Path)
		switch e.Type {
		case runtime.EventNodeStarted:
			if static[path] == nil {
				continue // a node of a tool's pipeline, which runs as the tool
			}
			// A node that starts again at the same path without having
			// ended (it waited, and the run was resumed) is one step.
			if at, ok := open[e.Path]; ok {
				route[at] = ""
			}
			open[e.Path] = len(route)
			route = append(route, e.Path)
		case runtime.EventModelTurn:
			if e.Turn == nil || llm.AnsweredOffline(e.Turn.Endpoint) {
				// An offline model answers the case as it answered the run,
				// and as the pipeline changed would: a case made from a
				// failing item then passes once its prompt is fixed.
				continue
			}
			if static[path] == nil {
				return nil, fmt.Errorf("model turn at %s: the pipeline has no node there (a tool's pipeline or an llm tool), so the test cannot mock it", e.Path)
			}
			rep, err := modelReply(e.Turn)
			if err != nil {
				return nil, fmt.Errorf("model turn at %s: %w", e.Path, err)
			}
			c.Mocks[e.Path] = append(c.Mocks[e.Path], rep)
		case runtime.EventNodeFinished, runtime.EventNodeFailed:
			delete(open, e.Path)
			if e.Type == runtime.EventNodeFailed {
				failedClass = e.Class
			}
			if n := static[path]; n != nil && (n.Kind == dsl.KindTool || n.Kind == dsl.KindCode) {
				c.Mocks[e.Path] = append(c.Mocks[e.Path], nodeReply(e))
			}
		case runtime.EventToolCall:
			if e.Tool == nil {
				continue
			}
			n := static[path]
			switch {
			case n == nil || n.Agent() == nil:
				continue
			case slices.Contains(n.Agent().Finish, e.Tool.Name):
				continue // a finish tool is the model's answer, which its turn holds
			case r.Pipeline.Tools[e.Tool.Name] != nil:
				continue // a pipeline or llm tool runs in the case as it did in the run
			}
			rep := replyDoc{Output: &anyValue{e.Tool.Result}}
			if e.Tool.Error != "" {
				rep = replyDoc{Error: "tool", Message: e.Tool.Error}
			}
			c.Tools[e.Tool.Name] = append(c.Tools[e.Tool.Name], rep)
		case runtime.EventQuestion:
			if e.Status != runtime.StatusWaiting {
				c.Answers[path] = e.Output
			}
		case runtime.EventRunFinished:
			finished = e
		}
	}
	if finished == nil {
		return nil, fmt.Errorf("run %s has not finished: only a finished run's outputs can be expected", r.ID)
	}
	if finished.Status != runtime.StatusCompleted {
		c.Expect.Status = string(finished.Status)
		if finished.Status == runtime.StatusFailed {
			c.Expect.Class = string(failedClass)
		}
	}
	c.Expect.Outputs = finished.Outputs
	note := expectedNote(r.Expected, finished.Outputs)
	if r.Expected != nil && len(r.Expected.Outputs) > 0 {
		c.Expect.Outputs = maps.Clone(finished.Outputs)
		maps.Copy(c.Expect.Outputs, r.Expected.Outputs)
	}
	route = slices.DeleteFunc(route, func(p string) bool { return p == "" })
	c.Expect.Route = route
	if concurrent {
		c.Expect.Route = map[string][]string{"includes": route}
	}
	var doc yaml.Node
	if err := doc.Encode(fileDoc{Pipeline: filepath.ToSlash(r.PipelinePath), Cases: []caseDoc{c}}); err != nil {
		return nil, fmt.Errorf("writing the test case: %w", err)
	}
	if note != "" {
		_, cases := mapEntry(&doc, "cases")
		key, _ := mapEntry(cases.Content[0], "expect")
		key.HeadComment = note
	}
	var b bytes.Buffer
	enc := yaml.NewEncoder(&b)
	enc.SetIndent(2)
	if err := enc.Encode(&doc); err != nil {
		return nil, fmt.Errorf("writing the test case: %w", err)
	}
	return b.Bytes(), enc.Close()
}

// expectedNote says where a case's expected outputs come from when a
// batch scored the run: which the dataset gave in place of the run's, or
// what the dataset expected and why the case could not expect it.
func expectedNote(e *Expected, gave map[string]any) string {
	switch {
	case e == nil:
		return ""
	case len(e.Outputs) > 0:
		var lines []string
		for _, k := range slices.Sorted(maps.Keys(e.Outputs)) {
			if !reflect.DeepEqual(e.Outputs[k], gave[k]) {
				lines = append(lines, fmt.Sprintf("outputs.%s: what %s expected; the run gave %s", k, e.Source, oneLine(gave[k])))
			}
		}
		if lines == nil {
			return ""
		}
		return strings.Join(append(lines, "This case fails until the pipeline gives it."), "\n")
	}
	lines := []string{fmt.Sprintf("%s expected:", e.Source)}
	for _, k := range slices.Sorted(maps.Keys(e.Fields)) {
		lines = append(lines, fmt.Sprintf("  %s: %s", k, oneLine(e.Fields[k])))
	}
	return strings.Join(append(lines, e.Why+", so the outputs below are what the run gave: make them what it should give."), "\n")
}

// mapEntry is the key and value of name in mapping m.
func mapEntry(m *yaml.Node, name string) (key, value *yaml.Node) {
	for i := 0; i+1 < len(m.Content); i += 2 {
		if m.Content[i].Value == name {
			return m.Content[i], m.Content[i+1]
		}
	}
	panic("flowtest: the case written has no " + name)
}

// oneLine is v on one line, as JSON (which YAML reads too).
func oneLine(v any) string {
	b, err := json.Marshal(v)
	if err != nil {
		return fmt.Sprint(v)
	}
	return string(b)
}

// modelReply is one model turn as a mock: what the model said, or how the
// call failed when it said nothing.
func modelReply(t *runtime.Turn) (replyDoc, error) {
	if t.Reply == nil {
		return replyDoc{Error: mockedError(t.Class)}, nil
	}
	// The reply is the client's response in a live run and its JSON once
	// stored: read both as JSON.
	b, err := json.Marshal(t.Reply)
	if err != nil {
		return replyDoc{}, fmt.Errorf("reading a model reply: %w", err)
	}
	var reply map[string]any
	if err := json.Unmarshal(b, &reply); err != nil {
		return replyDoc{}, fmt.Errorf("reading a model reply: %w", err)
	}
	rep := replyDoc{}
	rep.Text, _ = reply["text"].(string)
	calls, _ := reply["tool_calls"].([]any)
	for _, c := range calls {
		call, _ := c.(map[string]any)
		name, _ := call["name"].(string)
		args, _ := call["args"].(map[string]any)
		if args == nil {
			args = map[string]any{}
		}
		rep.Calls = append(rep.Calls, callDoc{Name: name, Args: args})
	}
	if u, ok := reply["usage"].(map[string]any); ok {
		rep.Usage = &usageDoc{Prompt: tokenCount(u["prompt"]), Completion: tokenCount(u["completion"])}
	}
	return rep, nil
}

// mockedError is the model error a mock can give that the client treats
// as the recorded one was: retried or not.
func mockedError(c errclass.Class) string {
	switch c {
	case errclass.RateLimit, errclass.Timeout:
		return string(c)
	case errclass.Server, errclass.Connection:
		return string(errclass.Server)
	}
	return string(errclass.Critical)
}

// nodeReply is a tool or code node's result as a mock.
func nodeReply(e *runtime.Event) replyDoc {
	if e.Type == runtime.EventNodeFailed {
		return replyDoc{Error: string(e.Class), Message: e.Error}
	}
	return replyDoc{Output: &anyValue{e.Output}}
}

func tokenCount(v any) int {
	n, _ := jsonvalue.Number(v)
	return int(n)
}

// The test file as written: the shape Load reads.
type fileDoc struct {
	Pipeline string    `yaml:"pipeline"`
	Cases    []caseDoc `yaml:"cases"`
}

type caseDoc struct {
	Name    string                `yaml:"name"`
	Inputs  map[string]any        `yaml:"inputs,omitempty"`
	Restore *restoreDoc           `yaml:"restore,omitempty"`
	Edits   map[string]any        `yaml:"edits,omitempty"`
	Mocks   map[string][]replyDoc `yaml:"mocks,omitempty"`
	Tools   map[string][]replyDoc `yaml:"tools,omitempty"`
	Answers map[string]any        `yaml:"answers,omitempty"`
	Expect  expectDoc             `yaml:"expect"`
}

type replyDoc struct {
	Text    string    `yaml:"text,omitempty"`
	Calls   []callDoc `yaml:"calls,omitempty"`
	Output  *anyValue `yaml:"output,omitempty"`
	Error   string    `yaml:"error,omitempty"`
	Message string    `yaml:"message,omitempty"`
	Usage   *usageDoc `yaml:"usage,omitempty"`
}

// anyValue keeps a null, false or 0 output written (omitempty drops
// only a nil pointer).
type anyValue struct{ v any }

func (a *anyValue) MarshalYAML() (any, error) { return a.v, nil }

type callDoc struct {
	Name string         `yaml:"name"`
	Args map[string]any `yaml:"args"`
}

type usageDoc struct {
	Prompt     int `yaml:"prompt"`
	Completion int `yaml:"completion"`
}

type expectDoc struct {
	Status  string         `yaml:"status,omitempty"`
	Class   string         `yaml:"class,omitempty"`
	Outputs map[string]any `yaml:"outputs"`
	// Route is the steps in order, or, when map items or parallel
	// branches ran at once and a rerun may interleave them otherwise,
	// {includes: steps}.
	Route any `yaml:"route"`
}

// RelativePipeline is the pipeline path a test file written to testFile
// names: relative to the test file's directory when it can be.
func RelativePipeline(pipelineAbs, testFile string) string {
	dir, err := filepath.Abs(filepath.Dir(testFile))
	if err != nil {
		return pipelineAbs
	}
	if rel, err := filepath.Rel(dir, pipelineAbs); err == nil {
		return rel
	}
	return pipelineAbs
}
