package main

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"strings"
	"sync"

	"gopkg.in/yaml.v3"

	"github.com/flowrun/flowrun/dsl"
	"github.com/flowrun/flowrun/durable"
	"github.com/flowrun/flowrun/figures"
	"github.com/flowrun/flowrun/jsonvalue"
	"github.com/flowrun/flowrun/llm"
	"github.com/flowrun/flowrun/nodes"
	"github.com/flowrun/flowrun/redact"
	"github.com/flowrun/flowrun/runtime"
	"github.com/flowrun/flowrun/store"
)

// inputFlags collects repeated --input k=v flags.
type inputFlags []string

func (f *inputFlags) String() string     { return strings.Join(*f, ",") }
func (f *inputFlags) Set(v string) error { *f = append(*f, v); return nil }

func runCmd(ctx context.Context, args []string, stdin io.Reader, stdout, stderr io.Writer) int {
	fs := newFlagSet("run", "flowrun [run] FILE [--input k=v ...] [--inputs FILE] [--json]\n\nRuns a pipeline. On success stdout holds its outputs as one JSON object;\nprogress goes to stderr. Exit 0 completed, 1 failed or stopped, 2 invalid.")
	var kv inputFlags
	fs.Var(&kv, "input", "an input as `name=value` (repeatable); JSON values are parsed for non-string inputs")
	inputsFile := fs.String("inputs", "", "read inputs from a JSON or YAML `file`")
	asJSON := fs.Bool("json", false, "print one JSON event per line on stdout instead of the outputs")
	storePath := storeFlag(fs)
	var mf modelFlags
	mf.register(fs)
	var hf humanFlags
	hf.register(fs)
	files, code, ok := parseFlags(fs, args, stdout, stderr)
	if !ok {
		return code
	}
	if len(files) != 1 {
		fmt.Fprintln(stderr, "flowrun run: name one pipeline file (see flowrun run --help)")
		return exitInvalid
	}
	p := loadPipeline(files[0], stderr)
	if p == nil {
		return exitInvalid
	}
	inputs, err := readInputs(p, *inputsFile, kv)
	if err != nil {
		fmt.Fprintf(stderr, "flowrun: %v\n", err)
		return exitInvalid
	}
	live := liveView(*asJSON, stderr)
	res, err := startRun(ctx, p, inputs, launch{models: &mf, store: *storePath, sink: progressSink(*asJSON, stdout, live),
		onDelta: live.onDelta(), human: newHuman(hf, stdin, stderr), maxLoops: hf.maxLoops}, stderr)
	var setup *setupError
	if errors.As(err, &setup) {
		fmt.Fprintf(stderr, "flowrun: %v\n", setup.err)
		return setup.code
	}
	return report(res, err, *asJSON, stdout, stderr)
}

// launch is what starting a run takes besides the pipeline and its
// inputs: flowrun run and flowrun mcp serve start runs the same way.
type launch struct {
	models *modelFlags
	// store is the store's path; db, when set, is an open store used instead.
	store    string
	db       *store.Store
	sink     runtime.EventSink
	onDelta  func(path, text string)
	human    runtime.Human
	maxLoops int
	// remote: the inputs came from a remote caller (the web UI, MCP
	// serve), so no path in them is read outside the pipeline directory.
	remote bool
}

// setupError is a run that could not start, with the exit code it gives.
type setupError struct {
	code int
	err  error
}

func (e *setupError) Error() string { return e.err.Error() }
func (e *setupError) Unwrap() error { return e.err }

// startRun checks that p can run here with inputs, then runs it as a
// durable run in the store. The model client, sandbox and MCP servers it
// starts end with it.
func startRun(ctx context.Context, p *dsl.Pipeline, inputs map[string]any, l launch, stderr io.Writer) (*runtime.Result, error) {
	ms, err := startModels(p, l.models, stderr)
	if err != nil {
		return nil, &setupError{exitInvalid, err}
	}
	defer ms.finish(stderr)
	ms.svc.OnDelta = l.onDelta
	kinds := nodes.Kinds(ms.svc)
	if err := kinds.Check(p); err != nil {
		return nil, &setupError{exitFailed, err}
	}
	if _, err := runtime.PrepareInputsFrom(p, inputs, l.remote); err != nil {
		return nil, &setupError{exitInvalid, err}
	}
	st := l.db
	if st == nil {
		if st, err = store.Open(l.store); err != nil {
			return nil, &setupError{exitFailed, err}
		}
		defer st.Close()
	}
	ms.useStore(st)
	runner := &durable.Runner{Store: st, Kinds: kinds, Sink: ms.withTraces(l.sink), Human: l.human, MaxLoops: l.maxLoops, RemoteInputs: l.remote}
	return runner.Start(ctx, p, inputs)
}

func storeFlag(fs *flag.FlagSet) *string {
	return fs.String("store", store.DefaultPath(), "the run store (SQLite `file`; FLOWRUN_STORE sets the default)")
}

func progressSink(asJSON bool, stdout io.Writer, live *textSink) runtime.EventSink {
	if asJSON {
		return &jsonSink{w: stdout}
	}
	return live
}

// liveView is the progress view on stderr; on a terminal it also shows
// model text as it streams in.
func liveView(asJSON bool, stderr io.Writer) *textSink {
	t := &textSink{w: stderr}
	if f, ok := fileOf(stderr); ok && !asJSON && isTerminal(f) {
		t.stream = true
	}
	return t
}

// report prints how a run ended and returns the exit code.
func report(res *runtime.Result, err error, asJSON bool, stdout, stderr io.Writer) int {
	if res == nil {
		fmt.Fprintf(stderr, "flowrun: %v\n", err)
		return exitFailed
	}
	if !asJSON && res.Outputs != nil && res.Status == runtime.StatusCompleted {
		writeJSON(stdout, res.Outputs)
	}
	switch res.Status {
	case runtime.StatusCompleted:
		return exitOK
	case runtime.StatusWaiting:
		q := res.Pending
		if q.Kind == runtime.QuestionConfirm {
			fmt.Fprintf(stderr, "flowrun: run %s is waiting: running %s needs your confirmation.\n", res.RunID, q.Path)
		} else {
			fmt.Fprintf(stderr, "flowrun: run %s is waiting for an answer (%s): %s\n", res.RunID, q.Path, q.Text)
		}
		fmt.Fprintf(stderr, "To continue: %s\n", answerCommand(res.RunID, q))
		return exitOK
	case runtime.StatusStopped:
		hint := "flowrun resume " + res.RunID
		switch {
		case res.Pending != nil:
			hint = answerCommand(res.RunID, res.Pending)
		case strings.Contains(res.Reason, "limits."):
			// Limits count over the whole run, resumes included.
			hint = "raise the limit in the pipeline, then flowrun resume " + res.RunID + " --allow-changed"
		}
		fmt.Fprintf(stderr, "flowrun: run %s stopped: %s\nTo continue: %s\n", res.RunID, res.Reason, hint)
	default:
		fmt.Fprintf(stderr, "flowrun: run %s failed: %v\n", res.RunID, res.Err)
		var lost *store.LostError
		if !errors.As(res.Err, &lost) {
			fmt.Fprintf(stderr, "After fixing the cause, continue it with: flowrun resume %s\n", res.RunID)
		}
	}
	return exitFailed
}

// readInputs merges --inputs FILE and --input k=v (the flags win). A flag
// value is taken as text for string inputs and parsed as JSON otherwise.
func readInputs(p *dsl.Pipeline, file string, kv []string) (map[string]any, error) {
	in := map[string]any{}
	if file != "" {
		b, err := readCapped(file)
		if err != nil {
			return nil, fmt.Errorf("--inputs: %w", err)
		}
		var doc yaml.Node
		if err := yaml.Unmarshal(b, &doc); err != nil {
			return nil, fmt.Errorf("--inputs %s: %v", file, err)
		}
		m, ok := dsl.Plain(&doc).(map[string]any)
		if !ok {
			return nil, fmt.Errorf("--inputs %s: expected a mapping of input names to values", file)
		}
		in = m
	}
	types := map[string]string{}
	for _, i := range p.Inputs {
		types[i.Name] = i.Type
	}
	for _, s := range kv {
		name, raw, ok := strings.Cut(s, "=")
		if !ok || name == "" {
			return nil, fmt.Errorf("--input %q: write it as name=value", s)
		}
		if file, ok := strings.CutPrefix(raw, "@"); ok && file != "" {
			v, err := readInputFile(name, file, types[name] == "string")
			if err != nil {
				return nil, err
			}
			in[name] = v
			continue
		}
		if types[name] == "string" {
			in[name] = raw
			continue
		}
		if v, err := jsonvalue.Decode([]byte(raw)); err == nil {
			in[name] = v
		} else {
			in[name] = raw
		}
	}
	return in, nil
}

// readInputFile is --input name=@file: a string input gets the file's
// text, any other input the JSON or YAML value the file holds.
func readInputFile(name, file string, text bool) (any, error) {
	b, err := readCapped(file)
	if err != nil {
		return nil, fmt.Errorf("--input %s=@%s: %w", name, file, err)
	}
	if text {
		return string(b), nil
	}
	var doc yaml.Node
	if err := yaml.Unmarshal(b, &doc); err != nil {
		return nil, fmt.Errorf("--input %s=@%s: not JSON or YAML: %v", name, file, err)
	}
	if len(doc.Content) == 0 {
		return nil, fmt.Errorf("--input %s=@%s: the file is empty", name, file)
	}
	return dsl.Plain(&doc), nil
}

// maxInputFileBytes caps a file read for --inputs or --input k=@file: its
// contents become the run's inputs, held in memory and in the run's record.
const maxInputFileBytes = 64 << 20

// readCapped reads a file of inputs, refusing one over maxInputFileBytes
// without reading past the cap. It may be a pipe (--inputs <(cmd)).
func readCapped(file string) ([]byte, error) {
	f, err := os.Open(file)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	over := fmt.Errorf("%s is over the %d MiB limit for input files; pass a smaller file", file, maxInputFileBytes>>20)
	if fi, err := f.Stat(); err == nil && fi.Mode().IsRegular() && fi.Size() > maxInputFileBytes {
		return nil, over
	}
	b, err := io.ReadAll(io.LimitReader(f, maxInputFileBytes+1))
	if err != nil {
		return nil, fmt.Errorf("reading %s: %w", file, err)
	}
	if len(b) > maxInputFileBytes {
		return nil, over
	}
	return b, nil
}

// textSink prints one plain line per event, for people.
type textSink struct {
	w        io.Writer
	stream   bool // show streamed model text (a terminal)
	exchange bool // show each turn's reply and each tool's result (flowrun show)

	mu        sync.Mutex
	streaming string        // path whose text is being shown
	redacted  redact.Stream // of that text
}

// delta shows streamed model text under the node it belongs to.
// onDelta is what receives streamed text: nothing when the view does not
// show it, so that stream: auto sends plain requests.
func (t *textSink) onDelta() func(path, text string) {
	if !t.stream {
		return nil
	}
	return t.delta
}

func (t *textSink) delta(path, text string) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.streaming != path {
		t.endStream()
		fmt.Fprintf(t.w, "\n  ... %s: ", path)
		t.streaming = path
	}
	fmt.Fprint(t.w, t.redacted.Next(text))
}

// endStream ends the line of streamed text, if one is being shown.
func (t *textSink) endStream() {
	if t.streaming != "" {
		fmt.Fprintln(t.w, t.redacted.End())
		t.streaming = ""
	}
}

func (t *textSink) Event(e runtime.Event) {
	t.mu.Lock()
	t.endStream()
	t.mu.Unlock()
	switch e.Type {
	case runtime.EventModelTurn:
		tu := e.Turn
		if tu.Error != "" {
			retry := ""
			if tu.WaitMS > 0 {
				retry = fmt.Sprintf(" (retry in %s)", figures.Duration(tu.WaitMS))
			}
			fmt.Fprintf(t.w, "  turn  %-40s %-8s try %d: %s: %s%s\n", e.Path, tu.Model, tu.Try, tu.Class, tu.Error, retry)
		} else if tu.Cached {
			fmt.Fprintf(t.w, "  turn  %-40s %-8s cached $0\n", e.Path, tu.Model)
		} else {
			fmt.Fprintf(t.w, "  turn  %-40s %-8s %s %s %s\n", e.Path, tu.Model, tokens(tu.Usage), figures.USD(tu.CostUSD), figures.Duration(tu.LatencyMS))
		}
		if t.exchange {
			t.indent(replyText(tu.Reply))
		}
	case runtime.EventSandboxRun:
		status := "ok"
		if e.Class != "" {
			status = string(e.Class) + ": " + firstLine(e.Error)
		}
		fmt.Fprintf(t.w, "  code  %-40s %-8s %s %s\n", e.Path, e.Kind, status, figures.Duration(e.DurationMS))
		if t.exchange {
			if out, ok := e.Output.(map[string]any); ok {
				t.indent(fmt.Sprint(out["stdout"]))
			}
		}
	case runtime.EventQuestion:
		answer := "waiting for an answer"
		if e.Status == "" {
			b, _ := jsonvalue.Marshal(e.Output)
			answer = "answered " + string(b)
		}
		fmt.Fprintf(t.w, "  ask   %-40s %q: %s\n", e.Path, e.Message, answer)
	case runtime.EventToolCall:
		status := "ok"
		if e.Tool.Error != "" {
			status = "error: " + e.Tool.Error
		}
		fmt.Fprintf(t.w, "  tool  %-40s %-8s %s\n", e.Path, e.Tool.Name, status)
		if t.exchange {
			args, _ := jsonvalue.Marshal(e.Tool.Args)
			result, _ := jsonvalue.Marshal(e.Tool.Result)
			t.indent("args: " + string(args) + "\nresult: " + string(result))
		}
	case runtime.EventToolProgress:
		fmt.Fprintf(t.w, "  ...   %-40s %-8s %s\n", e.Path, e.Tool.Name, firstLine(e.Message))
	case runtime.EventRemoteWork:
		// Polls are counted, not shown: a long call polls hundreds of times.
		if r := e.Remote; r.What != "polled" {
			fmt.Fprintf(t.w, "  bg    %-40s %-8s %s %s%s\n", e.Path, r.ID, r.What, r.Status, remoteNote(r))
		}
	case runtime.EventRunStarted:
		fmt.Fprintf(t.w, "run %s: %s\n", e.Run, e.Pipeline)
	case runtime.EventNodeFinished:
		fmt.Fprintf(t.w, "  ok    %-40s %-8s %s\n", e.Path, e.Kind, figures.Duration(e.DurationMS))
	case runtime.EventNodeRestored:
		fmt.Fprintf(t.w, "  done  %-40s %-8s restored from its checkpoint\n", e.Path, e.Kind)
	case runtime.EventNodeSkipped:
		fmt.Fprintf(t.w, "  skip  %-40s %-8s when was false\n", e.Path, e.Kind)
	case runtime.EventNodeFailed:
		fmt.Fprintf(t.w, "  FAIL  %-40s %-8s %s: %s %s\n", e.Path, e.Kind, e.Class, e.Error, e.Message)
	case runtime.EventNodeRetry:
		fmt.Fprintf(t.w, "  retry %-40s attempt %d in %s after %s: %s\n", e.Path, e.Attempt, figures.Duration(e.DurationMS), e.Class, e.Error)
	case runtime.EventLoopExhausted, runtime.EventMapItemSkipped:
		fmt.Fprintf(t.w, "  note  %-40s %s %s\n", e.Path, e.Message, e.Error)
	case runtime.EventRunFinished:
		fmt.Fprintf(t.w, "run %s: %s\n", e.Run, e.Status)
	}
}

// remoteNote is what a remote_work line adds after the status.
func remoteNote(r *runtime.RemoteWork) string {
	switch {
	case r.Error != "":
		return " (the cancel request failed: " + firstLine(r.Error) + ")"
	case r.Polls > 0:
		return fmt.Sprintf(" after %d polls", r.Polls)
	}
	return ""
}

func firstLine(s string) string {
	line, _, _ := strings.Cut(s, "\n")
	return line
}

// indent prints text under an event line, indented.
func (t *textSink) indent(text string) {
	if strings.TrimSpace(text) == "" {
		return
	}
	for _, line := range strings.Split(strings.TrimRight(text, "\n"), "\n") {
		fmt.Fprintf(t.w, "        | %s\n", line)
	}
}

// replyText is what a model answered: its text and any tool calls.
func replyText(reply any) string {
	b, _ := jsonvalue.Marshal(reply)
	var r struct {
		Text      string `json:"text"`
		ToolCalls []struct {
			Name      string `json:"name"`
			Arguments string `json:"arguments"`
		} `json:"tool_calls"`
	}
	_ = json.Unmarshal(b, &r)
	out := r.Text
	for _, c := range r.ToolCalls {
		out += fmt.Sprintf("\n-> %s(%s)", c.Name, c.Arguments)
	}
	return strings.TrimLeft(out, "\n")
}

func tokens(u any) string {
	got := turnUsage(u)
	if got.Estimated {
		return fmt.Sprintf("~%d tokens (estimated)", got.Total)
	}
	return fmt.Sprintf("%d tokens", got.Total)
}

// turnUsage reads a model_turn's usage, live or decoded from the store.
func turnUsage(u any) llm.Usage {
	b, _ := jsonvalue.Marshal(u)
	var got llm.Usage
	_ = json.Unmarshal(b, &got)
	return got
}

// estimatedTokens reports whether any model turn among events counted its
// tokens locally because the server reported none.
func estimatedTokens(events []runtime.Event) bool {
	for _, e := range events {
		if e.Type == runtime.EventModelTurn && e.Turn != nil && turnUsage(e.Turn.Usage).Estimated {
			return true
		}
	}
	return false
}

// jsonSink prints one JSON event per line, for programs (see outJSON).
type jsonSink struct{ w io.Writer }

func (j *jsonSink) Event(e runtime.Event) {
	b, err := jsonvalue.Marshal(e)
	if err != nil {
		return
	}
	_, _ = j.w.Write(append(outJSON(b), '\n'))
}

// loadPipeline loads a pipeline, printing its diagnostics (warnings too);
// nil when it does not load.
func loadPipeline(path string, stderr io.Writer) *dsl.Pipeline {
	p, ds := dsl.Load(path)
	if len(ds) > 0 {
		fmt.Fprintln(stderr, ds.String())
	}
	return p
}
